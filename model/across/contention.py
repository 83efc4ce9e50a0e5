"""A busy host is not a slower guest: which numbers follow the host CPU, and when not to judge them.

The numbers that follow the host CPU the guest gets (:data:`HOST_CPU_BOUND`: IOPS, latencies, the
depths the guest keeps up, IOPS scaling) move with the host's other work, most under QEMU's TCG,
where every guest instruction is emulated on a host thread. So each run records how long its
guest's vCPUs waited for a host CPU in its most contended window (:data:`WAIT_PROPERTY`,
model/parse/hostcpu.py). A comparison across runs (``python -m reports.compare`` and
``--baseline``, model/across/against_baseline.py) judges such a number only when neither run's vCPUs
waited more than :data:`WAIT_MAX_PCT`; otherwise its move is reported with both runs' waits
(:func:`busy_host` says why), never as a regression. A run that did not record the figure (an
older run, vSphere) is no evidence: what the other run recorded decides. ``compare`` has whole
runs: a rule that records no wait of its own (buffered-direct, stall-tolerance) is judged by the
run's other rules on the same configuration (model/across/moves.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from model.judging.host_busy import WAIT_MAX_PCT as HOST_WAIT_MAX_PCT
from model.rules import RULE_MODULES

#: Most a run's vCPUs may have waited for a host CPU for its host-CPU-bound numbers to be judged
#: against another run's (model/judging/host_busy.py says where 10 % comes from).
WAIT_MAX_PCT = HOST_WAIT_MAX_PCT
#: What follows the host CPU the guest gets whichever rule records it: the depths the guest keeps up
#: (queue-depth's, buffered-direct's, stall-tolerance's held requests).
SHARED_HOST_CPU_BOUND: tuple[str, ...] = (r"[a-z0-9_]*(depth|aqu_sz|inflight)[a-z0-9_]*",)
#: The numbers that follow the host CPU the guest gets (names as model/across/metrics.py knows them):
#: what each rule module declares (its ``HOST_CPU_BOUND``: rates, latencies, the scaling of IOPS with
#: depth) and the shared ones.
HOST_CPU_BOUND = re.compile("|".join(f"(?:{p})" for p in (*(p for rule in RULE_MODULES for p in rule.HOST_CPU_BOUND),
                                                           *SHARED_HOST_CPU_BOUND)))
#: The property each run records its vCPUs' wait under (suites/assertions.py).
WAIT_PROPERTY = "host_vcpu_wait_pct"


def busy_host(waits: Mapping[str, Sequence[float]], wait_max_pct: float = WAIT_MAX_PCT) -> str:
    """Why host-CPU-bound numbers cannot be judged ("": they can): ``waits`` holds, per run (by the
    name a reader knows it by: "this run", "run 7"), its recorded :data:`WAIT_PROPERTY` samples; a run
    with none is no evidence. The sentence names every run's highest wait."""
    worst = {who: max(values) for who, values in waits.items() if values}
    if not any(w > wait_max_pct for w in worst.values()):
        return ""
    said = " and ".join(f"{w:g} % in {who}" for who, w in worst.items())
    return (f"the host held the guest's vCPUs back: they waited for a host CPU {said} of a window (above "
            f"{wait_max_pct:g} %, the numbers that follow the host's free CPU are not the guest's to answer for)")
