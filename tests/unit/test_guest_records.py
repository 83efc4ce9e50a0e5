"""Parsers on output recorded from the embedded guest (virtio-scsi sda, virtio-blk vda)."""

from __future__ import annotations

from pathlib import Path

import pytest

from model.device_limits import parse_guest_limits
from model.errors import ParseError
from model.parse.fio_json import parse_fio_json
from model.parse.proc_diskstats import DiskStatsDelta, diskstats_for

DATA = Path(__file__).resolve().parent.parent / "data" / "guest"


def _window(name: str, dev: str) -> DiskStatsDelta:
    """The two diskstats snapshots the suite saved around a measurement window."""
    text = (DATA / name).read_text()
    parts = text.split("# uptime_ms ")[1:]
    (t0, s0), (t1, s1) = [(float(p.split("\n", 1)[0]), p.split("\n", 1)[1]) for p in parts]
    return DiskStatsDelta.between(diskstats_for(s0, dev), diskstats_for(s1, dev), t1 - t0)


def test_healthy_qd32_guest_fio() -> None:
    r = parse_fio_json((DATA / "fio-qd32-virtio-scsi-healthy.json").read_text())
    job = r.jobs[0]
    assert r.fio_version == "fio-3.33"
    assert job.read.iops > 3000 and job.write.io_count == 0
    assert job.iodepth_level_pct["32"] > 90


def test_tcq_off_fio_still_reports_depth_32() -> None:
    # fio's iodepth_level counts what fio submitted, not what the device queued.
    job = parse_fio_json((DATA / "fio-qd32-virtio-scsi-tcq-off.json").read_text()).jobs[0]
    assert job.iodepth_level_pct["32"] > 90
    assert job.read.iops < 300
    assert job.read.clat_mean_us > 100_000  # 32 requests queue behind one in the guest


def test_guest_block_layer_queue_in_both_cases() -> None:
    healthy = _window("diskstats-qd32-virtio-scsi-healthy.txt", "sda")
    tcq_off = _window("diskstats-qd32-virtio-scsi-tcq-off.txt", "sda")
    assert 15 < healthy.avg_queue_size <= 33
    assert healthy.read_iops > 3000 and tcq_off.read_iops < 300
    assert tcq_off.avg_request_size_bytes == 4096


def test_limits_virtio_scsi_and_virtio_blk() -> None:
    scsi = parse_guest_limits((DATA / "limits-virtio-scsi.txt").read_text())
    blk = parse_guest_limits((DATA / "limits-virtio-blk.txt").read_text())
    assert (scsi.scsi_queue_depth, scsi.can_queue, scsi.cmd_per_lun, scsi.max_sectors_kb) == (128, 256, 128, 1280)
    assert scsi.effective_queue_depth == 128 and scsi.driver == "sd"
    assert blk.scsi_queue_depth is None and blk.nr_requests == 256 and blk.driver == "virtio_blk"
    assert blk.effective_queue_depth == 256 and blk.write_cache == "write back"
    off = parse_guest_limits((DATA / "limits-virtio-scsi-tcq-off.txt").read_text())
    assert off.scsi_queue_depth == 1 and off.effective_queue_depth == 1


def test_limits_missing_field_is_a_clear_error() -> None:
    with pytest.raises(ParseError, match="sysfs gave no"):
        parse_guest_limits("name=sdz\nnr_requests=64\n")
    with pytest.raises(ParseError, match="not an integer"):
        parse_guest_limits((DATA / "limits-virtio-blk.txt").read_text().replace("nr_requests=256", "nr_requests=x"))
