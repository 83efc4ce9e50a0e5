"""throttle: with an I/O limit on a disk at the host (an IOPS or byte-rate limit: ``--disk iops=``/``bps=``,
else the rule's own :data:`RULE_IOPS` set at run time), the rate the guest gets obeys it within
:data:`MARGIN`, the host's own counters count the same rate, the guest shows the wait as queueing and
latency and never as errors, and the rate comes back when the limit is lifted under the running guest
and obeys it again when it is set again.

Three phases of one workload (4 KiB random reads at depth 32), each a measured window from both sides:
``throttled`` (the limit on), ``lifted`` (every limit 0), ``again`` (the limit on again). In each the
host reads back the limits it holds (QEMU: QMP ``query-block``), which names the layer at fault: a host
that holds other than the suite set (another limit, a burst nobody asked for, a limit left on after the
lift) is the ``hypervisor``'s; a rate over a limit the host holds as set, with the host's own counters
over it too, is the hypervisor's throttle letting it through; an I/O error or a timeout in the guest
while it waits is blamed on the guest's command timeout where a fault or a setting changed it (its
``BLAME``), else ``unknown``.

Example::

    v = judge_throttle([throttled, lifted, again], ThrottleLimits(iops=200), "the rule")
    v.problems  # ('throttled: the guest got 3120 IO/s under a limit of 200 IO/s (...); the host counted 3118 IO/s: ...',)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from model.blame import Blame, BlameSettings, Layer
from model.judging.host_busy import WAIT_MAX_PCT, fold_held, rate_wait_text
from model.judging.spec import HIGHER, LOWER, PARAM, Metrics, MetricSpec
from model.judging.verdict import Number, RuleVerdict
from model.parse.throttle_limits import ThrottleLimits

RULE = "throttle"
#: The guest's command timeout: a fault or a setting that shortened it turns the limit's wait into
#: timeouts and errors (the guest's configuration); no other setting of the disk decides the rule.
BLAME = BlameSettings(frozenset({"io_timeout_ms"}))
DEFAULT_REPEATS = 1
REPEATABLE = True
#: outside the default suite (its time is a budget of 13 rules): runs where --with-rules names it
OPT_IN = True
#: The rule's phases, in order.
PHASES = ("throttled", "lifted", "again")
_PHASE = "(" + "|".join(PHASES) + ")_"
#: The lifted phase's rate and every phase's latency follow the host CPU the guest gets; a limited
#: rate is the limit's.
HOST_CPU_BOUND: tuple[str, ...] = (r"lifted_(guest|host)_(iops|bps)", _PHASE + "clat_mean_ms")
METRICS: Metrics = (
    (_PHASE + "(guest|host)_iops", MetricSpec("IO/s", PARAM)),
    (_PHASE + "(guest|host)_bps", MetricSpec("B/s", PARAM)),
    (_PHASE + "(guest_aqu_sz|offered_depth)", MetricSpec("requests", PARAM)),
    (_PHASE + "clat_mean_ms", MetricSpec("ms", LOWER)),
    (_PHASE + "held", MetricSpec("", PARAM)),
    (_PHASE + "fio_error", MetricSpec("", PARAM)),
    (_PHASE + "(guest|host)_window_s", MetricSpec("s", PARAM)),
    (_PHASE + "vcpu_wait_pct", MetricSpec("%", PARAM)),
    (r"limit_(iops|bps)", MetricSpec("", PARAM)),
    (r"limit_set_by", MetricSpec("", PARAM)),
    (r"lifted_over_limit", MetricSpec("x", HIGHER)),
)
MIN_EFFECTS: Mapping[str, float] = {}
#: The rule's workload in each phase (suites/test_throttle.py, and the replay's): 4 KiB random reads at
#: depth 32, the queue-depth rule's deepest (its IOPS on the latency disk are the 3,000-4,300 the rule's
#: own limit is set against).
BS_BYTES = 4096
DEPTH = 32
FAULT = "throttle-burst"
#: The throttle-burst fault (model/faults.py): the limit set with a burst of this many times the limit
#: for :data:`FAULT_BURST_LENGTH_S` s, a bucket the guest cannot empty in a window (200 IOPS: 20,000 IOPS
#: for 60 s, 1.2 million requests), as a QoS policy with a burst sized for the backend's peak does.
FAULT_BURST_TIMES = 100
FAULT_BURST_LENGTH_S = 60

#: The rule's own limit where the user gives none: 200 I/Os per second. The null-co disk with its 5 ms
#: service time gives the guest 3,000-4,300 IOPS at depth 32 under TCG, a file-backed disk more: 200 is
#: 15-20 times below, so it binds on any host that is not 15 times slower, and the lifted rate stands
#: clear of it.
RULE_IOPS = 200
#: How far a rate under a limit may stand from it, as a fraction of the limit, either way: over it the
#: limit is not obeyed; within it the limit bound, and the lifted rate must rise clear of it; a guest
#: under it both with the limit and without it cannot reach it, and the return is not judged. QEMU's
#: throttle keeps a bucket of a tenth of the limit where no burst is set (at most 20 requests over the
#: limit at 200 IOPS: 5 % of a 2 s window). 22 windows of 2 s under the rule's 200 IOPS on virtio-scsi
#: and virtio-blk under TCG (host load average 11-25 on 2 cores): the guest got 0.45-1.01 of the limit,
#: never more (a starved guest falls under it); lifted, 2.4-11 times it.
MARGIN = 0.15
#: How far the guest's rate under a limit (its /proc/diskstats over the window) may stand from the
#: host's (QMP query-blockstats over the same window), beside the requests in flight at either end (up
#: to the offered depth): the two are read an SSH round trip apart, which under load stretches the
#: guest's window past the host's while a starved guest's rate moves. The same 22 windows: 0-19 % apart.
#: Judged under a limit only: without one the rate is the guest CPU's alone.
AGREE_MARGIN = 0.25


@dataclass(frozen=True)
class ThrottlePhase:
    """One phase's window from both sides: what the suite set (``set_to``) and what the host held
    after it (``held``, read back; ``held_said_by`` where), the requests and bytes each side completed
    in the window and the window's seconds on each side's clock, the guest's average queue (iostat's aqu-sz) and fio's mean completion latency;
    ``fio_error``: fio's own words where it ended with an error (then no window was measured)."""

    name: str
    set_to: ThrottleLimits
    held: ThrottleLimits
    held_said_by: str
    guest_s: float = 0.0
    host_s: float = 0.0
    guest_ios: int = 0
    guest_bytes: int = 0
    host_ios: int = 0
    host_bytes: int = 0
    guest_aqu_sz: float = 0.0
    clat_mean_ms: float = 0.0
    offered_depth: int = 0
    fio_error: str = ""
    #: how long the guest's vCPUs waited for a host CPU over the window, % per vCPU; None: not read
    vcpu_wait_pct: float | None = None

    def rate(self, side: str, unit: str) -> float:
        """``side`` "guest" or "host", ``unit`` "iops" or "bps": the side's rate over the window."""
        ios, nbytes, seconds = {"guest": (self.guest_ios, self.guest_bytes, self.guest_s),
                                "host": (self.host_ios, self.host_bytes, self.host_s)}[side]
        return (ios if unit == "iops" else nbytes) / seconds if seconds > 0 else 0.0


_WORDS = {"iops": "IO/s", "bps": "B/s"}


def with_burst(limits: ThrottleLimits) -> ThrottleLimits:
    """``limits`` with the throttle-burst fault's burst on each limit it sets."""
    return dataclasses.replace(
        limits, iops_max=limits.iops * FAULT_BURST_TIMES, bps_max=limits.bps * FAULT_BURST_TIMES,
        iops_max_length_s=FAULT_BURST_LENGTH_S if limits.iops else 0,
        bps_max_length_s=FAULT_BURST_LENGTH_S if limits.bps else 0)


def _limits(asked: ThrottleLimits) -> list[tuple[str, int]]:
    return [(unit, getattr(asked, unit)) for unit in ("iops", "bps") if getattr(asked, unit)]


def _held_problem(p: ThrottlePhase) -> str:
    """Why the host holds other than the suite set in phase ``p``, or ""."""
    want, held = p.set_to, p.held
    if want.none and not held.none:
        return f"{p.name}: every limit was lifted, and the host still holds {held.describe()} ({p.held_said_by})"
    differ = [u for u in ("iops", "bps") if getattr(held, u) != getattr(want, u)]
    if differ:
        return (f"{p.name}: the suite set {want.describe()}, and the host holds {held.describe()} "
                f"({p.held_said_by})")
    if held.burst_ios > want.burst_ios or held.burst_bytes > want.burst_bytes:
        over = " and ".join(f"{n:.0f} {what}" for n, what in ((held.burst_ios, "I/Os"), (held.burst_bytes, "bytes")) if n)
        return (f"{p.name}: the suite set {want.describe()} with no burst, and the host holds {held.describe()} "
                f"({p.held_said_by}): a bucket that lets {over} through above the limit")
    return ""


def _counts_held_back(p: ThrottlePhase) -> str:
    """Why the two sides' rates in ``p`` are not compared ("": they are): the guest's vCPUs waited for a host
    CPU more than WAIT_MAX_PCT of the window, so the guest's rate under the limit followed the host's free
    CPU and moved within the window, while the two sides' windows differ in length by more than
    AGREE_MARGIN (the guest's is read an SSH round trip later at each end, and those round trips are what
    the wait stretches): the two rates are then of different intervals of a moving rate. A rate over the
    limit is judged whatever the load (the throttle-burst fault's)."""
    over = any(p.rate("guest", u) > limit * (1 + MARGIN) for u, limit in _limits(p.set_to))
    apart = abs(p.guest_s - p.host_s) > AGREE_MARGIN * max(p.host_s, 1e-9)
    if over or not apart or p.vcpu_wait_pct is None or p.vcpu_wait_pct <= WAIT_MAX_PCT:
        return ""
    return (f"{rate_wait_text(p.vcpu_wait_pct)}, and the guest's window ran {p.guest_s:.1f} s against the host's "
            f"{p.host_s:.1f} s")


def _phase_problems(p: ThrottlePhase, held_back: list[str]) -> list[tuple[str, Layer]]:
    """What phase ``p`` shows wrong on its own: the host's limits, the limit's rate, the two sides' counts
    (a difference the host's load accounts for goes to ``held_back`` instead)."""
    found: list[tuple[str, Layer]] = []
    held = _held_problem(p)
    if held:
        found.append((held, "hypervisor"))
    for unit, limit in _limits(p.set_to):
        guest, host = p.rate("guest", unit), p.rate("host", unit)
        if guest > limit * (1 + MARGIN):
            layer: Layer = "hypervisor" if host > limit * (1 + MARGIN) else "unknown"
            found.append((f"{p.name}: the guest got {guest:.0f} {_WORDS[unit]} under a limit of {limit} "
                          f"{_WORDS[unit]} (at most {limit * (1 + MARGIN):.0f} within the margin of {MARGIN:.0%}); "
                          f"the host counted {host:.0f} {_WORDS[unit]}"
                          + (": its throttle let them through" if layer == "hypervisor" else ""), layer))
    if not p.set_to.none:
        g, h = p.rate("guest", "iops"), p.rate("host", "iops")
        slack = AGREE_MARGIN * max(g, h) + p.offered_depth / max(p.guest_s, 1.0)
        if abs(g - h) > slack:
            differ = (f"{p.name}: the guest completed {g:.0f} IO/s in the window and the host counted {h:.0f} "
                      f"(they may differ by {AGREE_MARGIN:.0%} and the {p.offered_depth} in flight: {slack:.0f} IO/s)")
            busy = _counts_held_back(p)
            if busy:
                held_back.append(f"{differ}: {busy}")
            else:
                found.append((differ, "unknown"))
    return found


def _bound(p: ThrottlePhase, unit: str, limit: int) -> bool:
    """Whether the guest's rate stood at the limit (within the margin either way): the limit held it back."""
    return limit * (1 - MARGIN) <= p.rate("guest", unit) <= limit * (1 + MARGIN)


def _across(phases: Mapping[str, ThrottlePhase], asked: ThrottleLimits) -> tuple[list[tuple[str, Layer]], list[str]]:
    """What the phases show together: whether the limit bound, the rate returned, the wait showed as latency."""
    found: list[tuple[str, Layer]] = []
    notes: list[str] = []
    throttled, lifted = phases.get("throttled"), phases.get("lifted")
    if throttled is None or lifted is None or throttled.fio_error or lifted.fio_error:
        return found, notes
    for unit, limit in _limits(asked):
        if throttled.rate("guest", unit) > limit * (1 + MARGIN):
            continue  # not obeyed: failed on its own, and nothing to return from
        back, bound = lifted.rate("guest", unit), _bound(throttled, unit, limit)
        if back <= limit * (1 + MARGIN):
            if not bound:  # under the limit with it and without it: the guest cannot reach it
                notes.append(f"the limit of {limit} {_WORDS[unit]} did not bind: the guest got "
                             f"{throttled.rate('guest', unit):.0f} under it and {back:.0f} without it, so whether "
                             "the rate returns when it is lifted is not judged")
                continue
            layer: Layer = "hypervisor" if not lifted.held.none else "unknown"
            found.append(((f"lifted: the rate did not return when the limit was lifted: the guest got {back:.0f} "
                          f"{_WORDS[unit]}, within the margin of the limit of {limit}"), layer))
        elif bound and lifted.clat_mean_ms >= throttled.clat_mean_ms:
            found.append(((f"throttled: the wait did not show as latency: fio's mean completion latency was "
                          f"{throttled.clat_mean_ms:.1f} ms under the limit and {lifted.clat_mean_ms:.1f} ms without it"),
                          "unknown"))
    return found, notes


def _line(p: ThrottlePhase) -> str:
    if p.fio_error:
        return f"{p.name} ({p.held.describe()} held): fio ended with an error: {p.fio_error}"
    return (f"{p.name} ({p.held.describe()} held): guest {p.rate('guest', 'iops'):.0f} IO/s, "
            f"{p.rate('guest', 'bps') / 1e6:.2f} MB/s; host {p.rate('host', 'iops'):.0f} IO/s, "
            f"{p.rate('host', 'bps') / 1e6:.2f} MB/s; guest aqu-sz {p.guest_aqu_sz:.1f} of depth {p.offered_depth}, "
            f"fio clat mean {p.clat_mean_ms:.1f} ms ({p.guest_s:.1f} s window)")


def _properties(p: ThrottlePhase) -> dict[str, Number]:
    props: dict[str, Number] = {f"{p.name}_held": p.held.describe()}
    if p.fio_error:
        props[f"{p.name}_fio_error"] = p.fio_error
        return props
    for side in ("guest", "host"):
        for unit in ("iops", "bps"):
            props[f"{p.name}_{side}_{unit}"] = round(p.rate(side, unit), 1)
        props[f"{p.name}_{side}_window_s"] = round(p.guest_s if side == "guest" else p.host_s, 2)
    if p.vcpu_wait_pct is not None:
        props[f"{p.name}_vcpu_wait_pct"] = p.vcpu_wait_pct
    props.update({f"{p.name}_guest_aqu_sz": round(p.guest_aqu_sz, 2), f"{p.name}_clat_mean_ms": round(p.clat_mean_ms, 2),
                  f"{p.name}_offered_depth": p.offered_depth})
    return props


def judge_throttle(phases: Sequence[ThrottlePhase], asked: ThrottleLimits, set_by: str) -> RuleVerdict:
    """``phases``: the rule's phases as measured (:data:`PHASES`, a phase missing where a harness step
    before it failed); ``asked``: the limit of the throttled phases; ``set_by``: who asked for it
    ("--disk iops=500", "the rule")."""
    problems: list[str] = []
    props: dict[str, Number] = {"limit_iops": asked.iops, "limit_bps": asked.bps, "limit_set_by": set_by}
    found: list[tuple[str, Layer]] = []
    held: list[str] = []
    for p in phases:
        props.update(_properties(p))
        if p.fio_error:
            found.append(((f"{p.name}: the guest's I/O failed while the host held {p.held.describe()}: "
                          f"{p.fio_error}"), "unknown"))
        else:
            found += _phase_problems(p, held)
    by_name = {p.name: p for p in phases}
    across, notes = _across(by_name, asked)
    fold_held(held, notes, props)
    found += across
    if "throttled" in by_name and "lifted" in by_name and asked.iops and not by_name["lifted"].fio_error:
        props["lifted_over_limit"] = round(by_name["lifted"].rate("guest", "iops") / asked.iops, 2)
    for text, layer in found:
        problems.append(f"{text} [blame: {layer}]")
    named = [f for f in found if f[1] != "unknown"] or found
    hint = Blame(named[0][1], named[0][0]) if named else None
    lines = (f"limit {asked.describe()} (set by {set_by}), lifted and set again under the running guest",
             *(_line(p) for p in phases))
    return RuleVerdict(RULE, lines, tuple(problems), tuple(notes), props, hint=hint)
