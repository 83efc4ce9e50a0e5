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

Beside it, with the fio run still going, a CPU profile of the QEMU process (bench/trace_profile.py,
``--profile-s`` seconds each way, untraced-traced-traced-untraced): the share of QEMU's CPU in the
trace backend's path, which is what tracing costs where QEMU's CPU limits the IOPS (TCG), with the
interval of that share. It sees 1 % on a host too busy for the IOPS pairs to, and it says where the
cost goes (the events' formatting, the log file's writes).

    python -m bench.trace_overhead [--pairs 20] [--slice-s 2] [--profile-s 20]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bench.goals import TRACE_COST_GOAL_PCT
from bench.trace_profile import Interval, Sample, Share, perf_available, profile, qemu_pid, share_cost
from guest.tools.fio import Fio, FioJob
from guest.tools.system import WorkDir
from hypervisors.libvirt.trace import FAMILY_EVENTS, QemuTracer
from measure.disk import GuestDisk
from measure.standalone import standalone_guest
from model.across.contention import WAIT_MAX_PCT
from model.parse.blockstats import HostCountersDelta
from model.parse.hostcpu import HostCpuShare
from model.types import DiskSpec

#: Left out of a slice after the events are switched: the QMP commands' own round trips.
SETTLE_S = 0.3
#: Two-sided 95 % quantiles of Student's t by degrees of freedom (beyond 30: the normal's 1.96).
T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26, 10: 2.23, 12: 2.18,
       15: 2.13, 20: 2.09, 25: 2.06, 30: 2.04}


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


@dataclass(frozen=True)
class Slice:
    """One slice: its IOPS, and how long the guest's vCPUs waited for the host's CPU in it (% of the
    slice; None where libvirt gives no run delay)."""

    iops: float
    vcpu_wait_pct: float | None


def slice_iops(disk: GuestDisk, switch: Callable[[bool], None], traced: bool, slice_s: float) -> Slice:
    switch(traced)
    time.sleep(SETTLE_S)
    a, cpu0 = disk.host_counters(), disk.vcpu_times()
    time.sleep(slice_s)
    d, cpu1 = HostCountersDelta.between(a, disk.host_counters()), disk.vcpu_times()
    share = HostCpuShare.between(cpu0, cpu1) if cpu0 is not None and cpu1 is not None else None
    return Slice(d.requests / (d.elapsed_ns / 1e9), share.wait_pct if share is not None else None)


def quiet_pairs(untraced: Sequence[Slice], traced: Sequence[Slice]) -> tuple[list[float], list[float]]:
    """The pairs whose two slices' vCPUs waited at most WAIT_MAX_PCT for the host's CPU (the bound
    above which a run's host-CPU-bound numbers are not compared, model/across/contention.py): there
    the IOPS follow the guest's own work, tracing's included, not the host's other jobs."""
    keep = [(u.iops, t.iops) for u, t in zip(untraced, traced, strict=True)
            if all(s.vcpu_wait_pct is not None and s.vcpu_wait_pct <= WAIT_MAX_PCT for s in (u, t))]
    return [u for u, _ in keep], [t for _, t in keep]


@dataclass(frozen=True)
class Measured:
    """One controller's slices, and its CPU profile's shares (traced, untraced) where one was taken."""

    untraced: list[Slice]
    traced: list[Slice]
    profile: tuple[Share, Share] | None


def profile_shares(pid: int, switch: Callable[[bool], None], profile_s: float) -> tuple[Share, Share]:
    """QEMU's CPU profile traced and untraced, ABBA in halves of ``profile_s`` each way."""
    samples: dict[bool, list[Sample]] = {False: [], True: []}
    for on in (False, True, True, False):
        switch(on)
        time.sleep(SETTLE_S)
        samples[on] += profile(pid, profile_s / 2)
    return Share.of(samples[True]), Share.of(samples[False])


def measure_pairs(disk: GuestDisk, pairs: int, slice_s: float, profile_s: float = 0.0) -> Measured:
    """Untraced and traced slices of each pair, then (``profile_s`` > 0) the CPU profiles, from one
    fio run at depth 32."""
    tracer = disk.backend.request_tracer(disk.guest, disk.attached)
    if not isinstance(tracer, QemuTracer):
        raise SystemExit(f"{disk.config_id}: no QEMU trace events here")
    tracer.check_available()
    channel, events = tracer.channel, FAMILY_EVENTS[tracer.family]

    def switch(on: bool) -> None:
        for event in events:
            channel.execute({"execute": "trace-event-set-state", "arguments": {"name": event, "enable": on}})

    pid = qemu_pid(disk.guest.name) if profile_s > 0 else None
    runtime = pairs * 2 * (slice_s + SETTLE_S + 0.5) + (2 * profile_s + 10 if pid else 0) + 30
    job = FioJob("trace-overhead", iodepth=32, runtime_s=runtime)
    run = disk.tool(Fio).start(job, disk.device_path, disk.tool(WorkDir).ensure(), f"vioc-overhead-{disk.kernel_name}")
    untraced: list[Slice] = []
    traced: list[Slice] = []
    try:
        time.sleep(2.0)  # fio's start and ramp
        for p in range(pairs):
            for on in order(p):
                (traced if on else untraced).append(slice_iops(disk, switch, on, slice_s))
        shares = profile_shares(pid, switch, profile_s) if pid else None
    finally:
        switch(False)
        run.abandon()
    return Measured(untraced, traced, shares)


def profile_line(shares: tuple[Share, Share] | None, why_not: str | None) -> str:
    """The profile's figure beside the goal, or why there is none."""
    if shares is None:
        return f"no CPU profile: {why_not or 'the QEMU process is not on this machine'}"
    traced, untraced = shares
    try:
        cost = share_cost(traced, untraced)
    except ValueError as e:
        return f"no CPU profile: {e}"
    return (f"tracing's share of QEMU's CPU {cost.value_pct:.2f} % (95 % interval {cost.low_pct:.2f} to "
            f"{cost.high_pct:.2f} %; in the trace path {traced.in_path} of {traced.samples} samples traced, "
            f"{untraced.in_path} of {untraced.samples} untraced) "
            f"({verdict(cost)})")


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.trace_overhead", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=20, help="untraced/traced pairs per controller (at least 2)")
    ap.add_argument("--slice-s", type=float, default=2.0, help="seconds each slice is counted")
    ap.add_argument("--profile-s", type=float, default=20.0,
                    help="seconds of QEMU's CPU profile each way, traced and untraced (0: none)")
    args = ap.parse_args()
    if args.pairs < 2:
        ap.error("--pairs: at least 2 (an interval needs two pairs)")
    why_not = perf_available() if args.profile_s > 0 else "--profile-s 0"
    specs = (DiskSpec("virtio-scsi", 0), DiskSpec("virtio-blk", 1))
    rows = []
    with standalone_guest(specs, "vioconform-bench-trace") as (_, disks):
        print(f"accelerator: {disks[0].guest.accel}")  # TCG's and KVM's figures are kept apart
        for disk in disks:
            rows.append((disk.attached.spec.controller,
                         measure_pairs(disk, args.pairs, args.slice_s, 0.0 if why_not else args.profile_s)))
    for controller, m in rows:
        waits = [s.vcpu_wait_pct for s in (*m.untraced, *m.traced) if s.vcpu_wait_pct is not None]
        print(f"{controller}: {len(m.untraced)} pairs of {args.slice_s:g} s slices at depth 32; the guest's vCPUs "
              f"waited {statistics.median(waits) if waits else float('nan'):.1f} % of a slice for the host's CPU "
              f"(median; {WAIT_MAX_PCT:g} % at most in a quiet pair)")
        for what, (plain, traced) in (("all pairs", ([s.iops for s in m.untraced], [s.iops for s in m.traced])),
                                      ("quiet pairs", quiet_pairs(m.untraced, m.traced))):
            print(f"  {what}: {report(plain, traced)}")
        print(f"  {profile_line(m.profile, why_not)}")
    return 0


def report(untraced: Sequence[float], traced: Sequence[float]) -> str:
    """The IOPS of both sides and the cost's median and mean with their intervals, in one line."""
    if len(untraced) < 2:
        return f"{len(untraced)} pair(s): too few for an interval"
    costs = pair_costs(untraced, traced)
    med, mean = bootstrap_median(costs), t_mean(costs)
    return (f"{len(costs)}; IOPS untraced median {statistics.median(untraced):,.0f} ({min(untraced):,.0f}-"
            f"{max(untraced):,.0f}), traced {statistics.median(traced):,.0f} ({min(traced):,.0f}-{max(traced):,.0f}); "
            f"cost median {med.value_pct:+.1f} % (95 % bootstrap interval {med.low_pct:+.1f} to {med.high_pct:+.1f} %), "
            f"mean {mean.value_pct:+.1f} % (t interval {mean.low_pct:+.1f} to {mean.high_pct:+.1f} %) ({verdict(med)}); "
            f"each pair's: {[round(c, 1) for c in costs]}")


if __name__ == "__main__":
    raise SystemExit(main())
