"""/proc/diskstats parsing and iostat arithmetic, on two real snapshots around a fio run."""

from __future__ import annotations

from pathlib import Path

import pytest

from model.errors import ParseError
from model.parse.proc_diskstats import DiskStats, DiskStatsDelta, diskstats_for, parse_diskstats

DATA = Path(__file__).resolve().parents[1] / "data"
ELAPSED_MS = 2440  # measured around the recorded fio run


def snapshot(when: str) -> str:
    return (DATA / f"diskstats-6.18-{when}.txt").read_text()


def test_parse_20_field_kernel() -> None:
    stats = parse_diskstats(snapshot("before"))
    assert set(stats) >= {"vda", "loop0", "zram0"}
    vda = stats["vda"]
    assert (vda.major, vda.minor, vda.reads_completed, vda.sectors_read) == (254, 0, 61795, 4624698)
    assert (vda.weighted_io_time_ms, vda.discards_completed, vda.flushes_completed, vda.flush_time_ms) == (
        26229, 6229, 2144, 88)


@pytest.mark.parametrize("fields", [14, 18])
def test_older_kernels_have_fewer_fields(fields: int) -> None:
    line = next(l for l in snapshot("before").splitlines() if " vda " in l)
    vda = parse_diskstats(" ".join(line.split()[:fields]))["vda"]
    assert vda.weighted_io_time_ms == 26229
    assert vda.flushes_completed is None
    assert (vda.discards_completed is None) == (fields == 14)


def test_delta_gives_iostat_figures() -> None:
    before, after = diskstats_for(snapshot("before"), "vda"), diskstats_for(snapshot("after"), "vda")
    d = DiskStatsDelta.between(before, after, ELAPSED_MS)
    assert (d.reads_completed, d.writes_completed, d.flushes_completed) == (161951, 57, 3)
    assert d.avg_queue_size == pytest.approx(45238 / 2440)  # fio kept 32 in flight; the block layer ~18.5
    assert 18 < d.avg_queue_size < 32
    assert d.avg_request_size_bytes == pytest.approx((1309024 + 131216) * 512 / 162008)
    assert d.read_iops == pytest.approx(161951 / 2.44)
    assert d.util_pct == pytest.approx(1824 / 2440 * 100)
    assert d.await_ms == pytest.approx((44731 + 503) / 162008)


def test_delta_without_flush_fields_has_no_flush_count() -> None:
    def cut(text: str) -> str:
        return "\n".join(" ".join(line.split()[:18]) for line in text.splitlines())

    d = DiskStatsDelta.between(diskstats_for(cut(snapshot("before")), "vda"),
                               diskstats_for(cut(snapshot("after")), "vda"), ELAPSED_MS)
    assert d.flushes_completed is None and d.reads_completed == 161951


def test_idle_device_has_zero_rates() -> None:
    loop = parse_diskstats(snapshot("before"))["loop0"]
    d = DiskStatsDelta.between(loop, loop, 1000)
    assert (d.avg_request_size_bytes, d.await_ms, d.avg_queue_size, d.util_pct) == (0, 0, 0, 0)


def test_counter_going_backwards_is_an_error() -> None:
    before, after = diskstats_for(snapshot("before"), "vda"), diskstats_for(snapshot("after"), "vda")
    with pytest.raises(ParseError, match=r"vda: \w+ went backwards \(\d+ -> \d+\).*take them again"):
        DiskStatsDelta.between(after, before, ELAPSED_MS)
    with pytest.raises(ParseError, match="elapsed_ms must be positive"):
        DiskStatsDelta.between(before, after, 0)
    other = DiskStats(7, 0, "loop0", *([0] * 11))
    with pytest.raises(ParseError, match=r"different devices \(vda then loop0\)"):
        DiskStatsDelta.between(before, other, ELAPSED_MS)


def test_malformed_input() -> None:
    with pytest.raises(ParseError, match=r"snap line 2: 5 fields, expected one of \(14, 18, 20\)"):
        parse_diskstats(snapshot("before").splitlines()[0] + "\n 1 2 sda 3 4\n", source="snap")
    with pytest.raises(ParseError, match=r"line 1: a counter is not an integer"):
        parse_diskstats(" 8 0 sda x 0 0 0 0 0 0 0 0 0 0")
    with pytest.raises(ParseError, match=r"line 1: negative counter"):
        parse_diskstats(" 8 0 sda -1 0 0 0 0 0 0 0 0 0 0")
    with pytest.raises(ParseError, match=r"no device 'vdb'; devices are \[.*'vda'"):
        diskstats_for(snapshot("before"), "vdb")
    with pytest.raises(ParseError, match="no devices"):
        parse_diskstats("\n")


@pytest.mark.parametrize(("kernel", "line", "discards", "flushes"), [
    # Synthetic, to Documentation/admin-guide/iostats.rst: 14 fields up to 4.17 (e.g. 4.14),
    # 18 from 4.18 (RHEL 8's kernel: discard fields), 20 from 5.5 (flush fields; recorded in the
    # embedded guest's 6.1 and this machine's 6.18). A partition line has the same fields as its disk.
    ("4.14", "   8      16 sdb 120 0 960 30 5 0 40 2 0 40 32", None, None),
    ("4.18", "   8      17 sdb1 120 0 960 30 5 0 40 2 0 40 32 7 0 56 1", 7, None),
    ("5.5+", " 252       0 vda 120 0 960 30 5 0 40 2 0 40 32 7 0 56 1 3 4", 7, 3),
])
def test_each_kernels_field_count(kernel: str, line: str, discards: int | None, flushes: int | None) -> None:
    s = next(iter(parse_diskstats(line).values()))
    assert (s.reads_completed, s.sectors_read, s.weighted_io_time_ms) == (120, 960, 32), kernel
    assert (s.discards_completed, s.flushes_completed) == (discards, flushes), kernel
