"""Rule 2, I/O-size fidelity (the VxFS-on-Solaris-9 breakup case).

1 MiB O_DIRECT reads must reach the host as requests as large as the device allows: the
maximum transfer it advertised when the guest probed it (the hypervisor's configured value
where it sets one). The split factor is host requests per guest I/O.
"""

from __future__ import annotations

import dataclasses
import statistics
from pathlib import Path

import pytest

from fixtures.options import SuiteOptions
from guest.tools.fio import FioJob
from measure.disk import GuestDisk
from measure.window import measure, save_measurement
from model.judging.figures import histogram_figure
from model.judging.verdict import RuleVerdict
from model.rules.io_size import DEPTH, REQUEST_BYTES, IoSizeMeasurement, judge_io_size
from model.rules.io_size import max_transfer as max_transfer_of
from reports.records import Record
from reports.store.baseline import StoredBaseline
from suites.assertions import judge_rule


@pytest.mark.rule("io-size")
def test_io_size_fidelity(disk: GuestDisk, suite_options: SuiteOptions, record: Record,
                          stored_baseline: StoredBaseline | None) -> None:
    def once(raw: Path) -> RuleVerdict:
        return _measure_and_judge(disk, suite_options, record, raw)

    # Request sizes are measured: a split by scattered pages can vary; the majority decides.
    judge_rule(record, suite_options, once, exact=False, baseline=stored_baseline, disks=(disk,), own_dir=False)


def _measure_and_judge(disk: GuestDisk, suite_options: SuiteOptions, record: Record, raw: Path) -> RuleVerdict:
    m = measure(disk, FioJob("io1m", rw="randread", bs_bytes=REQUEST_BYTES, iodepth=DEPTH), suite_options.window_s,
                raw_dir=raw)
    save_measurement(m, raw / "io-size.json")
    max_transfer, source = max_transfer_of(disk.advertised_limits.max_sectors_kb,
                                           disk.attached.configured.max_transfer_bytes)
    if m.host_trace is not None and m.host_trace.requests:
        sizes = [r.length_bytes for r in m.host_trace.requests if not r.is_flush]
        host_mean, host_p50, host_n, host_source = (statistics.fmean(sizes), statistics.median(sizes), len(sizes),
                                                    m.host_trace.source)
    else:
        host_mean, host_p50, host_n = m.host.avg_request_size_bytes, None, m.host.requests
        host_source = "host counters (bytes / requests)"
    verdict = judge_io_size(IoSizeMeasurement(
        request_bytes=REQUEST_BYTES, max_transfer_bytes=max_transfer, max_transfer_source=source,
        host_request_bytes=host_mean, host_requests=host_n, guest_max_sectors_kb=disk.limits.max_sectors_kb,
        guest_max_hw_sectors_kb=disk.limits.max_hw_sectors_kb, host_source=host_source,
        fio_iops=m.fio.jobs[0].total_iops, host_request_bytes_p50=host_p50,
        guest_max_segments=disk.limits.max_segments))
    record.add(guest_avg_request_bytes=round(m.guest.avg_request_size_bytes))
    window = histogram_figure("io-size, 1 MiB reads", m.fio.jobs[0], m.host_trace, m.host_trace_gap)
    return dataclasses.replace(verdict, figures=(*verdict.figures, window))
