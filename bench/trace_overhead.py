"""Cost of exact tracing: IOPS at depth 32 with and without QEMU's trace events, paired.

For each virtio controller, one fio job runs at depth 32 on the 5 ms latency disk for the whole
measurement, and the bench switches the controller family's trace events (the ones a measured
window with exact tracing switches on, hypervisors/libvirt/trace.py) on and off in slices of
``--slice-s``: a pair is one untraced and one traced slice side by side, in the order
untraced-traced, then traced-untraced (ABBA: a drift of the host's speed across a pair cancels
over two pairs). Each slice's IOPS are the disk's own QMP counters over it, the same source both
ways; the first ``SETTLE_S`` after a switch is left out. A pair's cost is
``(untraced - traced) / untraced``.

Separate windows, each with its own fio start, could not see 3 %: on this shared 2-core machine the
untraced windows alone spread over 2,709-3,913 IOPS. Pairs of neighbouring slices of one fio run
share the host's load, so their differences spread far less. Printed: the median of the pairs'
costs with a bootstrap 95 % confidence interval, and the mean with Student's t interval; the goal
(bench/goals.py, 3 %) is met when the median's interval lies at or under it and is narrower than
it, missed when it lies above it, and unresolved otherwise (more pairs narrow it).

    python -m bench.trace_overhead [--pairs 20] [--slice-s 2]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bench.goals import TRACE_COST_GOAL_PCT
from guest.tools.fio import Fio, FioJob
from guest.tools.system import WorkDir
from hypervisors.libvirt.trace import FAMILY_EVENTS, QemuTracer
from measure.disk import GuestDisk
from measure.standalone import standalone_guest
from model.parse.blockstats import HostCountersDelta
from model.types import DiskSpec

#: Left out of a slice after the events are switched: the QMP commands' own round trips.
SETTLE_S = 0.3
#: Two-sided 95 % quantiles of Student's t by degrees of freedom (beyond 30: the normal's 1.96).
T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26, 10: 2.23, 12: 2.18,
       15: 2.13, 20: 2.09, 25: 2.06, 30: 2.04}


@dataclass(frozen=True)
class Interval:
    """A statistic of the pairs' costs (percent) and its 95 % confidence interval."""

    value_pct: float
    low_pct: float
    high_pct: float

    @property
    def width_pct(self) -> float:
        return self.high_pct - self.low_pct


def pair_costs(untraced: Sequence[float], traced: Sequence[float]) -> list[float]:
    """Each pair's cost in percent of its untraced IOPS."""
    return [100.0 * (u - t) / u for u, t in zip(untraced, traced, strict=True)]


def bootstrap_median(costs: Sequence[float], resamples: int = 10000, seed: int = 0) -> Interval:
    """The median and its percentile-bootstrap 95 % interval (a fixed seed: the same pairs print
    the same interval)."""
    rng = random.Random(seed)
    n = len(costs)
    medians = sorted(statistics.median(rng.choices(costs, k=n)) for _ in range(resamples))
    return Interval(statistics.median(costs), medians[int(0.025 * resamples)], medians[int(0.975 * resamples) - 1])


def t_mean(costs: Sequence[float]) -> Interval:
    """The mean and Student's t 95 % interval (needs 2 pairs or more)."""
    df = len(costs) - 1
    t = T95[max(k for k in T95 if k <= df)] if df <= 30 else 1.96
    half = t * statistics.stdev(costs) / len(costs) ** 0.5
    mean = statistics.fmean(costs)
    return Interval(mean, mean - half, mean + half)


def verdict(cost: Interval, goal_pct: float = TRACE_COST_GOAL_PCT) -> str:
    """Met: the whole interval at or under the goal, and narrower than the goal; missed: the whole
    interval above it; else unresolved."""
    if cost.high_pct <= goal_pct and cost.width_pct < goal_pct:
        return f"goal {goal_pct:g} %: met"
    if cost.low_pct > goal_pct:
        return f"goal {goal_pct:g} %: MISSED"
    return (f"goal {goal_pct:g} %: unresolved (the interval, {cost.width_pct:.1f} % wide, is not under it and "
            "narrower than it: more pairs narrow it)")


def order(pair: int) -> tuple[bool, bool]:
    """Whether each slice of pair number ``pair`` is traced: ABBA."""
    return (False, True) if pair % 2 == 0 else (True, False)


def slice_iops(disk: GuestDisk, switch: Callable[[bool], None], traced: bool, slice_s: float) -> float:
    switch(traced)
    time.sleep(SETTLE_S)
    a = disk.host_counters()
    time.sleep(slice_s)
    d = HostCountersDelta.between(a, disk.host_counters())
    return d.requests / (d.elapsed_ns / 1e9)


def measure_pairs(disk: GuestDisk, pairs: int, slice_s: float) -> tuple[list[float], list[float]]:
    """Untraced and traced IOPS of each pair, from one fio run at depth 32."""
    tracer = disk.backend.request_tracer(disk.guest, disk.attached)
    if not isinstance(tracer, QemuTracer):
        raise SystemExit(f"{disk.config_id}: no QEMU trace events here")
    tracer.check_available()
    channel, events = tracer.channel, FAMILY_EVENTS[tracer.family]

    def switch(on: bool) -> None:
        for event in events:
            channel.execute({"execute": "trace-event-set-state", "arguments": {"name": event, "enable": on}})

    runtime = pairs * 2 * (slice_s + SETTLE_S + 0.5) + 30
    job = FioJob("trace-overhead", iodepth=32, runtime_s=runtime)
    run = disk.tool(Fio).start(job, disk.device_path, disk.tool(WorkDir).ensure(), f"vioc-overhead-{disk.kernel_name}")
    untraced: list[float] = []
    traced: list[float] = []
    try:
        time.sleep(2.0)  # fio's start and ramp
        for p in range(pairs):
            for on in order(p):
                (traced if on else untraced).append(slice_iops(disk, switch, on, slice_s))
    finally:
        switch(False)
        run.abandon()
    return untraced, traced


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.trace_overhead", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=20, help="untraced/traced pairs per controller (at least 2)")
    ap.add_argument("--slice-s", type=float, default=2.0, help="seconds each slice is counted")
    args = ap.parse_args()
    if args.pairs < 2:
        ap.error("--pairs: at least 2 (an interval needs two pairs)")
    specs = (DiskSpec("virtio-scsi", 0), DiskSpec("virtio-blk", 1))
    rows = []
    with standalone_guest(specs, "vioconform-bench-trace") as (_, disks):
        print(f"accelerator: {disks[0].guest.accel}")  # TCG's and KVM's figures are kept apart
        for disk in disks:
            untraced, traced = measure_pairs(disk, args.pairs, args.slice_s)
            rows.append((disk.attached.spec.controller, untraced, traced))
    for controller, untraced, traced in rows:
        costs = pair_costs(untraced, traced)
        med, mean = bootstrap_median(costs), t_mean(costs)
        print(f"{controller}: {len(costs)} pairs of {args.slice_s:g} s slices at depth 32; IOPS untraced median "
              f"{statistics.median(untraced):,.0f} ({min(untraced):,.0f}-{max(untraced):,.0f}), traced "
              f"{statistics.median(traced):,.0f} ({min(traced):,.0f}-{max(traced):,.0f})")
        print(f"  cost: median {med.value_pct:+.1f} % (95 % bootstrap interval {med.low_pct:+.1f} to "
              f"{med.high_pct:+.1f} %), mean {mean.value_pct:+.1f} % (t interval {mean.low_pct:+.1f} to "
              f"{mean.high_pct:+.1f} %)  ({verdict(med)})")
        print(f"  pairs' costs (%): {[round(c, 1) for c in costs]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
