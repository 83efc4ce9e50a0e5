"""The queue-depth rule's figures from what measure/ returns, shared by its suite
(suites/test_queue_depth.py) and the entry points that measure the rule outside pytest
(bench.matrix, bench.time_to_verdict): measure/ imports no rule, and an entry point imports no test
module.

Example::

    point = depth_point(measure(disk, FioJob("qd32", iodepth=32), 5.0))
    path = guest_path(disk, FioJob("qd1").bs_bytes)
"""

from __future__ import annotations

from guest.tools.sysfs import Sysfs
from measure.disk import GuestDisk
from measure.window import IntervalMeasurement
from model.rules.queue_depth import DepthPoint, GuestPath

HOST_SOURCE_AVERAGE = "average (Little's law on host counters), median of 1 s windows; min-max"


def guest_path(disk: GuestDisk, bs_bytes: int) -> GuestPath:
    """What the guest's configuration lets be in flight on the disk's path now (faults and
    --guest-setup applied), with the driver's values from when the disk was found: the rule's
    evidence for a guest that held less than offered."""
    return GuestPath.of(disk.tool(Sysfs).path_limits(disk.kernel_name), disk.probed_limits, bs_bytes)


def depth_point(m: IntervalMeasurement) -> DepthPoint:
    """The rule's figures for one window: the exact outstanding-at-issue distribution where the
    host traced every request, else Little's law on the counters."""
    if m.host_trace is not None:
        host, lo, hi = m.exact_depth_percentile(50), m.exact_depth_percentile(10), m.exact_depth_percentile(90)
        source = f"{m.host_trace.source}, median; p10-p90"
    else:
        host, lo, hi = m.host_depth_median, min(m.host_depth_per_second), max(m.host_depth_per_second)
        source = HOST_SOURCE_AVERAGE + (f"; not exact: {m.host_trace_gap}" if m.host_trace_gap else "")
    return DepthPoint(offered_depth=m.job.offered_depth, iops=m.fio.jobs[0].total_iops, fio_depth_mode=m.fio_depth_mode,
                      guest_aqu_sz=m.guest.avg_queue_size, guest_inflight_mean=m.guest_inflight_mean,
                      host_depth=host, host_depth_min=lo, host_depth_max=hi, host_source=source,
                      guest_cpu_busy_pct=m.guest_cpu.busiest_pct if m.guest_cpu else None,
                      guest_cpu_all_pct=m.guest_cpu.all_pct if m.guest_cpu else None,
                      fio_cpu_pct=m.fio.jobs[0].cpu_pct, vcpu_wait_pct=m.vcpu_wait_pct)
