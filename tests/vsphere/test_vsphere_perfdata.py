"""QueryPerf CSV parsing and the counter arithmetic, on fixed data (no simulator)."""

from __future__ import annotations

import pytest

from hypervisors.vsphere.perfdata import (
    DISK_COUNTERS,
    NS_PER_S,
    READ_OIO,
    READS_PER_S,
    PerfSample,
    PerfWindowSummary,
    counters_from_samples,
    inside,
    parse_perf_csv,
)
from model.errors import HypervisorError

# vCenter's CSV form: sampleInfoCSV pairs "interval,end time"; one "v1,v2,v3" string per counter.
INFO = "20,2024-05-01T10:00:20Z,20,2024-05-01T10:00:40Z,20,2024-05-01T10:01:00Z"
T0 = 1714557600 * NS_PER_S  # 2024-05-01T10:00:00Z


def series(**overrides: str) -> dict[str, str]:
    values = dict.fromkeys(DISK_COUNTERS, "0,0,0")
    values.update({READ_OIO: "2,8,32", READS_PER_S: "100,400,1600",
                   "virtualDisk.readIOSize.latest": "4096,4096,8192"})
    values.update(overrides)
    return values


def test_parse_orders_by_time_and_keeps_values() -> None:
    samples = parse_perf_csv(INFO, series())
    assert [s.end_ns for s in samples] == [T0 + 20 * NS_PER_S, T0 + 40 * NS_PER_S, T0 + 60 * NS_PER_S]
    assert [s.get(READ_OIO) for s in samples] == [2, 8, 32]
    # a newest-first answer (vcsim's stock QueryPerf) gives the same samples
    reversed_info = ",".join(f"20,{t}" for t in reversed(INFO.split(",")[1::2]))
    reversed_series = {k: ",".join(reversed(v.split(","))) for k, v in series().items()}
    assert parse_perf_csv(reversed_info, reversed_series) == samples
    assert parse_perf_csv(None, dict.fromkeys(DISK_COUNTERS)) == []


@pytest.mark.parametrize(("info", "values", "message"), [
    ("20,2024-05-01T10:00:20Z,20", series(), "odd number of fields"),
    (INFO, series(**{READ_OIO: "1,2"}), "readOIO.latest has 2 values for 3 samples"),
])
def test_malformed_answers(info: str, values: dict[str, str], message: str) -> None:
    with pytest.raises(HypervisorError, match=message):
        parse_perf_csv(info, values)


def test_counters_little_law_and_origin() -> None:
    samples = parse_perf_csv(INFO, series())
    c = counters_from_samples(samples, origin_ns=T0)
    assert c.rd_operations == (100 + 400 + 1600) * 20
    assert c.rd_bytes == (100 * 4096 + 400 * 4096 + 1600 * 8192) * 20
    assert c.rd_total_time_ns == (2 + 8 + 32) * 20 * NS_PER_S
    assert (c.wr_operations, c.flush_operations, c.taken_at_ns) == (0, 0, T0 + 60 * NS_PER_S)
    # a sample that began before the origin is not counted; before any sample the clock is the origin
    later = counters_from_samples(samples, origin_ns=T0 + 5 * NS_PER_S)
    assert later.rd_operations == (400 + 1600) * 20
    assert counters_from_samples([], origin_ns=T0).taken_at_ns == T0


def test_window_summary_weights_size_by_requests() -> None:
    samples = parse_perf_csv(INFO, series())
    assert inside(samples, T0 + 20 * NS_PER_S, T0 + 60 * NS_PER_S) == samples[1:]
    s = PerfWindowSummary.of(samples)
    assert (s.samples, s.seconds) == (3, 60)
    assert s.read_oio == pytest.approx((2 + 8 + 32) / 3)
    assert s.read_io_size_bytes == pytest.approx((100 * 4096 + 400 * 4096 + 1600 * 8192) / 2100)
    assert s.write_io_size_bytes == 0.0
    with pytest.raises(HypervisorError, match="measure for longer"):
        PerfWindowSummary.of([])


def test_sample_get_unknown_counter() -> None:
    with pytest.raises(KeyError):
        PerfSample(T0, 20, ((READ_OIO, 1),)).get("virtualDisk.largeSeeks.latest")
