"""The data-integrity rule's checking of blocks: fio 3.33's verify sectors as recorded, and synthetic
backing files built here sector by sector in the same layout (a healthy run, a shifted block, a stale
generation, an earlier run's block, a torn block, a write outside the range, the lba-shift fault's
whole-range shift), judged as the suite judges them."""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from model.parse.fio_verify import DATA_START, SECTOR_BYTES, fio_crc32c, parse_sector, parse_verify_failures
from model.rules.data_integrity import (
    PLAN,
    GuestCheck,
    Region,
    check_backing,
    guest_bad_blocks,
    judge_data_integrity,
    last_pass,
    pattern,
)

DATA = Path(__file__).resolve().parents[1] / "data"
#: tests/data/README.md: the suite's fio arguments for run 0x1a2b3c4d, sectors at these offsets of the range
RECORDED_RUN = 0x1A2B3C4D
RECORDED_AT = (0, 512 << 10, 1536 << 10, 2 << 20, 3 << 20)
RUN = 0x5EED0001
#: the suite's range: the synthetic images are the plan's whole 4 MiB, as the suite writes it
REGION = Region()
WRITES = {p.name: p.writes for p in PLAN}


def fio_sector(offset_bytes: int, thread: int, run_id: int, generation: int, numberio: int = 0,
               time_sec: int = 0, time_nsec: int = 0) -> bytes:
    """One sector as fio 3.33 writes it with --verify=md5 --verify_interval=512 --verify_pattern=0x<run><gen>."""
    data = pattern(run_id, generation) * ((SECTOR_BYTES - DATA_START) // 8)
    head = struct.pack("<HHIQQIIHH", 0xACCA, 2, SECTOR_BYTES, 0, offset_bytes, time_sec, time_nsec, thread, numberio)
    return head + struct.pack("<I", fio_crc32c(head)) + hashlib.md5(data).digest() + data


def test_fio_crc32c_is_fios_own() -> None:
    # fio's crc32c_sw starts from ~0 and does not invert at the end: the standard check value, inverted
    assert fio_crc32c(b"123456789") == 0xE3069283 ^ 0xFFFFFFFF


def test_recorded_fio_sectors_parse_and_the_builder_makes_them_byte_for_byte() -> None:
    raw = (DATA / "fio-3.33-verify-sectors.bin").read_bytes()
    generations = []
    for k, at in enumerate(RECORDED_AT):
        sector = raw[k * SECTOR_BYTES:(k + 1) * SECTOR_BYTES]
        s = parse_sector(sector)
        assert s.whole and s.offset_bytes == REGION.start_bytes + at, s
        gen = last_pass(PLAN, at)
        assert gen is not None and s.thread == gen.generation and s.pattern == pattern(RECORDED_RUN, gen.generation)
        generations.append(s.thread)
        times = struct.unpack_from("<II", sector, 24)
        assert fio_sector(s.offset_bytes, s.thread, RECORDED_RUN, s.thread, s.numberio, *times) == sector
    assert generations == [2, 3, 1, 4, 5]  # every pass is the last somewhere


def test_a_sector_that_is_no_fio_block() -> None:
    assert parse_sector(bytes(512)).zeros
    s = parse_sector(b"\x01" * 512)
    assert not s.zeros and not s.magic and not s.whole
    torn = bytearray(fio_sector(4096, 2, RUN, 2))
    torn[300] ^= 0xFF
    s = parse_sector(bytes(torn))
    assert s.header_ok and not s.md5_ok and not s.whole
    with pytest.raises(ValueError, match="512 bytes"):
        parse_sector(bytes(100))


def test_fios_verify_failures_as_it_printed_them() -> None:
    failures = parse_verify_failures((DATA / "fio-verify-failures.stderr").read_text())
    s = REGION.start_bytes
    assert [(f.offset_bytes - s, f.kind) for f in failures] == [
        (8192, "missing"), (16384, "torn"), (32768, "misplaced"), (40960, "misplaced")]
    assert [f.what for f in failures[:2]] == ["bad magic header 0, wanted acca", "md5: verify failed"]
    assert failures[2].what == f"bad header offset {s + 24576}, wanted {s + 32768}" and failures[0].file.endswith("disk.img")
    bad = guest_bad_blocks(failures)
    assert [(b.lba - s // 512, b.kind) for b in bad] == [(16, "lost"), (32, "torn"), (64, "misplaced"), (80, "misplaced")]
    shifted = guest_bad_blocks(failures, offset_bytes=4096)
    assert shifted[0].lba == bad[0].lba + 8


# --- synthetic backing files -----------------------------------------------------------------------
Sectors = dict[int, bytes]  # LBA -> sector


def written(run_id: int = RUN, shift_sectors: int = 0, skip: Callable[[int], bool] = lambda _lba: False) -> Sectors:
    """What the plan leaves on the disk: the last pass's block at each LBA of the range, ``shift_sectors``
    beside the LBA it names (lba-shift), the sectors ``skip`` names never written."""
    out: Sectors = {}
    first = REGION.start_bytes // SECTOR_BYTES
    for i in range(REGION.sectors):
        p = last_pass(PLAN, i * SECTOR_BYTES)
        assert p is not None
        if not skip(first + i):
            out[first + i + shift_sectors] = fio_sector((first + i) * SECTOR_BYTES, p.generation, run_id, p.generation)
    return out


def window_of(sectors: Sectors, before: Sectors | None = None) -> bytes:
    """The bytes the host reads: guards and range, zeros where nothing was written, ``before`` under the rest."""
    first = REGION.window_start_bytes // SECTOR_BYTES
    out = bytearray(REGION.window_bytes)
    for source in (before or {}, sectors):
        for lba, s in source.items():
            i = lba - first
            if 0 <= i < REGION.window_bytes // SECTOR_BYTES:
                out[i * SECTOR_BYTES:(i + 1) * SECTOR_BYTES] = s
    return bytes(out)


def guards(window: bytes) -> tuple[bytes, bytes]:
    return window[:REGION.guard_bytes], window[-REGION.guard_bytes:]


ZERO_GUARDS = (bytes(REGION.guard_bytes), bytes(REGION.guard_bytes))
CLEAN = GuestCheck("/dev/vdb", REGION.length_bytes, ())


def test_a_healthy_run_passes() -> None:
    host = check_backing(window_of(written()), ZERO_GUARDS, REGION, PLAN, RUN, "the backing file x.img")
    assert host.bad == () and host.sectors_checked == 8192 and host.guard_sectors_checked == 4096
    v = judge_data_integrity(host, CLEAN, REGION, PLAN, RUN, WRITES)
    assert v.passed, v.explain()
    assert v.properties["host_bad_sectors"] == 0 and v.properties["rand1k_writes"] == 512
    assert "LBA 524288-532479 (4 MiB at 256 MiB)" in v.explain()


def test_a_shifted_block_is_misplaced_and_names_where_it_went() -> None:
    sectors = written()
    lba = REGION.start_bytes // 512 + 100
    sectors[lba + 1] = sectors[lba]  # one block written one sector late, over its neighbour
    host = check_backing(window_of(sectors), ZERO_GUARDS, REGION, PLAN, RUN)
    assert [(b.lba, b.kind) for b in host.bad] == [(lba + 1, "misplaced")]
    assert host.shift_sectors == 1
    assert host.bad[0].found == f"the block naming LBA {lba}, generation 2"
    v = judge_data_integrity(host, CLEAN, REGION, PLAN, RUN, WRITES)
    assert not v.passed and "1 sector(s) not at the LBA they name" in v.explain()
    assert v.hint is not None and v.hint.layer == "unknown"


def test_a_stale_generation_is_a_lost_write() -> None:
    sectors = written()
    lba = REGION.start_bytes // 512 + 1024  # 512 KiB in: generation 3 (rand1k) wrote last
    sectors[lba] = fio_sector(lba * 512, 2, RUN, 2)  # its generation-2 block is still there
    host = check_backing(window_of(sectors), ZERO_GUARDS, REGION, PLAN, RUN)
    assert [(b.lba, b.kind) for b in host.bad] == [(lba, "lost")]
    assert host.bad[0].expected == f"the block naming LBA {lba}, generation 3 (rand1k) of run {RUN:08x}"
    assert host.bad[0].found == f"the block naming LBA {lba}, generation 2"
    v = judge_data_integrity(host, CLEAN, REGION, PLAN, RUN, WRITES)
    assert not v.passed and "1 sector(s) not the last generation written (a lost write)" in v.problems[0]


def test_an_earlier_runs_block_and_an_unwritten_sector_are_lost_writes() -> None:
    first = REGION.start_bytes // 512
    earlier = written(run_id=0x0BAD0001)
    sectors = written(skip=lambda lba: lba in (first + 7, first + 8))
    sectors[first + 7] = earlier[first + 7]
    host = check_backing(window_of(sectors), ZERO_GUARDS, REGION, PLAN, RUN)
    assert [(b.lba - first, b.kind) for b in host.bad] == [(7, "lost"), (8, "lost")]
    assert host.bad[0].found.endswith("of another run (0bad0001)") and host.bad[1].found == "zeros (never written)"


def test_a_torn_block_has_a_broken_checksum() -> None:
    sectors = written()
    lba = REGION.start_bytes // 512 + 5000  # 2.4 MiB in: generation 4
    half = bytearray(sectors[lba])
    half[256:] = fio_sector(lba * 512, 1, RUN, 1)[256:]  # the second half still the generation-1 write
    sectors[lba] = bytes(half)
    host = check_backing(window_of(sectors), ZERO_GUARDS, REGION, PLAN, RUN)
    assert [(b.lba, b.kind) for b in host.bad] == [(lba, "torn")]
    assert host.bad[0].found == f"the block naming LBA {lba}, generation 4, its MD5 broken"
    v = judge_data_integrity(host, CLEAN, REGION, PLAN, RUN, WRITES)
    assert "1 sector(s) with a broken checksum (a torn write)" in v.explain()


def test_a_write_outside_the_range() -> None:
    before = {REGION.end_bytes // 512 + 3: b"\x07" * 512}  # something of an earlier rule after the range
    sectors = written()
    stray = REGION.window_start_bytes // 512 + 10
    sectors[stray] = fio_sector(REGION.start_bytes, 2, RUN, 2)
    window, guards_before = window_of(sectors, before), guards(window_of({}, before))
    host = check_backing(window, guards_before, REGION, PLAN, RUN)
    assert [(b.lba, b.kind) for b in host.bad] == [(stray, "outside")]  # the earlier rule's sector is as it was
    assert host.bad[0].expected == "unchanged, as before the run"
    v = judge_data_integrity(host, CLEAN, REGION, PLAN, RUN, WRITES)
    assert "1 sector(s) changed outside the range the guest wrote" in v.explain()


def test_the_lba_shift_fault_moves_every_block_by_its_offset() -> None:
    """Figures of a real lba-shift run on virtio-blk (8 sectors): 8184 misplaced, 8 lost at the start
    (zeros on a fresh disk), 8 outside after the end; the guest reads all back clean through its mapping."""
    host = check_backing(window_of(written(shift_sectors=8)), ZERO_GUARDS, REGION, PLAN, RUN, "the backing file")
    assert (host.count("misplaced"), host.count("lost"), host.count("torn"), host.count("outside")) == (8184, 8, 0, 8)
    assert host.shift_sectors == 8
    mapping = "device-mapper target vioc-lba-shift (/dev/dm-0: linear over /dev/vdb from sector 8)"
    v = judge_data_integrity(host, GuestCheck("/dev/dm-0", REGION.length_bytes, ()), REGION, PLAN, RUN, WRITES,
                             mapping)
    text = v.explain()
    assert not v.passed
    assert ("8184 sector(s) not at the LBA they name (a shifted or misplaced write) (every block of this run found "
            "out of place lies +8 sectors (+4096 bytes) from the LBA it names: a shifted mapping); first: LBA 524296: "
            "expected the block naming LBA 524296, generation 2 (rand4k) of run 5eed0001, found the block naming "
            "LBA 524288, generation 2") in text, text
    assert "(and 8181 more)" in text and "0 bad" in text  # the guest's side
    assert v.notes and "the guest read back every sector as it wrote it" in v.notes[0]
    assert v.hint is not None and v.hint.layer == "guest configuration"
    assert v.properties["host_shift_sectors"] == 8 and v.properties["mapping"] == mapping


def test_bad_sectors_on_the_guests_side_and_short_work_fail_too() -> None:
    host = check_backing(window_of(written()), ZERO_GUARDS, REGION, PLAN, RUN)
    failures = parse_verify_failures((DATA / "fio-verify-failures.stderr").read_text())
    guest = GuestCheck("/dev/vdb", REGION.length_bytes, guest_bad_blocks(failures), failed=True)
    v = judge_data_integrity(host, guest, REGION, PLAN, RUN, {**WRITES, "rand4k": 383})
    text = v.explain()
    assert "guest (fio verify through /dev/vdb): 2 sector(s) not at the LBA they name" in text
    assert "guest (fio verify through /dev/vdb): 1 sector(s) not the last generation written" in text
    assert "pass rand4k completed 383 writes of the 384 it issues" in text
    assert v.properties["guest_bad_sectors"] == 4 and v.hint is not None and "the guest's side" in v.hint.reason
    unnamed = judge_data_integrity(host, GuestCheck("/dev/vdb", 4096, (), failed=True), REGION, PLAN, RUN, WRITES)
    assert "fio's read-back ended with its verify error and named no sector" in unnamed.explain()
    assert "the guest read back 4096 bytes of the 4194304 written" in unnamed.explain()


def test_the_plan_covers_the_range_and_each_pass_fits_its_writes() -> None:
    assert all(last_pass(PLAN, o) is not None for o in range(0, REGION.length_bytes, SECTOR_BYTES))
    assert [p.generation for p in PLAN] == list(range(1, len(PLAN) + 1))
    assert all(p.length_bytes % p.bs_bytes == 0 and p.start_bytes + p.length_bytes <= REGION.length_bytes for p in PLAN)
    with pytest.raises(ValueError, match="window read"):
        check_backing(b"", ZERO_GUARDS, REGION, PLAN, RUN)
