"""The guest's side of the queue-depth rule's allowance, parsed from text recorded in the embedded
guest (tests/data/guest/): its CPU time over a window (/proc/stat) and the limits on a disk's path."""

from __future__ import annotations

from pathlib import Path

import pytest

from model.device_limits import DepthLimit, IoMax, parse_guest_limits, parse_guest_path_limits
from model.errors import ParseError
from model.parse.proc_stat import CpuBusy, cpu_busy_between, parse_proc_stat_cpus
from model.rules.queue_depth import GuestPath

DATA = Path(__file__).resolve().parents[1] / "data" / "guest"


def _window(name: str) -> CpuBusy:
    """A .cpustat file the window measurement saved: two ``# uptime_ms N`` snapshots."""
    first, second = (DATA / name).read_text().split("# uptime_ms ")[1:]
    (u0, a), (u1, b) = (part.split("\n", 1) for part in (first, second))
    return cpu_busy_between(a, b, float(u1) - float(u0))


@pytest.mark.parametrize("name, busiest, all_pct", [
    # a busy loop in the guest; the healthy guest and the nr_requests-8 guest on a loaded host
    ("cpustat-qd32-virtio-blk-guest-busy-loop.txt", 97.7, 91.6),
    ("cpustat-qd32-virtio-blk-healthy-loaded.txt", 67.9, 65.3),
    ("cpustat-qd32-virtio-blk-nr-requests-8.txt", 57.7, 53.5),
])
def test_busy_is_the_window_not_spent_idle(name: str, busiest: float, all_pct: float) -> None:
    busy = _window(name)
    assert (round(busy.busiest_pct, 1), round(busy.all_pct, 1)) == (busiest, all_pct)
    assert len(busy.per_cpu_pct) == 2


def test_the_busy_ticks_would_undercount_a_descheduled_vcpu() -> None:
    """healthy-loaded: 3,520 ms, yet cpu0 counted 46 busy and 131 idle ticks (177 of 352): the host
    held the vCPU off its CPU the rest of the time. Not idle: 1 - 131/352 = 62.8 %, not 46/177 = 26 %."""
    first, second = (DATA / "cpustat-qd32-virtio-blk-healthy-loaded.txt").read_text().split("# uptime_ms ")[1:]
    a = parse_proc_stat_cpus(first.split("\n", 1)[1])["cpu0"]
    b = parse_proc_stat_cpus(second.split("\n", 1)[1])["cpu0"]
    assert (b.busy_ticks - a.busy_ticks, b.idle_ticks - a.idle_ticks) == (46, 131)
    assert round(_window("cpustat-qd32-virtio-blk-healthy-loaded.txt").per_cpu_pct[0], 1) == 62.8


def test_bad_proc_stat_is_a_parse_error() -> None:
    good = "cpu  1 0 1 10 0 0 0 0 0 0\ncpu0 1 0 1 10 0 0 0 0 0 0\n"
    with pytest.raises(ParseError, match="no 'cpu' line"):
        cpu_busy_between("", good, 1000)
    with pytest.raises(ParseError, match="went backwards"):
        cpu_busy_between(good, "cpu  1 0 1 5 0 0 0 0 0 0\n", 1000)
    with pytest.raises(ParseError, match="must be positive"):
        cpu_busy_between(good, good, 0)
    with pytest.raises(ParseError, match="not an integer"):
        parse_proc_stat_cpus("cpu 1 x 1 10\n")
    # an old kernel's four fields, and idle beyond the window (clock granularity) is 0 % busy, not less
    assert cpu_busy_between("cpu 0 0 0 0\n", "cpu 0 0 0 120\n", 1000).all_pct == 0.0


def test_the_recorded_path_limits() -> None:
    blk = parse_guest_path_limits((DATA / "path-virtio-blk.txt").read_text(), "vda")
    assert (blk.dev, blk.nr_requests, blk.scsi_queue_depth, blk.can_queue) == ("254:0", 256, None, None)
    assert (blk.scheduler, blk.async_depth, blk.cgroup, blk.io_max) == ("mq-deadline", 256, "", ())
    scsi = parse_guest_path_limits((DATA / "path-virtio-scsi.txt").read_text(), "sda")
    assert (scsi.nr_requests, scsi.scsi_queue_depth, scsi.scsi_host, scsi.can_queue) == (256, 128, "host0", 256)
    probed = parse_guest_limits((DATA / "limits-virtio-scsi.txt").read_text())
    assert scsi.depth_limits(probed) == (DepthLimit("/sys/block/sda/queue/nr_requests", 256, 256),
                                         DepthLimit("/sys/block/sda/device/queue_depth", 128, 128),
                                         DepthLimit("/sys/class/scsi_host/host0/can_queue", 256, 256))
    assert scsi.depth_limits(None)[1].driver_value is None
    # cgroup v2 mounted in the guest, fio's session in /vioc with io.max riops=400 on the disk
    throttled = parse_guest_path_limits((DATA / "path-virtio-scsi-io-max.txt").read_text(), "sda")
    assert throttled.cgroup == "/vioc" and throttled.io_max == (IoMax("/vioc", riops=400),)
    assert throttled.io_max[0].text() == "io.max riops=400 in cgroup /vioc"
    path = GuestPath.of(throttled, probed, 4096)
    assert path.io_max == throttled.io_max and path.limits[1].name == "device/queue_depth"


def test_path_limits_text_variants() -> None:
    text = ("nr_requests=64\nscheduler=none\nio_max=/a/b rbps=1048576 wbps=max riops=max wiops=max\n"
            "io_max=/a wiops=5\n")
    p = parse_guest_path_limits(text, "sdc")
    assert p.scheduler == "none" and p.nr_requests == 64 and p.async_depth is None
    assert p.io_max == (IoMax("/a/b", rbps=1048576), IoMax("/a", wiops=5))
    assert p.io_max[0].read_iops_cap(4096) == 256 and p.io_max[1].read_iops_cap(4096) is None
    assert parse_guest_path_limits("scheduler=mq-deadline kyber [bfq] none\n", "sdc").scheduler == "bfq"
    with pytest.raises(ParseError, match="nr_requests='x' is not an integer"):
        parse_guest_path_limits("nr_requests=x\n", "sdc")
    with pytest.raises(ParseError, match="'riops=lots' is neither a number nor max"):
        parse_guest_path_limits("io_max=/a riops=lots\n", "sdc")
