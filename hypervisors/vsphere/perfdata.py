"""vCenter realtime virtualDisk samples as data, and the counters the rules get from them.

Pure code (no pyVmomi): ``perf.py`` fetches, this parses and adds up, so it is tested on
recorded QueryPerf CSV.

vCenter has no cumulative per-request counters for a virtual disk, only one value per counter
per realtime sample (20 s on ESXi). ``counters_from_samples`` turns samples into the cumulative
``HostBlockCounters`` every backend returns, with these approximations:

- operations: ``numberReadAveraged`` is reads per second averaged over the sample, so a
  sample contributes ``rate x interval`` reads (rounded);
- bytes: operations x ``readIOSize`` (the sample's mean request size in bytes);
- total time: ``readOIO`` is the mean number of reads outstanding over the sample, so by
  Little's law a sample contributes ``OIO x interval`` of request time. The average in-flight
  depth over an interval is then exactly the time-weighted mean OIO of its samples;
- flushes: vSphere counts none, so ``flush_operations`` stays 0 (rules on flushes must skip);
- ``taken_at_ns`` is the end of the newest sample (vCenter's clock, ns since the epoch):
  differences are only as fine as whole samples, so a measured interval must span several.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from model.errors import HypervisorError
from model.parse.blockstats import HostBlockCounters

NS_PER_S = 1_000_000_000

#: The counters the backend reads, by ``group.name.rollup`` (ids differ between vCenter and ESXi).
READ_OIO = "virtualDisk.readOIO.latest"
WRITE_OIO = "virtualDisk.writeOIO.latest"
READ_IO_SIZE = "virtualDisk.readIOSize.latest"
WRITE_IO_SIZE = "virtualDisk.writeIOSize.latest"
READ_LATENCY_US = "virtualDisk.readLatencyUS.latest"
WRITE_LATENCY_US = "virtualDisk.writeLatencyUS.latest"
READS_PER_S = "virtualDisk.numberReadAveraged.average"
WRITES_PER_S = "virtualDisk.numberWriteAveraged.average"
DISK_COUNTERS = (READ_OIO, WRITE_OIO, READ_IO_SIZE, WRITE_IO_SIZE, READ_LATENCY_US, WRITE_LATENCY_US,
                 READS_PER_S, WRITES_PER_S)


@dataclass(frozen=True)
class PerfSample:
    """One realtime sample of one disk: the interval ending at ``end_ns`` and each counter's value."""

    end_ns: int
    interval_s: int
    values: tuple[tuple[str, int], ...]

    def get(self, counter: str) -> int:
        for name, value in self.values:
            if name == counter:
                return value
        raise KeyError(counter)

    @property
    def start_ns(self) -> int:
        return self.end_ns - self.interval_s * NS_PER_S


def _timestamp_ns(text: str) -> int:
    stamp = datetime.fromisoformat(text.strip())
    return int(stamp.timestamp()) * NS_PER_S + stamp.microsecond * 1000


def parse_perf_csv(sample_info_csv: str | None, series: Mapping[str, str | None]) -> list[PerfSample]:
    """Samples from one QueryPerf CSV answer, oldest first.

    ``sample_info_csv`` is ``"20,2024-05-01T10:00:20Z,20,2024-05-01T10:00:40Z"`` (interval and end
    time pairs); ``series`` maps each counter name to its ``"v1,v2"`` values, in the same order.
    The order is taken from the timestamps, not assumed. An answer without samples has
    empty (or unset) strings.
    """
    parts = [p for p in sample_info_csv.split(",") if p.strip()] if sample_info_csv else []
    if len(parts) % 2:
        raise HypervisorError(f"QueryPerf sampleInfoCSV has an odd number of fields: {(sample_info_csv or '')[:120]!r}")
    stamps = [(int(parts[i]), _timestamp_ns(parts[i + 1])) for i in range(0, len(parts), 2)]
    columns: dict[str, list[int]] = {}
    for name, text in series.items():
        values = [int(v) for v in text.split(",")] if text and text.strip() else []
        if len(values) != len(stamps):
            raise HypervisorError(f"QueryPerf: {name} has {len(values)} values for {len(stamps)} samples")
        columns[name] = values
    samples = [PerfSample(end_ns=end, interval_s=interval,
                          values=tuple((name, vals[i]) for name, vals in columns.items()))
               for i, (interval, end) in enumerate(stamps)]
    return sorted(samples, key=lambda s: s.end_ns)


def counters_from_samples(samples: Iterable[PerfSample], origin_ns: int) -> HostBlockCounters:
    """Cumulative counters since ``origin_ns`` from the samples that begin at or after it (see the module doc).

    Until the first such sample, ``taken_at_ns`` is ``origin_ns``: take the first snapshot of an
    interval once the guest has been up for a sample or two, or the first difference also spans
    the part of a sample before its start.
    """
    totals = dict.fromkeys(("rd_operations", "wr_operations", "rd_bytes", "wr_bytes",
                            "rd_total_time_ns", "wr_total_time_ns"), 0)
    last_ns = origin_ns
    for s in sorted(samples, key=lambda s: s.end_ns):
        if s.start_ns < origin_ns:  # whole samples only: one that began before the origin is not ours
            continue
        for side, rate, size, oio in (("rd", READS_PER_S, READ_IO_SIZE, READ_OIO),
                                      ("wr", WRITES_PER_S, WRITE_IO_SIZE, WRITE_OIO)):
            ops = round(s.get(rate) * s.interval_s)
            totals[f"{side}_operations"] += ops
            totals[f"{side}_bytes"] += ops * s.get(size)
            totals[f"{side}_total_time_ns"] += s.get(oio) * s.interval_s * NS_PER_S
        last_ns = s.end_ns
    return HostBlockCounters(flush_operations=0, flush_total_time_ns=0, taken_at_ns=last_ns, **totals)


@dataclass(frozen=True)
class PerfWindowSummary:
    """Means of the samples that lie wholly inside a measured interval (what the record command prints)."""

    samples: int
    seconds: int
    read_oio: float
    write_oio: float
    read_io_size_bytes: float
    write_io_size_bytes: float
    read_latency_us: float
    write_latency_us: float
    reads_per_s: float
    writes_per_s: float

    @classmethod
    def of(cls, samples: list[PerfSample]) -> PerfWindowSummary:
        """Time-weighted means; size and latency weighted by the sample's request count."""
        seconds = sum(s.interval_s for s in samples)
        if not samples or seconds == 0:
            raise HypervisorError("no realtime sample lies inside the interval: measure for longer")

        def mean(counter: str, weight: str | None = None) -> float:
            w = [s.interval_s * (s.get(weight) if weight else 1) for s in samples]
            total = sum(w)
            return sum(s.get(counter) * wi for s, wi in zip(samples, w, strict=False)) / total if total else 0.0

        return cls(samples=len(samples), seconds=seconds,
                   read_oio=mean(READ_OIO), write_oio=mean(WRITE_OIO),
                   read_io_size_bytes=mean(READ_IO_SIZE, READS_PER_S),
                   write_io_size_bytes=mean(WRITE_IO_SIZE, WRITES_PER_S),
                   read_latency_us=mean(READ_LATENCY_US, READS_PER_S),
                   write_latency_us=mean(WRITE_LATENCY_US, WRITES_PER_S),
                   reads_per_s=mean(READS_PER_S), writes_per_s=mean(WRITES_PER_S))


def inside(samples: Iterable[PerfSample], start_ns: int, end_ns: int) -> list[PerfSample]:
    """The samples whose whole interval lies within [start_ns, end_ns]."""
    return [s for s in samples if s.start_ns >= start_ns and s.end_ns <= end_ns]
