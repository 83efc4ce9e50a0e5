"""What the report draws for a verdict: typed figures each rule's judge builds from its own inputs.

The report reads these fields, never the JUnit property names, so renaming a property cannot
break a picture. Three kinds:

- :class:`DepthFigure`, the queue-depth picture: for each offered depth, what the workload
  offered, what the guest's block layer held (aqu-sz) and what the host saw in flight;
- :class:`PairFigure`, the other rules' picture: labelled pairs a reader compares, the
  expected or guest side against the host side (or two like figures, such as two queues);
- :class:`HistogramFigure`, one measured window as vscsiStats shows it (:func:`histogram_figure`),
  which the queue-depth and io-size suites add to their verdicts;
- :class:`RangeFigure`, byte ranges of a disk in lanes, one lane per side: what the guest discarded,
  beside what the host counted and freed (the discard rule's ``range_figure``);
- :class:`TimelineFigure`, step series over seconds on one clock, one per side, with marked events: a
  disk's size as the host and the guest reported it (resize), a device present or gone on each side
  (hotplug). Each rule builds its own from its run data (``resize_figures``, ``hotplug_figures``).

Example::

    PairFigure((Pair("request size: expected / host", 1024.0, 64.0, "KiB"),))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from model.parse.fio_json import FioJob
from model.parse.histogram import HistogramKind
from model.types import HostTrace


@dataclass(frozen=True)
class DepthGroup:
    """One offered depth's three figures, and the least host depth that passes (None: no bar)."""

    offered: int
    guest_aqu_sz: float
    host_depth: float
    host_min: float | None = None


#: How the host side of a pair passes against its threshold.
Passes = Literal["at least", "at most"]


@dataclass(frozen=True)
class Threshold:
    """The pass threshold of a pair's host (second) side: it passes at ``passes`` ``value`` (in the
    pair's unit). The report draws it as a line across the pair and says it in words."""

    value: float
    passes: Passes = "at least"


@dataclass(frozen=True)
class DepthFigure:
    """Grouped bars, one group per offered depth, in increasing order of depth."""

    groups: tuple[DepthGroup, ...]


@dataclass(frozen=True)
class Pair:
    """Two figures side by side: ``first`` is the expected or guest side (or the first of two
    like figures), ``second`` the host side (or the second); both in ``unit``."""

    label: str
    first: float
    second: float
    unit: str = ""
    threshold: Threshold | None = None


@dataclass(frozen=True)
class PairFigure:
    pairs: tuple[Pair, ...]


Buckets = tuple[tuple[str, float], ...]  # (bucket label, count or share), in bucket order


@dataclass(frozen=True)
class HistogramFigure:
    """One measured window as vscsiStats shows it, host and guest side by side: the host's
    histograms of outstanding I/Os when each request arrived, of request lengths and of latency
    (exact, from the host's per-request trace: ``source``), beside the guest's view of the same
    window: how many I/Os fio had submitted (``iodepth_level``, % of time) and its completion
    latency percentiles. ``host_missing`` says why there are no host histograms, if there are none."""

    label: str
    source: str
    outstanding: Buckets
    io_length: Buckets
    latency_us: Buckets
    guest_depth_pct: Buckets
    guest_clat_us: Buckets
    host_missing: str = ""


#: Which side a lane or a series shows: the report draws the guest in blue, the host in vermillion.
Side = Literal["guest", "host"]


@dataclass(frozen=True)
class ByteRange:
    """A range of a disk's bytes, ``[offset_bytes, offset_bytes + length_bytes)``. ``note`` says more
    in a few words ("2 requests"); ``failed``: asked for and not done (the report draws its outline only)."""

    label: str
    offset_bytes: int
    length_bytes: int
    note: str = ""
    failed: bool = False

    @property
    def end_bytes(self) -> int:
        return self.offset_bytes + self.length_bytes


@dataclass(frozen=True)
class RangeLane:
    """One side's ranges. ``placed`` False: the side knows how much, not where (a counter, an allocation
    total); each amount is drawn from the start of the range it belongs to, and said so."""

    label: str
    side: Side
    ranges: tuple[ByteRange, ...]
    placed: bool = True


@dataclass(frozen=True)
class RangeFigure:
    """Byte ranges on one axis, one lane per side, top to bottom; ``note``: what a reader should know
    of where the figures come from (or why there is nothing to draw)."""

    title: str
    lanes: tuple[RangeLane, ...]
    note: str = ""

    @property
    def empty(self) -> bool:
        return not any(lane.ranges for lane in self.lanes)


@dataclass(frozen=True)
class Change:
    """From ``t_s`` on (seconds on the figure's clock), a series has ``value``, until its next change."""

    t_s: float
    value: float


@dataclass(frozen=True)
class StepSeries:
    """One side's value over time: its changes in time order, the first its value at the start."""

    label: str
    side: Side
    changes: tuple[Change, ...]


@dataclass(frozen=True)
class Marker:
    """An event on the figure's clock: a request, the end of a wait."""

    label: str
    t_s: float


#: The levels of a presence series (a device shown or not): 0 and 1, in words.
PRESENCE_LEVELS: tuple[tuple[float, str], ...] = ((0.0, "absent"), (1.0, "present"))


@dataclass(frozen=True)
class TimelineFigure:
    """Step series on one clock, ``clock`` saying where its zero is ("s from the host's grow request").
    The values are in ``unit`` ("bytes"), or named by ``levels`` (value, word) where they are states.
    The axis runs from 0 to ``end_s``; ``note``: how the times were taken, and what was not measured."""

    title: str
    clock: str
    series: tuple[StepSeries, ...]
    end_s: float
    markers: tuple[Marker, ...] = ()
    unit: str = ""
    levels: tuple[tuple[float, str], ...] = ()
    note: str = ""

    @property
    def empty(self) -> bool:
        return not any(s.changes for s in self.series)

    def value_text(self, value: float) -> str:
        """A value in words: its level's name, or the number in the figure's unit (bytes as MiB)."""
        for level, word in self.levels:
            if level == value:
                return word
        return size_text(int(value)) if self.unit == "bytes" else f"{value:g}{' ' + self.unit if self.unit else ''}"


def size_text(n_bytes: int) -> str:
    """A size in bytes, exactly, as a reader takes it in: ``1140850688`` -> "1088 MiB",
    ``1051136`` -> "1 MiB + 2560 bytes", ``4096`` -> "4 KiB", ``1536`` -> "1536 bytes"."""
    if n_bytes < 0:
        return "-" + size_text(-n_bytes)
    mib, rest = divmod(n_bytes, 1 << 20)
    if mib and not rest:
        return f"{mib} MiB"
    if mib:
        return f"{mib} MiB + {rest} bytes"
    return f"{n_bytes >> 10} KiB" if n_bytes and not n_bytes % 1024 else f"{n_bytes} bytes"


Figure = DepthFigure | PairFigure | HistogramFigure | RangeFigure | TimelineFigure


def histogram_figure(label: str, job: FioJob, host_trace: HostTrace | None,
                     host_trace_gap: str = "") -> HistogramFigure:
    """One window as vscsiStats shows it: the host's histograms from its per-request trace
    (``host_trace``; None: ``host_trace_gap`` says why there is none) beside fio's own view of the
    same window (``job``: its submitted depths and completion latency percentiles)."""
    guest_depth = tuple((k, round(v, 1)) for k, v in job.iodepth_level_pct.items() if v > 0)
    clat = job.read.clat_percentiles_us if job.read.io_count else job.write.clat_percentiles_us
    guest_clat = tuple((f"p{p:g}", round(v, 1)) for p, v in sorted(clat.items()) if p in (1.0, 10.0, 50.0, 90.0, 99.0))
    if host_trace is None:
        return HistogramFigure(label, "", (), (), (), guest_depth, guest_clat,
                               host_missing=host_trace_gap or "this backend has no per-request host trace")
    h = host_trace.histograms

    def of(kind: HistogramKind, unit: str = "") -> Buckets:
        x = h.get(kind)
        return buckets(x.bucket_limits, x.counts, unit)
    return HistogramFigure(label, host_trace.source, of(HistogramKind.OUTSTANDING_IOS),
                           of(HistogramKind.IO_LENGTH), of(HistogramKind.LATENCY_US, "us"), guest_depth, guest_clat)


def buckets(limits: tuple[int, ...], counts: tuple[int, ...], unit: str = "") -> Buckets:
    """A vscsiStats histogram's buckets as labelled counts: "<=L" per limit, ">L" for the overflow;
    the empty buckets at both ends are left out (a depth of 1-32 needs no 64-4096 buckets)."""
    labels = [f"<={_short(limit)}{unit}" for limit in limits] + [f">{_short(limits[-1])}{unit}"]
    nonzero = [i for i, c in enumerate(counts) if c]
    if not nonzero:
        return ()
    lo, hi = nonzero[0], nonzero[-1]
    return tuple((labels[i], float(counts[i])) for i in range(lo, hi + 1))


def _short(n: int) -> str:
    """4096 -> "4K", 1048576 -> "1M" (binary), 100 -> "100"."""
    for div, suffix in ((1 << 20, "M"), (1 << 10, "K")):
        if n >= div and n % div == 0:
            return f"{n // div}{suffix}"
    return str(n)


def pair_figure(*pairs: Pair) -> tuple[Figure, ...]:
    """A verdict's figures for these pairs: one figure, or none when there is no pair to draw."""
    return (PairFigure(pairs),) if pairs else ()
