"""The discard rule's judgement (model/rules/discard.py), on the numbers of real runs: the embedded
Debian 6.1 guest on QEMU 7.2 under TCG, the scratch disk on virtio-scsi (sdb: granularity 4096,
discard_max_bytes 1 GiB, write_zeroes_max_bytes 2 GiB - 4 KiB) and virtio-blk (vdb: granularity 512,
2 GiB - 512 for both), healthy and with ``--inject discard-off``. fstrim: ext4 over the first 64 MiB, an
8 MiB file written and deleted; the guest trimmed all its free space (58650624 bytes) in one request
at the host, the backing file's allocation in the region went from 8531968 to 143360 bytes (the
filesystem's metadata stays)."""

from __future__ import annotations

import dataclasses

from model.parse.blockstats import HostUnmapCounters, parse_qmp_unmap
from model.rules.discard import (
    FSTRIM_FILE_BYTES,
    FSTRIM_FS_BYTES,
    RANGES,
    SPLIT_MAX_BYTES,
    ZEROES_RANGE,
    DiscardLimits,
    RangeSeen,
    TrimSeen,
    ZeroesSeen,
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


TRIMMED = 58650624


def _trim(device_counts: bool) -> TrimSeen:
    """The healthy fstrim: QEMU 7.2's scsi-hd counts it in the device's counters too, virtio-blk does not."""
    device = (1, TRIMMED) if device_counts else (0, 0)
    return TrimSeen(FSTRIM_FS_BYTES, FSTRIM_FILE_BYTES, "", TRIMMED, 1, TRIMMED, 0, 8531968, 143360, 0.061, *device)


def _zeroes(max_bytes: int) -> ZeroesSeen:
    """The healthy write-zeroes: one 1 MiB write-zeroes at the host, no data, 1 MiB in the device's write counters."""
    return ZeroesSeen(ZEROES_RANGE, max_bytes, "", "", 0, 1, ZEROES_RANGE.length_bytes, 0, ZEROES_RANGE.length_bytes)


def test_fstrim_and_write_zeroes_pass_on_the_healthy_guest() -> None:
    scsi = judge_discard(SCSI, _healthy(SCSI, True), WHERE, "sdb", _trim(True), _zeroes(2147479552))
    blk = judge_discard(BLK, _healthy(BLK, False), WHERE, "vdb", _trim(False), _zeroes(2147483136))
    for v in (scsi, blk):
        assert v.passed, v.problems
        assert v.properties["fstrim_host_bytes"] == v.properties["fstrim_guest_trimmed_bytes"] == TRIMMED
        assert v.properties["fstrim_allocated_before_bytes"] == 8531968 and v.properties["zeroes_host_zero_bytes"] == 1 << 20
    assert scsi.properties["fstrim_device_bytes"] == TRIMMED and blk.properties["fstrim_device_bytes"] == 0
    assert "fstrim on ext4 over the first 67108864 bytes of vdb, after a file of 8388608 bytes was written and " \
           "deleted: guest trimmed 58650624 bytes" in blk.explain()


def test_discard_off_fails_the_fstrim_part_and_not_write_zeroes() -> None:
    """--inject discard-off: busybox's fstrim answers "FITRIM: Operation not supported", the host sees
    nothing and the file's 8 MiB stay allocated; write-zeroes does not depend on discard_max_bytes."""
    off = DiscardLimits(512, 0, 2147483136)
    refused = TrimSeen(FSTRIM_FS_BYTES, FSTRIM_FILE_BYTES, "fstrim: FITRIM: Operation not supported", None, 0, 0, 0,
                       8531968, 8531968, 0.051, 0, 0)
    v = judge_discard(off, [], WHERE, "vdb", refused, _zeroes(2147483136))
    assert v.problems == (("fstrim on ext4 over the first 67108864 bytes of vdb after deleting a file of 8388608 "
                           "bytes: fstrim failed (fstrim: FITRIM: Operation not supported) although the device "
                           "advertises discard (discard_max_hw_bytes 2147483136); the guest's discard_max_bytes is 0"),)
    assert v.properties["fstrim_guest_ok"] == 0 and v.properties["zeroes_guest_zeroed"] == 1


def test_an_fstrim_the_host_saw_less_of_or_kept_fails_it() -> None:
    healthy = _trim(False)
    short = dataclasses.replace(healthy, host_bytes=FSTRIM_FILE_BYTES // 2)
    v = judge_discard(BLK, [], WHERE, "vdb", short)
    assert "the host saw 4194304 bytes discarded (1 requests), fewer than the 8388608 bytes the file freed" in v.problems[0]
    apart = dataclasses.replace(healthy, host_bytes=TRIMMED - (1 << 20))
    assert "where fstrim trimmed 58650624; at most 8192 apart" in judge_discard(BLK, [], WHERE, "vdb", apart).problems[0]
    kept = dataclasses.replace(healthy, allocated_after_bytes=healthy.allocated_before_bytes)  # discard=ignore
    v = judge_discard(BLK, [], WHERE, "vdb", kept)
    assert "gave back 0 bytes in the filesystem's region (8531968 -> 8531968 allocated), fewer than the 8388608" \
           in v.problems[0]
    little = dataclasses.replace(healthy, guest_trimmed_bytes=4096, host_bytes=4096)
    problems = judge_discard(BLK, [], WHERE, "vdb", little).problems
    assert "fstrim trimmed 4096 bytes, fewer than the 8388608 bytes the file freed" in problems[0]


def test_write_zeroes_the_host_took_as_data_or_that_reads_back_fails_it() -> None:
    written = dataclasses.replace(_zeroes(2147483136), host_zero_requests=0, host_zero_bytes=0, host_data_bytes=1 << 20)
    v = judge_discard(BLK, [], WHERE, "vdb", zeroes=written)
    assert v.problems == (("the zeroes range [545259520, 546308096) (1048576 bytes): the host saw 0 bytes of it as "
                           "write-zeroes, fewer than the 1048576 the guest zeroed (at most 8192 fewer are "
                           "allowed); it took 1048576 bytes of data there instead: the guest wrote the zeroes out "
                           "itself"),)
    dirty = dataclasses.replace(_zeroes(2147483136), nonzero_bytes=4096)
    assert "4096 bytes of it read back other than zero" in judge_discard(BLK, [], WHERE, "vdb", zeroes=dirty).problems[0]
    untraced = ZeroesSeen(ZEROES_RANGE, 2147483136, "", "", 0, device_write_bytes=1 << 20)
    v = judge_discard(BLK, [], WHERE, "vdb", zeroes=untraced)
    assert v.passed and "the host cannot tell write-zeroes from writes without its trace" in v.notes[0]


def test_write_zeroes_not_advertised_or_not_askable_is_a_note() -> None:
    v = judge_discard(BLK, [], WHERE, "hdb", zeroes=ZeroesSeen(ZEROES_RANGE, 0))
    assert v.passed and v.notes == ("write-zeroes not checked: hdb does not advertise it (write_zeroes_max_bytes 0)",)
    assert v.properties["zeroes_advertised"] == 0
    busybox = ZeroesSeen(ZEROES_RANGE, 2147483136, unable="the guest cannot ask for it: no blkdiscard with -z")
    assert judge_discard(BLK, [], WHERE, "vdb", zeroes=busybox).notes[-1].startswith("write-zeroes not checked: the guest")
    refused = dataclasses.replace(_zeroes(2147483136), guest_error="blkdiscard: BLKZEROOUT ioctl failed: Input/output "
                                  "error", nonzero_bytes=None)
    assert "the guest could not zero it (blkdiscard: BLKZEROOUT" in judge_discard(BLK, [], WHERE, "vdb",
                                                                                   zeroes=refused).problems[0]
