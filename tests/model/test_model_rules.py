"""The verdict arithmetic of rules 2-7 on numbers recorded from real guests (QEMU 7.2 TCG,
Debian 6.1 guest, 2026-11-22; see tests/data/README.md) and on the faults' recorded numbers."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from model.device_limits import ConfiguredLimits, parse_guest_limits
from model.errors import ParseError
from model.judging.figures import PairFigure
from model.judging.verdict import RuleVerdict
from model.parse.proc_interrupts import parse_queue_interrupts
from model.rules.alignment import MAX_CROSSING_FRACTION, count_boundary_crossings, judge_alignment
from model.rules.buffered_direct import (
    RegimeSample,
    RegimeSeries,
    allowed_change,
    judge_regime,
    merge_baseline,
    parse_baseline,
)
from model.rules.direct_io import Durability, LatencyFloor, OneForOne, judge_direct_io
from model.rules.io_size import IoSizeMeasurement, judge_io_size
from model.rules.limits import compare_limits, judge_limits
from model.rules.multi_queue import judge_multiqueue

DATA = Path(__file__).parent.parent / "data" / "guest"
MIB = 1 << 20


# --- io-size -------------------------------------------------------------------------------------
def _io(host_bytes: float, max_sectors_kb: int = 1280) -> IoSizeMeasurement:
    return IoSizeMeasurement(request_bytes=MIB, max_transfer_bytes=1280 * 1024, max_transfer_source="probed",
                             host_request_bytes=host_bytes, host_requests=1655, guest_max_sectors_kb=max_sectors_kb,
                             guest_max_hw_sectors_kb=32767, host_source="exact")


def test_io_size_passes_when_1mib_arrives_whole() -> None:
    v = judge_io_size(_io(1048576))  # recorded: virtio-scsi, 1655 traced requests, all 1 MiB
    assert v.passed, v.explain()
    assert v.properties["split_factor"] == 1.0


def test_io_size_fails_on_breakup_with_the_split_factor() -> None:
    v = judge_io_size(_io(65536, max_sectors_kb=64))  # io-breakup: every host request 64 KiB
    assert not v.passed
    assert v.properties["split_factor"] == 16.0
    assert "16.0 requests of 64 KiB" in v.explain() and "max_sectors_kb=64" in v.explain()


def test_io_size_expects_the_advertised_split_on_a_small_max_transfer() -> None:
    m = IoSizeMeasurement(MIB, 128 * 1024, "configured", 131072, 800, 128, 128, "exact")  # MegaRAID/AHCI
    v = judge_io_size(m)
    assert v.passed and v.properties["expected_split"] == 8, v.explain()


def test_io_size_allows_the_split_of_scattered_buffers_and_no_more() -> None:
    """Seen on the cloud-init test image: 5 host requests per 4 I/Os of 1 MiB (split 1.25) on
    virtio-scsi with max_segments 254 (1016 KiB of scattered pages). Without the segment count
    the same numbers fail; with it io-breakup's 16 still fails."""
    scattered = dataclasses.replace(_io(MIB / 1.25), guest_max_segments=254)
    assert judge_io_size(scattered).passed, judge_io_size(scattered).explain()
    assert judge_io_size(scattered).properties["allowed_split"] == 2.5
    assert not judge_io_size(_io(MIB / 1.3)).passed  # unknown segments: the strict bound
    breakup = dataclasses.replace(_io(65536, max_sectors_kb=64), guest_max_segments=254)
    assert not judge_io_size(breakup).passed and "254 segments of 4 KiB" in judge_io_size(breakup).explain()
    roomy = dataclasses.replace(_io(MIB / 1.3), guest_max_segments=512)  # 2 MiB of pages: no split allowed
    assert not judge_io_size(roomy).passed


def test_io_size_fails_when_nothing_reached_the_host() -> None:
    assert not judge_io_size(_io(0.0)).passed


# --- direct-io -----------------------------------------------------------------------------------
HEALTHY_FIDELITY = [OneForOne(1024, 200, 200, 204800), OneForOne(4096, 200, 200, 819200)]
HEALTHY_DURABILITY = [Durability("O_DSYNC writes", 100, 100), Durability("fsync after each buffered write", 99, 99)]


def test_direct_io_passes_on_recorded_healthy_numbers() -> None:
    v = judge_direct_io(HEALTHY_FIDELITY, HEALTHY_DURABILITY, True, "configured write back",
                        LatencyFloor(395.3, 171.5, 10.3, 75))
    assert v.passed, v.explain()
    assert v.properties["latency_added_p50_us"] == 223.8


def test_direct_io_durability_has_no_tolerance() -> None:
    v = judge_direct_io(HEALTHY_FIDELITY, [Durability("O_DSYNC writes", 100, 99)], True, "configured write back")
    assert not v.passed
    assert "1 writes were acknowledged while still in a volatile write cache" in v.explain()


def test_flush_dropped_fails_durability_only() -> None:
    # recorded with flush-dropped: the guest sent no flush at all
    v = judge_direct_io(HEALTHY_FIDELITY, [Durability("O_DSYNC writes", 100, 0), Durability("fsync", 99, 0)],
                        True, "configured write back; guest now 'write through'")
    assert len(v.problems) == 2 and all("flushes" in p for p in v.problems)


def test_write_through_device_needs_no_flushes() -> None:
    assert judge_direct_io(HEALTHY_FIDELITY, [Durability("O_DSYNC writes", 100, 0)], False, "write through").passed


def test_direct_io_fails_on_merged_or_split_writes() -> None:
    merged = judge_direct_io([OneForOne(4096, 200, 100, 819200)], [], True, "x")
    assert not merged.passed and "8 KiB on average" in merged.explain()
    split = judge_direct_io([OneForOne(4096, 200, 400, 819200)], [], True, "x")
    assert not split.passed


def test_durability_skipped_is_a_note_not_a_pass_of_durability() -> None:
    v = judge_direct_io(HEALTHY_FIDELITY, [], True, "x", durability_skipped="no flush counter")
    assert v.passed and "durability not checked: no flush counter" in v.explain()


# --- buffered-direct -----------------------------------------------------------------------------
def _baseline() -> dict[str, dict[str, RegimeSeries]]:
    return parse_baseline((DATA / "baseline-healthy.json").read_text(), "baseline-healthy.json")


def test_recorded_baseline_parses() -> None:
    b = _baseline()
    assert set(b) == {"libvirt:virtio-scsi:latency5ms", "libvirt:virtio-blk:latency5ms"}
    blk = b["libvirt:virtio-blk:latency5ms"]
    assert len(blk["buffered"].samples) == 3
    assert blk["direct"].stats("request_bytes") == (1048576.0, 1048576.0, 1048576.0)


def test_regime_within_noise_passes() -> None:
    base = _baseline()["libvirt:virtio-blk:latency5ms"]
    again = {"buffered": RegimeSeries("buffered", (RegimeSample(1040000, 1.0), RegimeSample(1046000, 1.3))),
             "direct": RegimeSeries("direct", (RegimeSample(1048576, 0.8), RegimeSample(1048576, 0.79)))}
    v = judge_regime(again, base, "b.json")
    assert v.passed, v.explain()


def test_readahead_off_fails_against_the_baseline() -> None:
    base = _baseline()["libvirt:virtio-scsi:latency5ms"]
    # recorded with read_ahead_kb=0: the buffered copy reached the host as 4 KiB requests
    now = {"buffered": RegimeSeries("buffered", (RegimeSample(4096, 0.8),) * 3),
           "direct": RegimeSeries("direct", (RegimeSample(1048576, 0.8),) * 3)}
    v = judge_regime(now, base, "b.json")
    assert not v.passed
    assert len(v.problems) == 1 and "buffered copy: host request size 4 KiB" in v.problems[0]


def test_noise_band_is_the_spreads_or_the_floor() -> None:
    a = RegimeSeries("buffered", (RegimeSample(100_000, 1.0), RegimeSample(200_000, 2.0)))
    b = RegimeSeries("buffered", (RegimeSample(150_000, 1.0), RegimeSample(150_000, 1.0)))
    assert allowed_change("request_bytes", a, b) == 100_000  # spread of a (100k) > 25 % of 150k
    assert allowed_change("depth", b, b) == 0.5  # the absolute floor


def test_no_baseline_records_only() -> None:
    v = judge_regime(_baseline()["libvirt:virtio-blk:latency5ms"], None)
    assert v.passed and "measured only" in v.explain()


def test_bad_baseline_files_are_named_errors() -> None:
    with pytest.raises(ParseError, match=r"x\.json: not JSON"):
        parse_baseline("{", "x.json")
    with pytest.raises(ParseError, match="not a vioconform baseline"):
        parse_baseline('{"a": 1}', "x.json")
    with pytest.raises(ParseError, match="bad sample"):
        parse_baseline('{"vioconform_baseline": 1, "configs": {"c": {"direct": [{"depth": 1}]}}}', "x.json")


def test_save_merges_and_never_overwrites_a_stranger() -> None:
    series = _baseline()["libvirt:virtio-blk:latency5ms"]
    text = merge_baseline(None, "c1", series, {"k": "v"})
    text = merge_baseline(text, "c2", series, {})
    assert set(parse_baseline(text, "t")) == {"c1", "c2"}
    with pytest.raises(ParseError):
        merge_baseline("my precious notes", "c1", series, {})


# --- alignment -----------------------------------------------------------------------------------
def _file_writes(start_sector: int, n: int = 400, size: int = 4096) -> list[tuple[int, int]]:
    """4 KiB writes at filesystem-block offsets of a partition starting at ``start_sector``."""
    return [(start_sector * 512 + (1000 + 7 * k) * 4096, size) for k in range(n)]


def test_aligned_partition_has_no_crossings() -> None:
    c = count_boundary_crossings(_file_writes(2048), 4096, 65536)
    assert (c.requests, c.misaligned, c.extra_stripe) == (400, 0, 0)
    assert judge_alignment(c, 2048 * 512, "w", "exact").passed


def test_sector_63_misaligns_every_request() -> None:
    c = count_boundary_crossings(_file_writes(63), 4096, 65536)
    assert c.misaligned == 400  # recorded: 400 of 400 on virtio-scsi and virtio-blk
    v = judge_alignment(c, 63 * 512, "w", "exact")
    assert not v.passed and "not a multiple of the optimal I/O size" in v.explain()


def test_64k_requests_at_sector_63_span_two_stripes() -> None:
    c = count_boundary_crossings([(63 * 512 + k * 65536, 65536) for k in range(10)], 4096, 65536)
    assert c.extra_stripe == 10  # recorded: 300 of 300 (vinum's multi-stripe transfers)


def test_alignment_tolerates_a_few_strays() -> None:
    reqs = _file_writes(2048) + [(512, 1024)] * int(400 * MAX_CROSSING_FRACTION)
    assert judge_alignment(count_boundary_crossings(reqs, 4096, 65536), 1 << 20, "w", "exact").passed


# --- limits --------------------------------------------------------------------------------------
def test_limits_pass_on_recorded_virtio_scsi() -> None:
    guest = parse_guest_limits((DATA / "limits-virtio-scsi.txt").read_text())
    cfg = ConfiguredLimits(queue_depth=128, write_cache=True, discard=True, queues=2)
    v = judge_limits([("dut", cfg, guest)])
    assert v.passed, v.explain()
    assert "maximum transfer (KiB) 32767 (not configured)" in v.explain()


def test_limits_name_both_values_on_a_mismatch() -> None:
    # recorded on QEMU 7.2's NVMe: physical_block_size=4096 configured, the namespace reports 512
    guest = parse_guest_limits((DATA / "limits-virtio-scsi.txt").read_text())
    cfg = ConfiguredLimits(queue_depth=128, physical_block_bytes=4096, optimal_io_bytes=65536, write_cache=True,
                           discard=True, queues=2)
    v = judge_limits([("scratch", cfg, guest)])
    assert not v.passed
    assert ("scratch disk sda: physical block size: the suite asked for 4096, the hypervisor did not say what the "
            "device advertises (the hypervisor was not asked), the guest sees 512 [blame: unknown]") in v.problems


def test_unset_limits_are_shown_not_compared() -> None:
    guest = parse_guest_limits((DATA / "limits-virtio-blk.txt").read_text())
    cmp = {c.key: c for c in compare_limits(ConfiguredLimits(queue_depth=None, write_cache=None, discard=None,
                                                             queues=None), guest)}
    assert not cmp["queue_depth"].compared and cmp["queue_depth"].matches
    assert cmp["queue_depth"].guest == 256  # virtio-blk: nr_requests


# --- multi-queue ---------------------------------------------------------------------------------
def test_proc_interrupts_per_queue() -> None:
    text = (DATA / "proc-interrupts-virtio-2q.txt").read_text()
    assert parse_queue_interrupts(text, "virtio1") == {0: 16, 1: 312}  # virtio-scsi: "virtio1-request" twice
    assert parse_queue_interrupts(text, "virtio2") == {0: 7, 1: 0}  # virtio-blk: "virtio2-req.0/.1"
    assert parse_queue_interrupts(text, "virtio9") == {}


def test_multiqueue_passes_on_recorded_spread() -> None:
    v = judge_multiqueue(2, 2, 2, {0: 1024, 1: 971})  # recorded: virtio-scsi, one fio job per vCPU
    assert v.passed, v.explain()


def test_multiqueue_fails_on_one_queue() -> None:
    v = judge_multiqueue(2, 2, 2, {0: 1900, 1: 12})
    assert not v.passed and "only 1 queue(s)" in v.explain()
    v = judge_multiqueue(2, 1, 2, {0: 1900})
    assert any("set up 1 hardware queue" in p for p in v.problems)


# --- figures: what the report draws, built by each judge from its own inputs ----------------------
def _pairs(v: RuleVerdict) -> list[tuple[str, float, float, str]]:
    return [(p.label, p.first, p.second, p.unit) for f in v.figures if isinstance(f, PairFigure) for p in f.pairs]


def test_io_size_figure_is_expected_against_host_request_size() -> None:
    assert _pairs(judge_io_size(_io(65536, max_sectors_kb=64))) == [
        ("request size: expected / host", 1024.0, 64.0, "KiB")]


def test_direct_io_figure_pairs_each_run() -> None:
    assert _pairs(judge_direct_io(HEALTHY_FIDELITY, [Durability("O_DSYNC writes", 100, 0),
                                                     Durability("fsync after each buffered write", 99, 99)],
                                  True, "x")) == [
        ("1 KiB writes: guest / host", 200, 200, ""), ("4 KiB writes: guest / host", 200, 200, ""),
        ("O_DSYNC: syncs / host flushes", 100, 0, ""), ("fsync: syncs / host flushes", 99, 99, "")]


def test_regime_figure_needs_a_baseline() -> None:
    base = _baseline()["libvirt:virtio-scsi:latency5ms"]
    now = {"buffered": RegimeSeries("buffered", (RegimeSample(4096, 0.8),) * 3)}
    assert _pairs(judge_regime(now, base, "b.json")) == [
        ("buffered size: baseline / now", base["buffered"].stats("request_bytes")[0] / 1024, 4.0, "KiB")]
    assert judge_regime(now, None).figures == ()


def test_alignment_and_multiqueue_figures() -> None:
    c = count_boundary_crossings(_file_writes(63), 4096, 65536)
    assert _pairs(judge_alignment(c, 63 * 512, "w", "exact")) == [("host requests / crossing a boundary", 400, 400, "")]
    assert _pairs(judge_multiqueue(2, 2, 2, {0: 1024, 1: 971})) == [("interrupts: queue 0 / queue 1", 1024, 971, "")]
    assert judge_multiqueue(2, 1, 2, {0: 1900}).figures == ()
