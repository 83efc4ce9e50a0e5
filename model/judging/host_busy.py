"""A bound the guest overran while the host held its vCPUs back is not the guest's overrun.

Some rules time a step against a bound: the guest must show a disk the host added, or a size the
host set, within 5 s (hotplug, resize). Under QEMU's TCG every guest instruction runs on a host
thread, so on a busy host the guest's answer comes late for reasons that are the host's. Each
bounded interval therefore reads how long the guest's vCPUs waited for a host CPU over that very
interval (model/parse/hostcpu.py; measure/hostload.py) and records it beside the time it judges
(``seen_vcpu_wait_pct``, ``grow_vcpu_wait_pct``...). A bound overrun that wait accounts for
(:func:`not_judged`: a late answer whose time less the wait fits the bound; no answer within the bound
while the vCPUs waited more than :data:`BOUND_WAIT_MAX_PCT`) is not judged: it becomes a note, and the
verdict's :data:`PROPERTY` says why. A verdict that then has no problem left could not be judged
at all: the test ends in ERROR (:class:`HostBusy`, exit 10), never a pass, with the verdict and its numbers kept. A verdict
that fails on something else (a wrong size, an oops) still fails on that. Any other overrun (the
wait does not account for it, or could not be read: vSphere) stays a failure blamed on the guest.

Example::

    o = Overrun("the guest showed sdc 10.58 s after the host added it, past the bound of 5 s", 60.67, 10.58, 5.0)
    split_overruns([o])  # ([], ["... not judged: the guest's vCPUs waited for a host CPU 60.67 % ..."])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from model.judging.verdict import Number

#: Most the guest's vCPUs may have waited for a host CPU (% of the bounded interval, per vCPU) for a
#: guest that never showed the change within the bound to be blamed for it. Healthy steps that met
#: their bound on this 2-core TCG machine showed waits of 16.4-60.7 % (hotplug on virtio-blk, the add
#: and the idle removal: the embedded guest at load 6-17 with up to 14 busy loops beside it, 0.36-0.61 s;
#: the cloud-init test image at load 11-15 with two, 3.01 s at 60.7 %): up to that a healthy guest is
#: seen to answer within 5 s, so one that never answered is its own fault (a guest withholding the disk
#: waited 10.6-39 %). Above 61 % no healthy run here says the guest could still answer. The quiet
#: host's 6-10 % (model/across/contention.py's WAIT_MAX_PCT, for IOPS) is no edge here: these short
#: intervals of a guest probing a device wait more than that on any host with other work. A guest that answered late has its own figure: see :func:`not_judged`.
BOUND_WAIT_MAX_PCT = 61.0
#: Most a run's vCPUs may have waited for a host CPU (% of a measured window, per vCPU) for the numbers
#: that follow the host CPU the guest gets (rates, latencies, the depths the guest keeps up) to be the
#: guest's. Measured with the queue-depth rule on virtio-blk and virtio-scsi (2 cores, TCG): on an idle
#: host the guest's own QEMU threads make its vCPU wait 6.0-6.7 %; with the host lightly busy (load 1.3-2)
#: 7.4-9.3 %, and ``qd32_iops`` stayed within 4.7 % (4844-5071 IO/s, inside its minimum effect). From
#: 11 % up it fell: 4707 IO/s at 11.2 %, 4347 at 15.2 %, 3841-3997 at 21-22 % (one to three busy
#: loops beside the guest), moves of 7-24 % that a comparison would call a regression. A comparison
#: across runs judges such numbers only under it (model/across/contention.py); a rule that holds them to
#: a bar derived from a quiet host leaves that bar unjudged above it, where its fault's own floor stays
#: judged (queue-depth, throttle).
WAIT_MAX_PCT = 10.0
#: The property a verdict names its overruns not judged under, with the reason (text).
PROPERTY = "host_held_back"


class HostBusy(Exception):
    """A rule's time bound could not be judged: the guest overran it while its vCPUs waited for a
    host CPU long enough to account for it (:func:`not_judged`), and nothing else failed. No
    verdict: an ERROR (exit 10), with the rule's numbers kept in the record."""


@dataclass(frozen=True)
class Overrun:
    """A bound the guest overran (``problem``: the sentence that says so, as a failure would) and how
    long its vCPUs waited for a host CPU over the bounded interval (% per vCPU; None: not read)."""

    problem: str
    vcpu_wait_pct: float | None
    #: how long the step took (None: the guest never showed the change within the bound, its wait ended there)
    took_s: float | None = None
    bound_s: float = 5.0


def not_judged(o: Overrun, wait_max_pct: float = BOUND_WAIT_MAX_PCT) -> bool:
    """Whether the host, not the guest, may have made ``o`` overrun its bound. A step that ended late:
    when the part of it the vCPUs did not spend waiting for a host CPU fits the bound (``took_s`` x (1 -
    wait) <= ``bound_s``: without that wait the guest would have answered in time). A step that never
    ended within the bound: when the vCPUs waited more than ``wait_max_pct`` of it. Never where the
    wait is unknown."""
    if o.vcpu_wait_pct is None:
        return False
    if o.took_s is None:
        return o.vcpu_wait_pct > wait_max_pct
    return o.took_s * (1 - o.vcpu_wait_pct / 100) <= o.bound_s


def split_overruns(overruns: Sequence[Overrun],
                   wait_max_pct: float = BOUND_WAIT_MAX_PCT) -> tuple[list[str], list[str]]:
    """(problems, not judged): an overrun the host may have caused (:func:`not_judged`) is a sentence
    that names the wait; any other is the guest's problem."""
    problems, held = [], []
    for o in overruns:
        if not not_judged(o, wait_max_pct):
            problems.append(o.problem)
        elif o.took_s is None:
            held.append(f"{o.problem}: not judged: the guest's vCPUs waited for a host CPU {o.vcpu_wait_pct:g} % of "
                        f"that interval (above {wait_max_pct:g} %, more than any healthy run here: BOUND_WAIT_MAX_PCT)")
        else:
            held.append(f"{o.problem}: not judged: the guest's vCPUs waited for a host CPU {o.vcpu_wait_pct:g} % of "
                        f"those {o.took_s:.2f} s; without that wait it answered within the bound of {o.bound_s:g} s")
    return problems, held


def fold_overruns(overruns: Sequence[Overrun], problems: list[str], notes: list[str], props: dict[str, Number],
                  wait_max_pct: float = BOUND_WAIT_MAX_PCT) -> None:
    """:func:`split_overruns` into a verdict's ``problems`` and ``notes``; the ones not judged also
    under :data:`PROPERTY` in ``props``."""
    guest, held = split_overruns(overruns, wait_max_pct)
    problems += guest
    fold_held(held, notes, props)


def fold_held(held: Sequence[str], notes: list[str], props: dict[str, Number]) -> None:
    """Problems left unjudged because the host held the guest's vCPUs back (``held``: sentences that
    name the wait) into a verdict's ``notes`` and under :data:`PROPERTY` in ``props``, after any there."""
    notes += held
    if held:
        props[PROPERTY] = "; ".join(s for s in (held_back_reason(props), *held) if s)


def rate_wait_text(vcpu_wait_pct: float, what: str = "that window") -> str:
    """Why a number that follows the host's CPU is not judged: the sentence that names the wait."""
    return (f"not judged: the guest's vCPUs waited for a host CPU {vcpu_wait_pct:g} % of {what} (above "
            f"{WAIT_MAX_PCT:g} %, WAIT_MAX_PCT: what it keeps up then follows the host's free CPU)")


def busy_stop(problem: str, vcpu_wait_pct: float | None, bound_s: float) -> HostBusy | None:
    """A harness step that did not end within its bound (``problem`` says which; ``bound_s``: the bound,
    which it never met): :class:`HostBusy` with the wait where the vCPUs waited more than
    :data:`BOUND_WAIT_MAX_PCT` of it (:func:`not_judged`), else None (the caller's own error stands)."""
    o = Overrun(problem, vcpu_wait_pct, None, bound_s)
    if not not_judged(o):
        return None
    return HostBusy(f"{problem}: the host was busy: the guest's vCPUs waited for a host CPU {vcpu_wait_pct:g} % of "
                    f"those {bound_s:g} s (above {BOUND_WAIT_MAX_PCT:g} %, more than any healthy run here: "
                    "BOUND_WAIT_MAX_PCT); run it again on a quieter host")


def held_back_reason(properties: Mapping[str, object]) -> str:
    """The overruns a verdict left unjudged (its :data:`PROPERTY`), or "" where it left none."""
    said = properties.get(PROPERTY)
    return said if isinstance(said, str) else ""
