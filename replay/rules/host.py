"""What the rules' host actions share: the guest's vCPU times read on the host, and QEMU's events waited for.

The vCPU times are the host's scheduler's, per vCPU thread (``/proc/<thread>/schedstat``: the ns it
ran, the ns it waited runnable in a run queue), the threads named by QMP ``query-cpus-fast``: what
libvirt's ``vcpu.N.time`` and ``vcpu.N.delay`` read in the run, so that a bound the guest overran while
the host held its vCPUs back is judged as the run judges it (model/judging/host_busy.py). An action
answers them as one word, ``vcpu:N:RUN:WAIT:HOST_S`` (``vcpu:none`` where they cannot be read); the
judge reads them back from the call's answer with :func:`vcpu_of`.

Example::

    answer = f"ok {vcpu_word(qmp)}"            # in a host action
    wait_pct(vcpu_of(add.answer), vcpu_of(seen.answer))   # 12.5: % per vCPU between the two reads
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from model.judging.host_busy import held_back_reason
from model.judging.verdict import RuleVerdict
from model.parse.hostcpu import HostCpuShare, VcpuTimes
from replay.qemu import CannotTest, HostCall
from replay.qmp import Qmp, QmpError

#: Shell functions of the guest's scripts that time a wait with the guest's clock (its uptime, 10 ms
#: steps): ``up`` now, ``past T0 S`` whether S seconds have passed since T0, ``since T0`` the seconds.
GUEST_CLOCK = r"""up() { cut -d' ' -f1 /proc/uptime; }
past() { awk -v a="$1" -v b="$(up)" -v s="$2" 'BEGIN{exit !(b-a>=s)}'; }
since() { awk -v a="$1" -v b="$(up)" 'BEGIN{printf "%.2f", b-a}'; }
"""
#: Seconds between two looks at QEMU's monitor while waiting for an event.
POLL_S = 0.1


def vcpu_word(qmp: Qmp) -> str:
    """The guest's vCPU times now, as one word of an answer; ``vcpu:none`` where the host does not say
    (no thread ids from QEMU, no schedstat in the host's kernel)."""
    try:
        threads = [c["thread-id"] for c in qmp.execute("query-cpus-fast")["return"]]
        run = wait = 0
        for tid in threads:
            with open(f"/proc/{int(tid)}/schedstat") as f:
                ran, waited = f.read().split()[:2]
            run, wait = run + int(ran), wait + int(waited)
    except (QmpError, OSError, KeyError, TypeError, ValueError):
        return "vcpu:none"
    return f"vcpu:{len(threads)}:{run}:{wait}:{time.monotonic():.6f}" if threads else "vcpu:none"


def vcpu_of(answer: str) -> VcpuTimes | None:
    """The vCPU times in an action's answer (its ``vcpu:...`` word), None where it has none."""
    for word in answer.split():
        parts = word.split(":")
        if parts[0] == "vcpu" and len(parts) == 5:
            try:
                return VcpuTimes(int(parts[1]), int(parts[2]), int(parts[3]), float(parts[4]))
            except ValueError:
                return None
    return None


def wait_pct(first: VcpuTimes | None, last: VcpuTimes | None) -> float | None:
    """How long the vCPUs waited for a host CPU between two reads, % per vCPU (None: unknown)."""
    share = HostCpuShare.between(first, last) if first is not None and last is not None else None
    return None if share is None else share.wait_pct


def wait_event(qmp: Qmp, event: str, device: str, deadline_s: float, after_s: float = 0.0) -> dict[str, Any] | None:
    """QEMU's ``event`` for ``device`` (its ``data.device``) stamped at or after the wall time ``after_s``
    (an earlier one is of an earlier request: a device added again under the same id), read until the
    host's monotonic clock passes ``deadline_s``; None if it did not come. The monitor reads events while
    it waits for a reply, so a cheap command is sent every :data:`POLL_S`."""
    while True:
        for e in qmp.events:
            data = e.get("data")
            if (e.get("event") == event and isinstance(data, dict) and data.get("device") == device
                    and event_time_s(e) >= after_s):
                return e
        if time.monotonic() >= deadline_s:
            return None
        time.sleep(POLL_S)
        qmp.execute("query-status")


def event_time_s(event: Mapping[str, Any]) -> float:
    """An event's wall-clock time (QEMU's ``timestamp``), in seconds."""
    stamp = event.get("timestamp", {})
    return float(stamp.get("seconds", 0)) + float(stamp.get("microseconds", 0)) / 1e6


def calls(host_calls: Sequence[HostCall], name: str) -> list[HostCall]:
    """The guest's calls of action ``name``, in order; CannotTest where one failed (its ERROR answer)."""
    found = [c for c in host_calls if c.name == name]
    for c in found:
        if c.error:
            raise CannotTest(f"the host could not do what the guest asked ({name} {' '.join(c.args)}): {c.error}")
    return found


def judged(verdict: RuleVerdict) -> RuleVerdict:
    """``verdict``, unless it passed only by leaving a bound unjudged because the host held the guest's
    vCPUs back (model/judging/host_busy.py): the run makes that an ERROR, the replay a CannotTest (125)."""
    held = held_back_reason(verdict.properties)
    if verdict.passed and held:
        raise CannotTest(f"{verdict.rule} could not be judged: the host was busy: {held}")
    return verdict
