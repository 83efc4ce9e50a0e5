"""io-size in the replay: 1 MiB O_DIRECT random reads at depth 4 for the run's window after fio's
ramp; the host's request sizes are those of every request QEMU traced in the window; the device's
maximum transfer is the run's (the probed ``max_sectors_kb``, or the hypervisor's lower configured
limit), the guest's limits are read after the set-up; judged by ``model.rules.io_size``.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping

from model.judging.verdict import RuleVerdict
from model.rules.io_size import DEPTH, REQUEST_BYTES, RULE, IoSizeMeasurement, judge_io_size, max_transfer
from replay.guest_script import Job
from replay.rules import Replayed, ReplayRule
from replay.rules.evidence import configured_limits, fio_job, guest_limits, output, probed_limits, window, windowed

JOB = "io1m"


def jobs(config: Mapping[str, object]) -> list[Job]:
    measure = config.get("measure")
    span = float(str(measure.get("window_s") or 2.0)) if isinstance(measure, dict) else 2.0
    return [windowed(JOB, {"rw": "randread", "bs": REQUEST_BYTES, "iodepth": DEPTH, "numjobs": 1, "ioengine": "libaio",
                           "direct": 1, "group_reporting": True}, span)]


def judge(r: Replayed) -> RuleVerdict:
    limit, source = max_transfer(probed_limits(r.config).max_sectors_kb, configured_limits(r.config).max_transfer_bytes)
    sizes = [t.length_bytes for t in window(r.requests, output(r, JOB)) if not t.is_flush]
    now = guest_limits(r)
    return judge_io_size(IoSizeMeasurement(
        request_bytes=REQUEST_BYTES, max_transfer_bytes=limit, max_transfer_source=source,
        host_request_bytes=statistics.fmean(sizes) if sizes else 0.0, host_requests=len(sizes),
        guest_max_sectors_kb=now.max_sectors_kb, guest_max_hw_sectors_kb=now.max_hw_sectors_kb,
        host_source="exact (QEMU trace events, replay)", fio_iops=fio_job(r, JOB).total_iops,
        host_request_bytes_p50=statistics.median(sizes) if sizes else None, guest_max_segments=now.max_segments))


REPLAY = ReplayRule(RULE, jobs, judge)
