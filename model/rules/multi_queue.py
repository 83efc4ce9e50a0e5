"""Rule 7, multi-queue: with N queues configured and more than one vCPU, the guest spreads I/O
across more than one of them.

Evidence per queue is the completion interrupts the device raised on each request virtqueue
(``/proc/interrupts``, one MSI-X vector per queue) over a workload of one fio job per vCPU,
and the guest's own count of hardware queues (``/sys/block/X/mq``).

Example::

    judge_multiqueue(configured_queues=2, guest_hw_queues=2, vcpus=2, per_queue={0: 900, 1: 0}).passed
    # False: every completion came on queue 0
"""

from __future__ import annotations

from collections.abc import Mapping

from model.blame import BlameSettings
from model.judging.figures import Pair, pair_figure
from model.judging.spec import PARAM, Metrics, MetricSpec
from model.judging.verdict import Number, RuleVerdict

RULE = "multi-queue"
#: The settings (model/blame.py's trail keys) the rule's verdict depends on.
BLAME = BlameSettings(frozenset({"nr_hw_queues"}))
#: Repeats without --repeats.
DEFAULT_REPEATS = 1
REPEATABLE = True
#: Which of its metrics follow the host CPU the guest gets (model/across/contention.py).
HOST_CPU_BOUND: tuple[str, ...] = ()
#: The workload, one fio job per online vCPU: 4 KiB random reads at depth 4 each, small requests that
#: complete one interrupt each, enough in flight for every queue to carry some.
BS_BYTES = 4096
DEPTH = 4

#: A queue counts as used when it carried at least this share of the completions. Measured here
#: (Debian 6.1, 2 vCPUs, one fio job pinned per vCPU, 2 s): the two queues split the
#: interrupts 45-55 %; with one job per CPU both queues must carry a real share, and a queue that
#: carries 10 % is used by more than stray housekeeping.
MIN_QUEUE_SHARE = 0.10

#: What the rule records (model/judging/spec.py): the queues and CPUs, and each queue's share of the
#: completions as its interrupt count; all parameters (an even spread is right, not a larger count).
METRICS: Metrics = (
    (r"configured_queues|guest_hw_queues|queues_used", MetricSpec("queues", PARAM)),
    (r"queue\d+_count", MetricSpec("interrupts", PARAM)),
    (r"vcpus|online_cpus", MetricSpec("cpus", PARAM)),
    (r"evidence", MetricSpec("", PARAM)),
)

#: compare's minimum effect per metric (model/across/moves.py's MIN_EFFECTS says how each is derived from
#: run-to-run noise). Each comment: the CV and the widest change between two healthy runs with 3 s / 2 s
#: windows, and the configuration each came from. An interrupt count moves with the IOPS of its window.
MIN_EFFECTS: Mapping[str, float] = {
    "queue0_count": 0.251,  # CV 5.92 % / 4.48 %, widest 19.8 % / 15.7 % (virtio-blk / virtio-blk)
    "queue1_count": 0.335,  # CV 6.14 % / 7.89 %, widest 19.2 % / 25.8 % (virtio-scsi / virtio-blk)
}


def not_applicable(configured_queues: int | None, vcpus: int | None = None) -> str:
    """Why the rule cannot run on a disk (a skip's reason), or "": it needs two queues or more configured
    (None: the guest chooses) and two vCPUs or more (``vcpus``: the guest's present CPUs; None: not read
    yet), for blk-mq maps each CPU's requests to one queue, so a guest with one CPU uses one queue however
    many it has."""
    if configured_queues is None:
        return "the guest chooses its queue count; no configured count to hold it to"
    if configured_queues < 2:
        return "one queue configured: nothing to spread over"
    if vcpus is not None and vcpus < 2:
        return (f"{configured_queues} queues configured, but the guest has {vcpus} vCPU: blk-mq maps each CPU's "
                "requests to one queue, so one CPU has nothing to spread over (give --guest-vcpus 2 or more)")
    return ""


def judge_multiqueue(configured_queues: int, guest_hw_queues: int, vcpus: int,
                     per_queue: Mapping[int, int], evidence: str = "completion interrupts per queue",
                     online_cpus: int | None = None) -> RuleVerdict:
    """``vcpus``: the vCPUs the hypervisor gave the guest; ``online_cpus``: how many the guest runs
    on (one fio job each). The guest must use min(configured queues, vCPUs) queues, at least 2."""
    online = vcpus if online_cpus is None else online_cpus
    total = sum(per_queue.values())
    used = sorted(q for q, n in per_queue.items() if total and n / total >= MIN_QUEUE_SHARE)
    shares = ", ".join(f"queue {q}: {n} ({(n / total if total else 0):.0%})" for q, n in sorted(per_queue.items()))
    lines = [(f"configured queues {configured_queues}, guest hardware queues {guest_hw_queues}, vCPUs {vcpus} "
              f"({online} online)"),
             f"{evidence}: {shares or 'none'}; queues used {len(used)}"]
    problems: list[str] = []
    notes: list[str] = []
    expected = min(configured_queues, vcpus)  # at least 2 where the rule runs (not_applicable)
    if guest_hw_queues < expected:
        problems.append(f"the guest set up {guest_hw_queues} hardware queue(s) for {configured_queues} configured "
                        f"and {vcpus} vCPUs: the driver does not use the device's queues")
    if total == 0:
        problems.append(f"no {evidence} during the workload: cannot tell which queues carried it")
    elif len(used) < min(expected, 2):
        problems.append(f"one fio job ran on each of {online} online vCPU(s), but only {len(used)} queue(s) carried "
                        f"at least {MIN_QUEUE_SHARE:.0%} of the I/O ({shares}); expected {expected}")
    if online < vcpus:
        notes.append(f"the guest runs on {online} of its {vcpus} vCPUs: blk-mq maps the offline CPUs' queues "
                     "to the online ones")
    props: dict[str, Number] = {"configured_queues": configured_queues, "guest_hw_queues": guest_hw_queues,
                                "vcpus": vcpus, "online_cpus": online, "queues_used": len(used), "evidence": evidence}
    for q, n in per_queue.items():
        props[f"queue{q}_count"] = n
    pairs = [Pair("interrupts: queue 0 / queue 1", per_queue[0], per_queue[1])] if {0, 1} <= per_queue.keys() else []
    figures = pair_figure(*pairs)
    return RuleVerdict(RULE, tuple(lines), tuple(problems), tuple(notes), props, figures)
