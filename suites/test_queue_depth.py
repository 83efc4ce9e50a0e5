"""Rule 1, queue-depth propagation (the Solaris 11 mpt_sas TCQ case).

On a disk with a fixed service time, a workload offering depth N must reach the host with
min(N, device queue depth) requests in flight, and IOPS must scale with it. fio's own
``iodepth_level`` is not evidence: it counts what fio submitted, not what the device saw.

The measurement: 4 KiB random reads at each offered depth (``--depths``), one steady-state window
each (measure.window), turned into the rule's :class:`DepthPoint` (suites/queue_depth_points.py's
:func:`depth_point`), with the guest's limits on the disk's path read once (its :func:`guest_path`).
bench.matrix and bench.time_to_verdict measure the rule the same way outside pytest.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from fixtures.options import SuiteOptions
from guest.tools.fio import FioJob
from measure.disk import GuestDisk
from measure.window import measure, save_measurement
from model.judging.figures import histogram_figure
from model.judging.verdict import RuleVerdict
from model.rules.queue_depth import BS_BYTES, DEPTHS, REQUIRE_QUEUING, DeviceSaid, judge_queue_depth
from reports.records import Record
from reports.store.baseline import StoredBaseline
from suites.assertions import judge_rule
from suites.queue_depth_points import depth_point, guest_path


@pytest.mark.rule("queue-depth")
def test_queue_depth_propagation(disk: GuestDisk, suite_options: SuiteOptions, record: Record,
                                 stored_baseline: StoredBaseline | None) -> None:
    if suite_options.disk_backing != "latency":
        pytest.skip("queue-depth needs a latency-bound disk (--disk-backing latency): a file-backed disk "
                    "completes from the host's page cache too fast to build a queue")

    said = disk.advertised.queue_depth if disk.advertised is not None else None
    advertised = DeviceSaid(said, disk.advertised.said_by.get("queue_depth", "")) \
        if disk.advertised is not None and said is not None else None

    def once(raw: Path) -> RuleVerdict:
        points, windows = [], []
        # What the guest's configuration lets be in flight on the disk's path (faults and
        # --guest-setup applied): a limit under the offered depth fails the rule by itself, and
        # any denies the allowance for a guest that could not keep its queue full.
        path = guest_path(disk, BS_BYTES)
        for depth in suite_options.option(DEPTHS):
            m = measure(disk, FioJob(f"qd{depth}", rw="randread", bs_bytes=BS_BYTES, iodepth=depth),
                        suite_options.window_s, raw_dir=raw)
            save_measurement(m, raw / f"queue-depth-qd{depth}.json")
            record.add(**{f"qd{depth}_{k}": v for k, v in m.exact_summary().items()},
                       **{f"qd{depth}_host_average_depth": round(m.host_depth_median, 2)})
            points.append(depth_point(m))
            windows.append(histogram_figure(f"queue-depth, offered depth {depth}", m.fio.jobs[0], m.host_trace,
                                            m.host_trace_gap))
        verdict = judge_queue_depth(points, disk.attached.configured.queue_depth, suite_options.option(REQUIRE_QUEUING), path,
                                    advertised)
        return dataclasses.replace(verdict, figures=(*verdict.figures, *windows))

    record.add(guest_queue_depth=disk.limits.scsi_queue_depth or 0, guest_nr_requests=disk.limits.nr_requests,
               guest_driver=disk.limits.driver)
    # Depths and IOPS are measured quantities: the majority of repeats decides.
    judge_rule(record, suite_options, once, exact=False, baseline=stored_baseline, disks=(disk,), own_dir=False)
