"""Host block counters from real QMP replies (QEMU 7.2) and a libvirt domstats record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from model.errors import ParseError
from model.parse.blockstats import HostBlockCounters, HostCountersDelta, parse_libvirt_block_stats, parse_qmp_blockstats

DATA = Path(__file__).resolve().parents[1] / "data"


def reply(controller: str) -> str:
    return (DATA / f"qmp-query-blockstats-{controller}.json").read_text()


def test_qmp_virtio_blk_by_qdev() -> None:
    c = parse_qmp_blockstats(reply("virtio-blk"), "/dut/", taken_at_ns=5)
    # SeaBIOS read one 512-byte sector; qemu-io added 2 reads, 2 writes and a flush
    assert (c.rd_operations, c.wr_operations, c.flush_operations) == (3, 2, 1)
    assert (c.rd_bytes, c.wr_bytes) == (512 + 4096 + 65536, 4096 + 131072)
    assert c.rd_total_time_ns == 2904879 and c.flush_total_time_ns == 4557
    assert c.taken_at_ns == 5


@pytest.mark.parametrize("controller", ["virtio-scsi", "nvme"])
def test_qmp_other_controllers(controller: str) -> None:
    c = parse_qmp_blockstats(json.loads(reply(controller)), "dut", taken_at_ns=0)
    assert (c.rd_operations, c.wr_operations, c.flush_operations, c.rd_bytes) == (3, 2, 1, 70144)


def test_qmp_match_by_node_name_and_errors() -> None:
    assert parse_qmp_blockstats(reply("virtio-blk"), "d1", 0).rd_operations == 0
    with pytest.raises(ParseError, match=r"2 disks with .* containing 'virtio-backend'.*/machine/peripheral/other"):
        parse_qmp_blockstats(reply("virtio-blk"), "virtio-backend", 0)
    with pytest.raises(ParseError, match=r"no disk with qdev, device or node-name containing 'sdz'; disks are"):
        parse_qmp_blockstats(reply("virtio-blk"), "sdz", 0)
    with pytest.raises(ParseError, match="not JSON"):
        parse_qmp_blockstats("{oops", "dut", 0)
    with pytest.raises(ParseError, match="query-blockstats failed"):
        parse_qmp_blockstats({"error": {"class": "GenericError", "desc": "no"}}, "dut", 0)
    broken = json.loads(reply("nvme"))
    del broken["return"][0]["stats"]["wr_total_time_ns"]
    with pytest.raises(ParseError, match=r"\.stats\.wr_total_time_ns: expected a non-negative integer, got None"):
        parse_qmp_blockstats(broken, "dut", 0)


def test_libvirt_block_stats() -> None:
    params = json.loads((DATA / "libvirt-domstats-block.json").read_text())
    c = parse_libvirt_block_stats(params, "vdb", taken_at_ns=1)
    assert (c.rd_operations, c.wr_operations, c.flush_operations) == (120000, 4000, 12)
    assert (c.rd_total_time_ns, c.wr_total_time_ns, c.flush_total_time_ns) == (660000000000, 22000000000, 3600000)
    with pytest.raises(ParseError, match=r"no disk 'sda'; disks are \['vda', 'vdb'\]"):
        parse_libvirt_block_stats(params, "sda", 0)
    with pytest.raises(ParseError, match=r"block.1.fl.times should be a non-negative integer, got None"):
        parse_libvirt_block_stats({k: v for k, v in params.items() if k != "block.1.fl.times"}, "vdb", 0)
    with pytest.raises(ParseError, match=r"no integer 'block\.count'"):
        parse_libvirt_block_stats({"state.state": 1}, "vdb", 0)


def counters(ops: int, time_ns: int, at_ns: int) -> HostBlockCounters:
    return HostBlockCounters(ops, ops, 1, ops * 4096, ops * 4096, time_ns, time_ns, 0, at_ns)


def test_delta_littles_law() -> None:
    a = counters(0, 0, 0)
    b = counters(1000, 10_000_000_000, 1_000_000_000)  # 2000 requests, 20 s of request time in 1 s
    d = HostCountersDelta.between(a, b)
    assert d.requests == 2000 and d.flushes == 0
    assert d.avg_in_flight == pytest.approx(20.0)
    assert d.iops == pytest.approx(2000.0)
    assert d.avg_request_size_bytes == 4096


def test_delta_from_real_replies() -> None:
    empty = HostBlockCounters(0, 0, 0, 0, 0, 0, 0, 0, 0)
    c = parse_qmp_blockstats(reply("virtio-blk"), "/dut/", taken_at_ns=10_000_000)
    d = HostCountersDelta.between(empty, c)
    assert d.total_time_ns == 2904879 + 1330192 + 4557
    assert d.avg_request_size_bytes == pytest.approx((70144 + 135168) / 5)


def test_delta_errors() -> None:
    a, b = counters(10, 100, 5), counters(5, 100, 9)
    with pytest.raises(ParseError, match=r"rd_operations went backwards \(10 -> 5\).*restarted"):
        HostCountersDelta.between(a, b)
    with pytest.raises(ParseError, match="not later than the first"):
        HostCountersDelta.between(b, counters(20, 100, 9))
