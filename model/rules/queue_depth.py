"""Rule 1, queue-depth propagation: the verdict arithmetic, free of any hypervisor import.

With offered depth N on a latency-bound disk, the depth the host observes must follow
min(N, the device's configured queue depth), and IOPS must scale with it. The Solaris 11
``mpt_sas`` signature is a host depth of 1-3 while the application queues 32.

Example::

    v = judge_queue_depth([point_qd1, point_qd32], device_queue_depth=128)
    assert v.passed, v.explain()
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: Minimum host-observed depth as a fraction of min(offered, device limit).
#: Measured here (QEMU 7.2 TCG, 2 vCPUs, 5 ms null-co disk): the host saw a median of
#: 20-23 in flight for a guest offering 32 (0.63-0.72), and 0.77 at depth 1 (the guest's
#: own submission time is part of each 6.5 ms round trip). 0.4 leaves room for a loaded
#: 2-core host and is still 13x above the tcq-off/Solaris signature of ~1 at depth 32.
HOST_DEPTH_MIN_FRACTION = 0.4

#: Minimum IOPS(N)/IOPS(1) as a fraction of the expected depth ratio. Measured here:
#: 4,000-5,000 IOPS at depth 32 over 140 at depth 1 (28-35x against 32x expected);
#: with queue_depth=1 about 1.1x. 0.4 (12.8x for 32) separates the two by an order of magnitude.
IOPS_SCALING_MIN_FRACTION = 0.4

#: The host may not see more than was offered; above this factor the measurement is broken
#: (counters of the wrong disk, or a clock problem), which is reported as a failure too.
HOST_DEPTH_MAX_OVER_OFFERED = 1.25


@dataclass(frozen=True)
class DepthPoint:
    """Both sides' depth figures for one offered depth (one fio run)."""

    offered_depth: int
    iops: float
    fio_depth_mode: str  # fio's iodepth_level bucket with most I/Os: what fio *submitted*
    guest_aqu_sz: float  # /proc/diskstats weighted time over the window (iostat aqu-sz)
    guest_inflight_mean: float  # /sys/block/X/inflight samples
    host_depth: float  # the verdict's figure: median over one-second windows
    host_depth_min: float
    host_depth_max: float
    host_source: str  # "average (Little's law on QMP counters)", "exact (traced requests)"


@dataclass(frozen=True)
class QueueDepthVerdict:
    passed: bool
    device_queue_depth: int | None
    points: tuple[DepthPoint, ...]
    problems: tuple[str, ...]
    notes: tuple[str, ...] = field(default=())

    def explain(self) -> str:
        lines = [f"device queue depth: {self.device_queue_depth if self.device_queue_depth else 'unknown'}"]
        for p in self.points:
            lines.append(
                f"offered {p.offered_depth:>3}: IOPS {p.iops:,.0f}; guest: fio at depth {p.fio_depth_mode}, "
                f"aqu-sz {p.guest_aqu_sz:.1f}, inflight {p.guest_inflight_mean:.1f}; host depth "
                f"{p.host_depth:.1f} (per-second {p.host_depth_min:.1f}-{p.host_depth_max:.1f}, {p.host_source})")
        lines += [f"FAIL: {m}" for m in self.problems] + [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def properties(self) -> dict[str, str | float | int]:
        props: dict[str, str | float | int] = {"device_queue_depth": self.device_queue_depth or 0}
        for p in self.points:
            k = f"qd{p.offered_depth}"
            props.update({f"{k}_iops": round(p.iops, 1), f"{k}_host_depth": round(p.host_depth, 2),
                          f"{k}_host_depth_min": round(p.host_depth_min, 2),
                          f"{k}_host_depth_max": round(p.host_depth_max, 2),
                          f"{k}_guest_aqu_sz": round(p.guest_aqu_sz, 2),
                          f"{k}_guest_inflight_mean": round(p.guest_inflight_mean, 2),
                          f"{k}_fio_depth_mode": p.fio_depth_mode, f"{k}_host_source": p.host_source})
        if self.notes:
            props["notes"] = "; ".join(self.notes)
        return props


def expected_depth(offered: int, device_queue_depth: int | None) -> int:
    return offered if device_queue_depth is None else min(offered, device_queue_depth)


def judge_queue_depth(points: list[DepthPoint] | tuple[DepthPoint, ...], device_queue_depth: int | None,
                      require_queuing: bool = False) -> QueueDepthVerdict:
    """Judge the points (at least one; the lowest offered depth is the IOPS baseline)."""
    if not points:
        raise ValueError("judge_queue_depth needs at least one measured depth")
    pts = tuple(sorted(points, key=lambda p: p.offered_depth))
    problems: list[str] = []
    notes: list[str] = []
    if device_queue_depth == 1:
        notes.append("no command queuing: the device accepts one command at a time")
        if require_queuing:
            problems.append("the device has no command queuing and --require-queuing is set")
    for p in pts:
        want = expected_depth(p.offered_depth, device_queue_depth)
        floor = HOST_DEPTH_MIN_FRACTION * want
        if p.host_depth < floor:
            problems.append(
                f"at offered depth {p.offered_depth} the host saw {p.host_depth:.1f} in flight; expected at least "
                f"{floor:.1f} = {HOST_DEPTH_MIN_FRACTION} x min({p.offered_depth}, device limit "
                f"{device_queue_depth}). The guest queued {p.guest_aqu_sz:.1f} in its block layer "
                f"and fio submitted at depth {p.fio_depth_mode}.")
        if p.host_depth > HOST_DEPTH_MAX_OVER_OFFERED * p.offered_depth:
            problems.append(f"at offered depth {p.offered_depth} the host saw {p.host_depth:.1f} in flight, more "
                            "than offered: the host counters are not those of this disk's I/O")
    base, top = pts[0], pts[-1]
    if top.offered_depth > base.offered_depth:
        want_ratio = expected_depth(top.offered_depth, device_queue_depth) / expected_depth(
            base.offered_depth, device_queue_depth)
        got_ratio = top.iops / base.iops if base.iops > 0 else 0.0
        if want_ratio > 1 and got_ratio < IOPS_SCALING_MIN_FRACTION * want_ratio:
            problems.append(
                f"IOPS scaled {got_ratio:.1f}x from depth {base.offered_depth} ({base.iops:,.0f}) to depth "
                f"{top.offered_depth} ({top.iops:,.0f}); expected at least "
                f"{IOPS_SCALING_MIN_FRACTION * want_ratio:.1f}x = {IOPS_SCALING_MIN_FRACTION} x {want_ratio:g}")
    return QueueDepthVerdict(not problems, device_queue_depth, pts, tuple(problems), tuple(notes))
