"""The write-cache rule on recorded data (tests/data/guest/write-cache-*): the embedded guest (Linux 6.1,
QEMU 7.2.22) with the suite's four disks (virtio-scsi sda, sdb; virtio-blk vda, vdb), 50 buffered 4 KiB
writes each followed by an fsync on each disk: healthy; with "write through" written to every disk's
``queue/write_cache`` (wce-lie); and QEMU's ``query-block`` after the guest turned its cache off honestly
through each disk's ``cache_type`` (SCSI MODE SELECT, virtio-blk's writeback config field)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from model.errors import ParseError
from model.host_cache import HostCache, host_cache_of
from model.parse.blockstats import HostCountersDelta, parse_qmp_blockstats
from model.parse.fio_json import parse_fio_json
from model.parse.proc_diskstats import diskstats_for
from model.rules.write_cache import DiskCache, Flushes, GuestCache, judge_write_cache

DATA = Path(__file__).resolve().parents[1] / "data" / "guest"
SOURCE = "QEMU 7.2.22, QMP query-block"
#: The suite's disks of the recording: (role, kernel name, QEMU device id), virtio-scsi then virtio-blk.
SCSI = (("dut", "sda", "ua-vioc-dut00"), ("scratch", "sdb", "ua-vioc-dut01"))
BLK = (("dut", "vda", "ua-vioc-dut02"), ("scratch", "vdb", "ua-vioc-dut03"))


def _json(name: str) -> Any:
    return json.loads((DATA / f"write-cache-{name}.json").read_text())


def _blocks(case: str) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = _json(f"query-block-{case}")["return"]
    return blocks


def _host(case: str, device: str) -> HostCache:
    cache = host_cache_of(_blocks(case), device, SOURCE)
    assert cache is not None
    return cache


def _flushes(case: str, name: str, device: str) -> Flushes:
    """What the recording counted on each side of one disk's fsync run (every disk ran the same job)."""
    guest = [diskstats_for((DATA / f"write-cache-diskstats-{case}-{w}.txt").read_text(), name).flushes_completed
             for w in ("before", "after")]
    host = [parse_qmp_blockstats(_json(f"query-blockstats-{case}-{w}"), device, i) for i, w in enumerate(("before", "after"))]
    fio = parse_fio_json((DATA / f"write-cache-fio-{case}-sda.json").read_text(), "fio")
    assert guest[0] is not None and guest[1] is not None
    return Flushes(fio.jobs[0].sync.io_count, guest[1] - guest[0], HostCountersDelta.between(*host).flushes)


def _disks(case: str, believed: str, host_case: str = "healthy") -> list[DiskCache]:
    return [DiskCache(role, GuestCache(name, "write back", believed, 0), _host(host_case, dev), _flushes(case, name, dev))
            for role, name, dev in (*SCSI, *BLK)]


def test_query_block_gives_each_disks_cache_mode() -> None:
    # the null-co disk under test: QEMU's own writeback; the file-backed scratch disk: the suite's cache=none
    assert [_host("healthy", dev).mode for _, _, dev in (*SCSI, *BLK)] == ["writeback", "none", "writeback", "none"]
    blk = _host("healthy", "ua-vioc-dut02")  # listed by its virtio-backend path
    assert blk.said_by == "inserted.cache of ua-vioc-dut02, QEMU 7.2.22, QMP query-block"
    assert blk.text() == "cache=writeback (writeback=true direct=false no-flush=false)"
    # after the guest's honest cache_type "write through", the host's write cache is off on every disk
    assert [_host("honest", dev).mode for _, _, dev in (*SCSI, *BLK)] == ["writethrough", "directsync"] * 2
    assert host_cache_of(_blocks("healthy"), "ua-vioc-dut09", SOURCE) is None


def test_a_cache_without_its_flags_is_a_parse_error() -> None:
    blocks = [{"qdev": "ua-vioc-dut00", "inserted": {"cache": {"writeback": True, "direct": "yes"}}}]
    with pytest.raises(ParseError, match="not the three booleans"):
        host_cache_of(blocks, "ua-vioc-dut00", SOURCE)


def test_healthy_every_fsync_is_a_flush_on_both_sides() -> None:
    disks = _disks("healthy", "write back")
    assert {d.flushes for d in disks} == {Flushes(49, 49, 49)}
    v = judge_write_cache(disks[:2])
    assert v.passed, v.explain()
    assert v.properties["dut_host_cache_mode"] == "writeback" and v.properties["scratch_host_cache_mode"] == "none"
    assert v.properties["scratch_flushes_guest"] == 49 and v.properties["scratch_flushes_host"] == 49
    assert v.lines[0].startswith("dut disk sda: the guest believes write back, FUA off; the host: cache=writeback")
    assert judge_write_cache(disks[2:]).passed


def test_wce_lie_fails_every_disk_blamed_on_the_guest_configuration() -> None:
    disks = _disks("lie", "write through")
    assert {d.flushes for d in disks} == {Flushes(49, 0, 0)}
    v = judge_write_cache(disks[:2])
    assert len(v.problems) == 2, v.explain()
    assert v.problems[1] == (
        "scratch disk sdb: the guest believes write through over a host write-back cache (cache=none "
        "(writeback=true direct=true no-flush=false), inserted.cache of ua-vioc-dut01, QEMU 7.2.22, QMP query-block): "
        "data acknowledged but not durable: 49 fsyncs sent 0 flushes, the host saw 0 [blame: guest configuration]")
    assert v.hint is not None and v.hint.layer == "guest configuration"
    assert "(write back when probed)" in v.lines[0]


def test_an_honest_write_through_passes() -> None:
    # the guest's cache_type turned the device's cache off: the host's writeback is false, no flush is needed
    v = judge_write_cache(_disks("lie", "write through", host_case="honest"))
    assert v.passed, v.explain()
    assert v.properties["dut_host_writeback"] == 0 and not v.notes


def _one(host: HostCache, flushes: Flushes, believed: str = "write back", probed: str = "write back",
         asked: str | None = None) -> DiskCache:
    return DiskCache("dut", GuestCache("sda", probed, believed, 0), host, flushes, asked)


WRITEBACK = HostCache(True, True, False, "q")


def test_a_guest_that_drops_its_own_flushes_is_the_guest_driver() -> None:
    v = judge_write_cache([_one(WRITEBACK, Flushes(49, 10, 10))])
    assert v.problems == (("dut disk sda: the host has a write-back cache (cache=none (writeback=true direct=true "
                           "no-flush=false), q) and the guest believes it, but its 49 fsyncs sent only 10 flushes: 39 "
                           "acknowledged but not durable [blame: guest driver]"),)


def test_flushes_lost_between_the_guest_and_the_host_are_nobodys_yet() -> None:
    v = judge_write_cache([_one(WRITEBACK, Flushes(49, 49, 0))])
    assert len(v.problems) == 1 and "flushes lost between the guest's block layer and the host's" in v.problems[0]
    assert v.hint is not None and v.hint.layer == "unknown"
    # a kernel without flush fields: the host's flushes are held against the fsyncs
    v = judge_write_cache([_one(WRITEBACK, Flushes(49, None, 48))])
    assert "sent none flushes for 49 fsyncs and the host saw 48" in v.problems[0]
    assert "dut_flushes_guest" not in v.properties
    assert judge_write_cache([_one(WRITEBACK, Flushes(49, None, 49))]).passed


def test_a_guest_probed_write_through_over_a_write_back_device_is_the_guest_driver() -> None:
    v = judge_write_cache([_one(WRITEBACK, Flushes(49, 0, 0), "write through", "write through")])
    assert v.hint is not None and v.hint.layer == "guest driver"


def test_unsafe_is_the_hosts_choice_when_asked_and_the_hypervisors_fault_when_not() -> None:
    unsafe = HostCache(True, False, True, "q")
    asked = judge_write_cache([_one(unsafe, Flushes(49, 49, 49), asked="unsafe")])
    assert asked.passed and "cache=unsafe, as asked" in asked.notes[0] and asked.properties["dut_host_no_flush"] == 1
    silent = judge_write_cache([_one(unsafe, Flushes(49, 49, 49), asked="none")])
    assert silent.problems[0].startswith("dut disk sda: the host drops the guest's flushes (cache=unsafe")
    assert "where the suite asked for cache=none" in silent.problems[0]
    assert silent.hint is not None and silent.hint.layer == "hypervisor"
    own = judge_write_cache([_one(HostCache(True, True, True), Flushes(49, 49, 49))])
    assert "its own set-up (no-flush off)" in own.problems[0] and "cache=other" in own.problems[0]


def test_write_back_over_a_write_through_host_is_a_note_and_no_fsyncs_fail() -> None:
    v = judge_write_cache([_one(HostCache(False, False, False), Flushes(49, 49, 49))])
    assert v.passed and "its flushes are not needed" in v.notes[0]
    v = judge_write_cache([_one(WRITEBACK, Flushes(0, 0, 0))])
    assert v.problems == ("dut disk sda: fio completed no fsyncs: nothing to compare [blame: unknown]",)
