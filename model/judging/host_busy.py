"""A bound the guest overran while the host held its vCPUs back is not the guest's overrun.

Some rules time a step against a bound: the guest must show a disk the host added, or a size the
host set, within 5 s (hotplug, resize). Under QEMU's TCG every guest instruction runs on a host
thread, so on a busy host the guest's answer comes late for reasons that are the host's. Each
bounded interval therefore reads how long the guest's vCPUs waited for a host CPU over that very
interval (model/parse/hostcpu.py; measure/hostload.py) and records it beside the time it judges
(``seen_vcpu_wait_pct``, ``grow_vcpu_wait_pct``...). A bound overrun whose vCPUs waited more than
:data:`BOUND_WAIT_MAX_PCT` is not judged: it becomes a note, and the verdict's :data:`PROPERTY`
says why. A verdict that then has no problem left could not be judged at all: the test ends in
ERROR (:class:`HostBusy`, exit 10), never a pass, with the verdict and its numbers kept. A verdict
that fails on something else (a wrong size, an oops) still fails on that. An overrun whose vCPUs
did not wait (or where the wait could not be read: vSphere) stays a failure blamed on the guest.

Example::

    o = Overrun("the guest showed sdc 10.58 s after the host added it, past the bound of 5 s", 62.4)
    split_overruns([o])  # ([], ["... not judged: the guest's vCPUs waited for a host CPU 62.4 % ..."])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from model.judging.verdict import Number

#: Most the guest's vCPUs may have waited for a host CPU (% of the bounded interval, per vCPU) for
#: an overrun of a 5 s bound to be blamed on the guest. The bounds rest on steps measured at
#: 0.28-0.71 s (hotplug) and 0.03-0.24 s (resize) on this 2-core TCG machine, with the vCPU wait as
#: on a quiet host: 6.0-6.7 % idle (the guest's own QEMU threads), 7.4-9.3 % lightly busy (load
#: 1.3-2; model/across/contention.py's WAIT_MAX_PCT). Up to 10 % the host took from the guest no
#: more than it did where the bounds were measured, with 7x (hotplug) and 20x (resize) room: an
#: overrun there is the guest's. Above it the host held the guest back more than on any host the
#: bounds rest on; at load 15 (other guests' runs beside it) a healthy guest showed a hot-plugged
#: disk after 10.58 s: such an overrun is not evidence against the guest. The same 10 % as
#: WAIT_MAX_PCT, measured for IOPS: the bound's 7-20x margin would allow a higher figure for the
#: guest's own steps, but the SSH round trip and QEMU's main loop (which do the hot-plug and carry
#: the guest's answer) wait for the same host CPUs unmeasured, so the vCPUs' wait is the least of
#: the host's delay and the threshold stays at the quiet host's edge.
BOUND_WAIT_MAX_PCT = 10.0
#: The property a verdict names its overruns not judged under, with the reason (text).
PROPERTY = "host_held_back"


class HostBusy(Exception):
    """A rule's time bound could not be judged: the guest overran it while its vCPUs waited for a
    host CPU more than :data:`BOUND_WAIT_MAX_PCT` of the interval, and nothing else failed. No
    verdict: an ERROR (exit 10), with the rule's numbers kept in the record."""


@dataclass(frozen=True)
class Overrun:
    """A bound the guest overran (``problem``: the sentence that says so, as a failure would) and how
    long its vCPUs waited for a host CPU over the bounded interval (% per vCPU; None: not read)."""

    problem: str
    vcpu_wait_pct: float | None


def split_overruns(overruns: Sequence[Overrun],
                   wait_max_pct: float = BOUND_WAIT_MAX_PCT) -> tuple[list[str], list[str]]:
    """(problems, not judged): an overrun whose vCPUs waited at most ``wait_max_pct`` (or whose wait
    is unknown) is the guest's problem; one whose vCPUs waited more is a sentence that names the wait."""
    problems, held = [], []
    for o in overruns:
        if o.vcpu_wait_pct is None or o.vcpu_wait_pct <= wait_max_pct:
            problems.append(o.problem)
        else:
            held.append(f"{o.problem}: not judged: the guest's vCPUs waited for a host CPU {o.vcpu_wait_pct:g} % of "
                        f"that interval (above {wait_max_pct:g} %, the host held the guest back: BOUND_WAIT_MAX_PCT)")
    return problems, held


def fold_overruns(overruns: Sequence[Overrun], problems: list[str], notes: list[str], props: dict[str, Number],
                  wait_max_pct: float = BOUND_WAIT_MAX_PCT) -> None:
    """:func:`split_overruns` into a verdict's ``problems`` and ``notes``; the ones not judged also
    under :data:`PROPERTY` in ``props``."""
    guest, held = split_overruns(overruns, wait_max_pct)
    problems += guest
    notes += held
    if held:
        props[PROPERTY] = "; ".join(held)


def held_back_reason(properties: Mapping[str, object]) -> str:
    """The overruns a verdict left unjudged (its :data:`PROPERTY`), or "" where it left none."""
    said = properties.get(PROPERTY)
    return said if isinstance(said, str) else ""
