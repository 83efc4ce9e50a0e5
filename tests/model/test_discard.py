"""The discard rule's judgement (model/rules/discard.py), on the numbers of real runs: the embedded
Debian 6.1 guest on QEMU 7.2 under TCG, the scratch disk on virtio-scsi (sdb: granularity 4096,
discard_max_bytes 1 GiB) and virtio-blk (vdb: granularity 512, 2 GiB - 512), healthy and with
``--inject discard-off``."""

from __future__ import annotations

from model.parse.blockstats import HostUnmapCounters, parse_qmp_unmap
from model.rules.discard import (
    RANGES,
    SPLIT_MAX_BYTES,
    DiscardLimits,
    RangeSeen,
    judge_discard,
    split_max_bytes,
)

WHERE = "the backing file /tmp/run/dut1.img on this machine"
SCSI = DiscardLimits(4096, 1 << 30, 1 << 30)
BLK = DiscardLimits(512, 2147483136, 2147483136)
ALIGNED, UNALIGNED, BEYOND = RANGES


def _healthy(limits: DiscardLimits, device_counts: bool) -> list[RangeSeen]:
    """What the host saw on the healthy guest: the file node took the unaligned range in two requests
    (QEMU's block layer splits off its unaligned head), the beyond_max one in 8 of 256 KiB; QEMU 7.2's
    virtio-blk does not count discards in its device counters."""
    rows = []
    for r, requests, kept in ((ALIGNED, 1, 0), (UNALIGNED, 2, 2560), (BEYOND, 8, 0)):
        guest_max = SPLIT_MAX_BYTES if r is BEYOND else limits.max_bytes
        device = (1 if r is ALIGNED else 8 if r is BEYOND else 1, r.length_bytes) if device_counts else (0, 0)
        rows.append(RangeSeen(r, "", requests, r.length_bytes, 0, r.length_bytes, kept, guest_max, *device))
    return rows


def test_the_healthy_guest_passes_on_virtio_scsi_and_virtio_blk() -> None:
    scsi = judge_discard(SCSI, _healthy(SCSI, True), WHERE, "sdb")
    assert scsi.passed, scsi.problems
    assert scsi.properties["beyond_max_host_requests"] == 8 and scsi.properties["unaligned_allocated_after_bytes"] == 2560
    blk = judge_discard(BLK, _healthy(BLK, False), WHERE, "vdb")
    assert blk.passed, blk.problems
    assert any("does not account discards" in n for n in blk.notes), blk.notes


def test_discard_off_fails_it_naming_the_guest_setting() -> None:
    """--inject discard-off: blkdiscard answers "BLKDISCARD failed: Operation not supported", the host sees nothing."""
    error = "blkdiscard: /dev/vdb: BLKDISCARD failed: Operation not supported"
    seen = [RangeSeen(r, error, 0, 0, 0, r.length_bytes, r.length_bytes, 0, 0, 0) for r in RANGES]
    v = judge_discard(DiscardLimits(512, 0, 2147483136), seen, WHERE, "vdb")
    assert not v.passed and len(v.problems) == 3
    assert "the guest's discard_max_bytes is 0: the guest passes no discard on" in v.problems[0]
    assert v.properties["aligned_guest_discarded"] == 0 and v.properties["discard_advertised"] == 1


def test_a_device_without_discard_fails_it() -> None:
    v = judge_discard(DiscardLimits(0, 0, 0), [], WHERE, "hdb")
    assert v.problems == (("hdb: the device does not advertise discard (discard_max_hw_bytes 0): the space the guest "
                          "frees can never reach the host"),)


def test_a_discard_the_host_never_saw_or_kept_fails_it() -> None:
    r = ALIGNED
    unseen = judge_discard(SCSI, [RangeSeen(r, "", 0, 0, 0, r.length_bytes, r.length_bytes, SCSI.max_bytes)], WHERE)
    assert "the host saw no discard" in unseen.problems[0]
    ignored = judge_discard(SCSI, [RangeSeen(r, "", 1, r.length_bytes, 0, r.length_bytes, r.length_bytes,
                                             SCSI.max_bytes)], WHERE)  # discard=ignore: counted, not punched
    assert "still holds 1048576 bytes of data" in ignored.problems[0]


def test_rounding_and_splitting_beyond_the_granularity_fail_it() -> None:
    r = UNALIGNED
    rounded = judge_discard(SCSI, [RangeSeen(r, "", 1, r.length_bytes - 3 * 4096, 0, None, None, SCSI.max_bytes)],
                            WHERE)
    assert "12288 fewer than the guest discarded; at most 8192 fewer" in rounded.problems[0], rounded.problems
    assert any("allocation was not read" in n for n in rounded.notes)
    split = judge_discard(SCSI, [RangeSeen(BEYOND, "", 64, BEYOND.length_bytes, 0, None, None, SPLIT_MAX_BYTES)],
                          WHERE)
    assert "64 discard requests, more than the 9" in split.problems[0], split.problems


def test_the_guest_limit_is_lowered_only_where_it_is_above_the_split() -> None:
    assert split_max_bytes(SCSI) == SPLIT_MAX_BYTES
    assert split_max_bytes(DiscardLimits(512, 0, 2147483136)) is None  # discard-off stays off
    assert split_max_bytes(DiscardLimits(1 << 20, 1 << 30, 1 << 30)) == 1 << 20


def test_unmap_counters_are_read_from_the_device_and_its_file_node() -> None:
    """A query-blockstats entry as QEMU 7.2 answers it for a libvirt virtio-blk disk (trimmed)."""
    reply = {"return": [{"qdev": "ua-vioc-dut03", "node-name": "libvirt-1-format",
                         "stats": {"rd_operations": 1, "wr_operations": 2, "flush_operations": 0, "rd_bytes": 0,
                                   "wr_bytes": 0, "rd_total_time_ns": 0, "wr_total_time_ns": 0,
                                   "flush_total_time_ns": 0, "unmap_operations": 0, "unmap_bytes": 0,
                                   "failed_unmap_operations": 0},
                         "parent": {"node-name": "libvirt-1-storage", "stats": {},
                                    "driver-specific": {"driver": "file", "discard-nb-ok": 11, "discard-nb-failed": 0,
                                                        "discard-bytes-ok": 4196864}}}]}
    now = parse_qmp_unmap(reply, "dut03")
    assert now == HostUnmapCounters(0, 0, 0, 11, 4196864, 0)
    assert now.since(HostUnmapCounters(0, 0, 0, 10, 4196864 - 4096, 0)) == HostUnmapCounters(0, 0, 0, 1, 4096, 0)
