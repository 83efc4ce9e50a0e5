"""What the report draws for a verdict: typed figures each rule's judge builds from its own inputs.

The report reads these fields, never the JUnit property names, so renaming a property cannot
break a picture. Three kinds:

- :class:`DepthFigure`, the queue-depth picture: for each offered depth, what the workload
  offered, what the guest's block layer held (aqu-sz) and what the host saw in flight;
- :class:`PairFigure`, the other rules' picture: labelled pairs a reader compares, the
  expected or guest side against the host side (or two like figures, such as two queues);
- :class:`HistogramFigure`, one measured window as vscsiStats shows it (:func:`histogram_figure`),
  which the queue-depth and io-size suites add to their verdicts.

Example::

    PairFigure((Pair("request size: expected / host", 1024.0, 64.0, "KiB"),))
"""

from __future__ import annotations

from dataclasses import dataclass

from model.parse.fio_json import FioJob
from model.parse.histogram import HistogramKind
from model.types import HostTrace


@dataclass(frozen=True)
class DepthGroup:
    """One offered depth's three figures."""

    offered: int
    guest_aqu_sz: float
    host_depth: float


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


Figure = DepthFigure | PairFigure | HistogramFigure


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
