"""The shared histogram model and its vscsiStats CSV form (writer and parser)."""

from __future__ import annotations

import pytest

from model.errors import ParseError
from model.parse.histogram import DIRECTIONS, Histogram, HistogramKind, HistogramSet
from model.parse.vscsistats_csv import parse_vscsistats_csv


def test_buckets_follow_vscsistats_semantics() -> None:
    h = Histogram.from_values(HistogramKind.IO_LENGTH, "read", [512, 4095, 4096, 4096, 4097, 1 << 20])
    counts = dict(zip(h.bucket_limits, h.counts, strict=False))
    # a bucket with limit L holds (previous limit, L]: 4095 and 4096 are separate buckets
    assert (counts[512], counts[4095], counts[4096], counts[8191]) == (1, 1, 2, 1)
    assert h.counts[-1] == 1  # 1 MiB is above the last limit (524288)
    assert (h.min, h.max, h.count) == (512, 1 << 20, 6)
    assert h.mean == pytest.approx(sum([512, 4095, 4096, 4096, 4097, 1 << 20]) / 6, abs=0.001)


def test_default_limits_are_vscsistats_ones() -> None:
    assert HistogramKind.OUTSTANDING_IOS.default_limits == (1, 2, 4, 6, 8, 12, 16, 20, 24, 28, 32, 64)
    assert HistogramKind.LATENCY_US.default_limits[-1] == 100000
    seek = HistogramKind.SEEK_DISTANCE.default_limits
    assert len(seek) == 33 and seek[0] == -500000 and 0 in seek and seek == tuple(sorted(seek))
    assert HistogramKind.INTERARRIVAL_US.title("read") == (
        "latency of IO interarrival time for Reads in Microseconds (us)")
    assert HistogramKind.OUTSTANDING_IOS.title("write") == (
        "number of outstanding Write IOs when a new Write IO is issued")


def test_percentile_is_bucket_upper_limit() -> None:
    h = Histogram.from_values(HistogramKind.OUTSTANDING_IOS, "all", [1] * 90 + [3] * 9 + [100])
    assert h.percentile(50) == 1
    assert h.percentile(90) == 1
    assert h.percentile(95) == 4
    assert h.percentile(100) == 100  # overflow bucket: the known max
    assert h.fraction_at_most(2) == pytest.approx(0.9)
    with pytest.raises(ParseError, match="is empty"):
        Histogram.empty(HistogramKind.LATENCY_US, "all").percentile(50)
    with pytest.raises(ValueError):
        h.percentile(0)


def test_minus_gives_the_interval() -> None:
    early = Histogram.from_values(HistogramKind.LATENCY_US, "all", [50, 50, 700])
    late = Histogram.from_values(HistogramKind.LATENCY_US, "all", [50, 50, 700, 700, 20000])
    d = late.minus(early)
    assert d.count == 2 and d.counts[4] == 1 and d.counts[7] == 1
    assert (d.min, d.max) == (None, None)
    assert d.mean == pytest.approx(10350)
    with pytest.raises(ParseError, match="went down between snapshots"):
        early.minus(late)
    with pytest.raises(ParseError, match="different kind"):
        late.minus(Histogram.empty(HistogramKind.INTERARRIVAL_US, "all"))


def test_invariants_are_checked() -> None:
    with pytest.raises(ParseError, match="counts sum to 3 but count is 4"):
        Histogram(HistogramKind.OUTSTANDING_IOS, "all", (1, 2), (1, 1, 1), 1, 3, 2.0, 4)
    with pytest.raises(ParseError, match="3 counts for 3 limits"):
        Histogram(HistogramKind.OUTSTANDING_IOS, "all", (1, 2, 4), (1, 1, 1), 1, 3, 2.0, 3)
    with pytest.raises(ParseError, match="not increasing"):
        Histogram(HistogramKind.OUTSTANDING_IOS, "all", (2, 1), (1, 1, 1), 1, 3, 2.0, 3)


def full_set(seed: int) -> HistogramSet:
    values = [(i * 7919 + seed) % 70000 - 20000 for i in range(200)]
    return HistogramSet(tuple(Histogram.from_values(k, d, values[: 50 + 20 * DIRECTIONS.index(d)])
                              for k in HistogramKind for d in k.directions))


def test_csv_round_trip() -> None:
    hs = full_set(3)
    text = hs.to_vscsistats_csv(2099979, 8194, "scsi0:0")
    (parsed,) = parse_vscsistats_csv(text)
    assert (parsed.world_group_id, parsed.handle_id, parsed.disk_label) == (2099979, 8194, "scsi0:0")
    assert parsed.histograms == hs.histograms
    assert parsed.to_vscsistats_csv() == text


def test_csv_layout_is_vscsistats() -> None:
    hs = HistogramSet((Histogram.from_values(HistogramKind.OUTSTANDING_IOS, "all", [1, 1, 2, 40, 70]),))
    lines = hs.to_vscsistats_csv(7, 8193, "scsi0:1").splitlines()
    assert lines[:6] == [
        ("Histogram: number of outstanding IOs when a new IO is issued,virtual machine worldGroupID,7,"
         "virtual disk handleID,8193 (scsi0:1)"),
        "min,1", "max,70", "mean,22.8", "count,5", "Frequency,Histogram Bucket Limit"]
    assert lines[6:8] == ["2,1", "1,2"]
    assert lines[-2:] == ["1,64", "1,64"]  # the overflow row repeats the last limit
    with pytest.raises(ValueError, match="needs a world_group_id"):
        hs.to_vscsistats_csv()


def test_set_lookup_and_minus() -> None:
    a, b = full_set(1), full_set(1)
    zero = b.minus(a)
    assert zero.get(HistogramKind.LATENCY_US, "write").count == 0
    with pytest.raises(ParseError, match=r"no seekDistancePrev16/read"):
        a.get(HistogramKind.SEEK_DISTANCE_PREV16, "read")
    h = Histogram.empty(HistogramKind.LATENCY_US, "all")
    with pytest.raises(ParseError, match="appears twice"):
        HistogramSet((h, h))
