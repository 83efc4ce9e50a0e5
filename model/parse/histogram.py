"""vscsiStats-style histograms: one model for the QEMU tracer and for ESXi's vscsiStats.

The *exact* host-observed depth (docs/rules/queue-depth.md) is a histogram of how many I/Os were
outstanding when each new one arrived. vscsiStats measures it on ESXi; on QEMU the same
histograms are computed from trace events (model.parse.qemutrace). Both land here, so a rule
compares guest and host the same way on either hypervisor.

A bucket with upper limit L counts values v with previous limit < v <= L; the last count
is the overflow, values above the last limit (vscsiStats prints it as a row repeating the
last limit).

Bucket limits and titles are those of vscsiStats's ``-c`` (CSV) output as seen in real
captures, e.g. the fixture tests/fixtures/sample_vscsiStats.csv of
https://github.com/er0080/vscsiStats-helper (ESXi worldGroupID 2099979).
"""

from __future__ import annotations

import bisect
import enum
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from model.errors import ParseError

Direction = Literal["all", "read", "write"]
DIRECTIONS: tuple[Direction, ...] = ("all", "read", "write")


class HistogramKind(enum.Enum):
    """What a histogram measures, with vscsiStats's default bucket limits and titles.

    Members are in the order vscsiStats prints them.
    """

    IO_LENGTH = "ioLength"
    SEEK_DISTANCE = "seekDistance"
    SEEK_DISTANCE_PREV16 = "seekDistancePrev16"
    LATENCY_US = "latency"
    OUTSTANDING_IOS = "outstandingIOs"
    INTERARRIVAL_US = "interarrival"

    @property
    def default_limits(self) -> tuple[int, ...]:
        return _LIMITS[self]

    @property
    def directions(self) -> tuple[Direction, ...]:
        """The directions vscsiStats prints: the closest-of-16 distance exists only for all commands."""
        return ("all",) if self is HistogramKind.SEEK_DISTANCE_PREV16 else DIRECTIONS

    def title(self, direction: Direction) -> str:
        """vscsiStats's title text, e.g. "IO lengths of Read commands"."""
        return _TITLES[(self, direction)]


_SEEK_LIMITS = (1, 2, 4, 6, 8, 16, 32, 64, 128, 500, 1000, 5000, 10000, 50000, 100000, 500000)
_LIMITS: dict[HistogramKind, tuple[int, ...]] = {
    HistogramKind.IO_LENGTH: (512, 1024, 2048, 4095, 4096, 8191, 8192, 16383, 16384, 32768, 49152,
                              65535, 65536, 81920, 131072, 262144, 524288),
    HistogramKind.SEEK_DISTANCE: (*tuple(-x for x in reversed(_SEEK_LIMITS)), 0, *_SEEK_LIMITS),
    HistogramKind.SEEK_DISTANCE_PREV16: (*tuple(-x for x in reversed(_SEEK_LIMITS)), 0, *_SEEK_LIMITS),
    HistogramKind.LATENCY_US: (1, 10, 100, 500, 1000, 5000, 15000, 30000, 50000, 100000),
    HistogramKind.OUTSTANDING_IOS: (1, 2, 4, 6, 8, 12, 16, 20, 24, 28, 32, 64),
    HistogramKind.INTERARRIVAL_US: (1, 10, 100, 500, 1000, 5000, 15000, 30000, 50000, 100000),
}

# (direction, word inserted for most titles, words inserted in the interarrival title)
_VARIANTS: tuple[tuple[Direction, str, str], ...] = (("all", "", ""), ("read", "Read ", "for Reads "),
                                                     ("write", "Write ", "for Writes "))
_TITLES: dict[tuple[HistogramKind, Direction], str] = {}
for _d, _rw, _rws in _VARIANTS:
    _TITLES[(HistogramKind.IO_LENGTH, _d)] = f"IO lengths of {_rw}commands"
    _TITLES[(HistogramKind.SEEK_DISTANCE, _d)] = f"distance (in LBNs) between successive {_rw}commands"
    _TITLES[(HistogramKind.LATENCY_US, _d)] = f"latency of {_rw}IOs in Microseconds (us)"
    _TITLES[(HistogramKind.OUTSTANDING_IOS, _d)] = f"number of outstanding {_rw}IOs when a new {_rw}IO is issued"
    _TITLES[(HistogramKind.INTERARRIVAL_US, _d)] = f"latency of IO interarrival time {_rws}in Microseconds (us)"
_TITLES[(HistogramKind.SEEK_DISTANCE_PREV16, "all")] = (
    "distance (in LBNs) between each command from the closest of previous 16")

#: title text -> (kind, direction), for parsers
TITLE_TO_KIND: dict[str, tuple[HistogramKind, Direction]] = {t: k for k, t in _TITLES.items()}


@dataclass(frozen=True)
class Histogram:
    """Counts of one measure in buckets, for one direction of one disk.

    ``counts`` has one entry per limit plus the overflow. ``min``/``max`` are None when
    unknown (a difference of two cumulative snapshots has none). ``mean`` is exact when
    built from values, rounded to 3 decimals; vscsiStats itself prints whole numbers.
    """

    kind: HistogramKind
    direction: Direction
    bucket_limits: tuple[int, ...]
    counts: tuple[int, ...]
    min: int | None
    max: int | None
    mean: float
    count: int

    def __post_init__(self) -> None:
        name = f"histogram {self.kind.value}/{self.direction}"
        if len(self.counts) != len(self.bucket_limits) + 1:
            raise ParseError(f"{name}: {len(self.counts)} counts for {len(self.bucket_limits)} limits "
                             "(expected one more count, the overflow)")
        if any(b <= a for a, b in zip(self.bucket_limits, self.bucket_limits[1:], strict=False)):
            raise ParseError(f"{name}: bucket limits are not increasing: {self.bucket_limits}")
        if any(c < 0 for c in self.counts):
            raise ParseError(f"{name}: negative count in {self.counts}")
        if sum(self.counts) != self.count:
            raise ParseError(f"{name}: counts sum to {sum(self.counts)} but count is {self.count}")

    @classmethod
    def from_values(cls, kind: HistogramKind, direction: Direction, values: Iterable[int],
                    bucket_limits: Sequence[int] | None = None) -> Histogram:
        """Bucket ``values`` like vscsiStats would, with the kind's default limits unless given."""
        limits = tuple(bucket_limits) if bucket_limits is not None else kind.default_limits
        counts = [0] * (len(limits) + 1)
        vals = [int(v) for v in values]
        for v in vals:
            counts[_bucket_index(limits, v)] += 1
        mean = round(sum(vals) / len(vals), 3) if vals else 0.0
        return cls(kind, direction, limits, tuple(counts), min(vals, default=None), max(vals, default=None),
                   mean, len(vals))

    @classmethod
    def empty(cls, kind: HistogramKind, direction: Direction) -> Histogram:
        return cls.from_values(kind, direction, ())

    def percentile(self, p: float) -> int:
        """The upper limit of the bucket holding the p-th percentile value (0 < p <= 100).

        An approximation: it says "at most this much", to bucket resolution. A value in the
        overflow bucket is reported as ``max`` if known, else the last limit.
        Raises ParseError on an empty histogram.
        """
        if not 0 < p <= 100:
            raise ValueError(f"percentile must be in (0, 100], got {p}")
        if not self.count:
            raise ParseError(f"histogram {self.kind.value}/{self.direction} is empty: no percentile")
        rank = math.ceil(p / 100 * self.count)
        seen = 0
        for limit, n in zip(self.bucket_limits, self.counts, strict=False):
            seen += n
            if seen >= rank:
                return limit
        return self.max if self.max is not None else self.bucket_limits[-1]

    def fraction_at_most(self, limit: int) -> float:
        """Share of values in buckets whose upper limit is <= ``limit`` (0 for an empty histogram)."""
        if not self.count:
            return 0.0
        return sum(n for lim, n in zip(self.bucket_limits, self.counts, strict=False) if lim <= limit) / self.count

    def minus(self, earlier: Histogram) -> Histogram:
        """What was added between two cumulative snapshots (vscsiStats counts accumulate).

        min/max are unknown (None); the mean is recovered from mean x count and is approximate
        when vscsiStats rounded the means. ParseError if the histograms do not match or a
        count went down (collection was reset in between).
        """
        if (earlier.kind, earlier.direction, earlier.bucket_limits) != (self.kind, self.direction,
                                                                          self.bucket_limits):
            raise ParseError(f"cannot subtract histogram {earlier.kind.value}/{earlier.direction} from "
                             f"{self.kind.value}/{self.direction}: different kind, direction or limits")
        counts = tuple(a - b for a, b in zip(self.counts, earlier.counts, strict=False))
        if any(c < 0 for c in counts):
            raise ParseError(f"histogram {self.kind.value}/{self.direction}: a count went down between snapshots "
                             "(vscsiStats was reset or restarted); take both snapshots in one collection")
        count = self.count - earlier.count
        mean = round((self.mean * self.count - earlier.mean * earlier.count) / count, 3) if count else 0.0
        return Histogram(self.kind, self.direction, self.bucket_limits, counts, None, None, mean, count)


def _bucket_index(limits: tuple[int, ...], value: int) -> int:
    """The first bucket whose upper limit is at least ``value`` (the overflow's: ``len(limits)``);
    the limits increase (``Histogram`` checks), so a binary search finds it."""
    return bisect.bisect_left(limits, value)


def _csv_number(value: float | None) -> str:
    if value is None:
        return "0"
    return str(int(value)) if float(value).is_integer() else f"{value:.3f}".rstrip("0").rstrip(".")


@dataclass(frozen=True)
class HistogramSet:
    """Every histogram of one virtual disk: each kind in each of its directions.

    ``world_group_id``/``handle_id``/``disk_label`` identify the disk on ESXi (vscsiStats -l);
    they are None/"" for histograms computed from a QEMU trace.
    """

    histograms: tuple[Histogram, ...]
    world_group_id: int | None = None
    handle_id: int | None = None
    disk_label: str = ""
    _index: dict[tuple[HistogramKind, str], Histogram] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        index: dict[tuple[HistogramKind, str], Histogram] = {}
        for h in self.histograms:
            if (h.kind, h.direction) in index:
                raise ParseError(f"histogram set {self.disk_label or ''}: {h.kind.value}/{h.direction} appears twice")
            index[(h.kind, h.direction)] = h
        object.__setattr__(self, "_index", index)

    def get(self, kind: HistogramKind, direction: Direction = "all") -> Histogram:
        """The histogram of ``kind`` and ``direction``; ParseError saying which exist if it is absent."""
        try:
            return self._index[(kind, direction)]
        except KeyError:
            have = [f"{k.value}/{d}" for k, d in self._index]
            raise ParseError(f"histogram set {self.disk_label!r}: no {kind.value}/{direction}; have {have}") from None

    def minus(self, earlier: HistogramSet) -> HistogramSet:
        """Histogram-by-histogram difference of two cumulative snapshots of the same disk."""
        return HistogramSet(tuple(h.minus(earlier.get(h.kind, h.direction)) for h in self.histograms),
                            self.world_group_id, self.handle_id, self.disk_label)

    def to_vscsistats_csv(self, world_group_id: int | None = None, handle_id: int | None = None,
                          disk_label: str | None = None) -> str:
        """The set in vscsiStats's ``-p all -c`` CSV form, in vscsiStats's order.

        Example title line: ``Histogram: IO lengths of commands,virtual machine worldGroupID,
        2099979,virtual disk handleID,8194 (scsi0:0)``. Unknown min/max print as 0.
        """
        wgid = world_group_id if world_group_id is not None else self.world_group_id
        hid = handle_id if handle_id is not None else self.handle_id
        label = disk_label if disk_label is not None else self.disk_label
        if wgid is None or hid is None:
            raise ValueError("to_vscsistats_csv needs a world_group_id and handle_id")
        suffix = f",virtual machine worldGroupID,{wgid},virtual disk handleID,{hid}" + (f" ({label})" if label else "")
        lines: list[str] = []
        order = {k: i for i, k in enumerate(HistogramKind)}
        for h in sorted(self.histograms, key=lambda h: (order[h.kind], DIRECTIONS.index(h.direction))):
            lines.append(f"Histogram: {h.kind.title(h.direction)}{suffix}")
            lines += [f"min,{_csv_number(h.min)}", f"max,{_csv_number(h.max)}",
                      f"mean,{_csv_number(h.mean)}", f"count,{h.count}", "Frequency,Histogram Bucket Limit"]
            lines += [f"{n},{limit}" for n, limit in zip(h.counts, h.bucket_limits, strict=False)]
            lines.append(f"{h.counts[-1]},{h.bucket_limits[-1]}")
        return "\n".join(lines) + "\n"
