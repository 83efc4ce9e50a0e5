"""Rule 4, buffered/direct regime against a baseline (the VxFS ``discovered_direct_iosz`` case).

A sequential buffered copy and a direct one are each measured a few times by the host's mean
request size and depth. The medians are compared with a baseline saved by an earlier run
(``--save-baseline``) of the previous image or hypervisor version. A change within the noise
(the spread of both runs) or within a floor does not fail.

Example::

    base = RegimeSeries("buffered", (RegimeSample(131072, 1.6), RegimeSample(131072, 1.7)))
    now = RegimeSeries("buffered", (RegimeSample(4096, 1.0), RegimeSample(4096, 1.0)))
    judge_regime({"buffered": now}, {"buffered": base}).passed  # False: 128 KiB -> 4 KiB
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from model.blame import BlameSettings
from model.errors import ParseError
from model.judging.figures import Pair, pair_figure
from model.judging.spec import HIGHER, PARAM, Metrics, MetricSpec
from model.judging.verdict import Number, RuleVerdict, kib, spread

RULE = "buffered-direct"
#: The settings (model/blame.py's trail keys) the rule's verdict depends on.
BLAME = BlameSettings(frozenset({"read_ahead_kb", "max_sectors_kb", "max_hw_sectors_kb", "nr_requests",
                                "queue_depth"}))
#: Repeats without --repeats: its verdict compares the spread of its copies with its baseline's. 2 copies of
#: each kind, derived from the run-to-run spread of 10 runs (bench.noise, 3 copies then): a single copy
#: moved by at most 23 % of the buffered depth (0.33 of its 1.4-1.5 requests) and 13 % of the request
#: size, inside the rule's floors (0.5 of the depth, at least 0.5 request; 25 % of the size) with room;
#: the fault moves the size 256x. A second copy gives the record a spread (compare's noise band); a
#: third added 8 s per controller.
DEFAULT_REPEATS = 2
REPEATABLE = True
#: Which of its metrics follow the host CPU the guest gets (model/across/contention.py).
HOST_CPU_BOUND: tuple[str, ...] = ()
#: The skip of a run with nothing to compare with: every baseline ``--baseline`` takes (the series'
#: previous run, a stored run, its results directory, or a file ``--save-baseline`` made).
NO_BASELINE = ("buffered-direct measured only: no --baseline to compare with (give --baseline last for the "
               "previous run of this series, --baseline RUN for a stored run's id or results directory, or "
               "--baseline FILE for a file made with --save-baseline FILE on the previous image or hypervisor version)")
MODES = ("buffered", "direct")
#: The copy's read requests: 1 MiB, a typical cp/dd buffer; the page cache turns them into
#: readahead-sized requests, O_DIRECT sends them as they are.
COPY_BLOCK_BYTES = 1 << 20
#: What each copy is measured by on the host: its mean request size and its mean depth.
QUANTITIES = ("request_bytes", "depth")

#: A change smaller than this fraction of the baseline's median never fails, whatever the
#: spread. Request size: measured here (Debian 6.1 guest, TCG, 5 ms disk, 3 runs of 2 s) the
#: buffered copy's host requests were the readahead size in every run, the direct copy's 1 MiB,
#: with a spread under 2 %; readahead-off moves the buffered size 32x. 25 % is far above the noise
#: and far below a regime change (a factor of 2 or more). Depth: the buffered copy runs at 1-2
#: in flight and jitters more under TCG; a regime change moves it by whole requests.
REL_FLOOR = {"request_bytes": 0.25, "depth": 0.5}
#: Absolute floor: depths differ by less than half a request only in noise.
ABS_FLOOR = {"request_bytes": 4096.0, "depth": 0.5}

_MODE = r"(buffered|direct)_"  # each copy's prefix

#: What the rule records (model/judging/spec.py): the medians and spreads of the host's request size and
#: depth per copy mode (larger requests and depths: the regime the baseline had); the baseline's
#: medians and the change allowed are the verdict's parameters. The suite adds where it saved a
#: baseline (``--save-baseline``).
METRICS: Metrics = (
    (_MODE + r"request_bytes_(baseline_median|allowed_change)", MetricSpec("bytes", PARAM)),
    (_MODE + r"depth_(baseline_median|allowed_change)", MetricSpec("requests", PARAM)),
    (_MODE + r"request_bytes_(median|min|max)", MetricSpec("bytes", HIGHER)),
    (_MODE + r"depth_(median|min|max)", MetricSpec("requests", HIGHER)),
    (_MODE + r"runs", MetricSpec("runs", PARAM)),
    (r"baseline|baseline_saved_to", MetricSpec("", PARAM)),
)

#: compare's minimum effect per metric (model/across/moves.py's MIN_EFFECTS says how each is derived from
#: run-to-run noise). Each comment: the CV and the widest change between two healthy runs with 3 s / 2 s
#: windows, and the configuration each came from.
MIN_EFFECTS: Mapping[str, float] = {
    # CV 2.17 % / 1.65 %, widest 8.0 % / 6.6 % (virtio-scsi / virtio-blk); a third measurement, 3 healthy runs
    # on a quiet host, had virtio-scsi's buffered copy at 0.87-1.28 requests at most and 0.75-1.00 in the
    # median: widest 47.1 % and 33.3 % (a depth of about one request, which one copy of two moves)
    "buffered_depth_max": 0.472,
    "buffered_depth_median": 0.334,
    "buffered_depth_min": 0.249,  # CV 5.87 % / 2.45 %, widest 22.9 % / 7.4 % (virtio-scsi / virtio-scsi)
    "buffered_request_bytes_max": 0.063,  # CV 1.49 % / 0.18 %, widest 4.0 % / 0.5 % (virtio-blk / virtio-blk)
    "buffered_request_bytes_median": 0.062,  # CV 1.45 % / 0.57 %, widest 4.3 % / 1.6 % (virtio-scsi / virtio-scsi)
    "buffered_request_bytes_min": 0.146,  # CV 3.44 % / 0.85 %, widest 12.7 % / 3.0 % (virtio-blk / virtio-blk)
    "direct_depth_max": 0.147,  # CV 3.48 % / 1.30 %, widest 10.5 % / 3.4 % (virtio-blk / virtio-scsi)
    "direct_depth_median": 0.129,  # CV 3.04 % / 1.36 %, widest 9.3 % / 4.6 % (virtio-blk / virtio-scsi)
    "direct_depth_min": 0.133,  # CV 3.13 % / 1.58 %, widest 8.1 % / 5.8 % (virtio-blk / virtio-scsi)
    "direct_request_bytes_max": 0.020,  # CV 0.00 % / 0.00 %, widest 0.0 % / 0.0 % (virtio-blk / virtio-blk)
    "direct_request_bytes_median": 0.020,  # CV 0.00 % / 0.00 %, widest 0.0 % / 0.0 % (virtio-blk / virtio-blk)
    "direct_request_bytes_min": 0.020,  # CV 0.00 % / 0.00 %, widest 0.0 % / 0.0 % (virtio-blk / virtio-blk)
}


@dataclass(frozen=True)
class RegimeSample:
    """One copy's host-side figures: mean request size (bytes) and mean requests in flight."""

    request_bytes: float
    depth: float


@dataclass(frozen=True)
class RegimeSeries:
    """Repeated measurements of one mode ("buffered" or "direct")."""

    mode: str
    samples: tuple[RegimeSample, ...]

    def values(self, metric: str) -> list[float]:
        return [getattr(s, metric) for s in self.samples]

    def stats(self, metric: str) -> tuple[float, float, float]:
        """(median, min, max)"""
        return spread(self.values(metric))


def allowed_change(metric: str, base: RegimeSeries, now: RegimeSeries) -> float:
    """The largest change of the median that is still noise: the two spreads together, or the floors."""
    _, blo, bhi = base.stats(metric)
    _, nlo, nhi = now.stats(metric)
    bmed = base.stats(metric)[0]
    return max(REL_FLOOR[metric] * abs(bmed), ABS_FLOOR[metric], (bhi - blo) + (nhi - nlo))


def _fmt(metric: str, v: float) -> str:
    return kib(round(v)) if metric == "request_bytes" else f"{v:.2f}"


def describe(series: RegimeSeries) -> str:
    parts = []
    for metric in QUANTITIES:
        med, lo, hi = series.stats(metric)
        parts.append(f"{metric.replace('_bytes', '')} {_fmt(metric, med)} ({_fmt(metric, lo)}-{_fmt(metric, hi)})")
    return f"{series.mode} copy, {len(series.samples)} runs: host " + ", ".join(parts)


def judge_regime(now: dict[str, RegimeSeries], baseline: dict[str, RegimeSeries] | None,
                 baseline_source: str = "") -> RuleVerdict:
    """Compare each mode's medians with the baseline's; ``baseline`` None only records."""
    lines = [describe(now[m]) for m in MODES if m in now]
    problems: list[str] = []
    notes: list[str] = []
    props: dict[str, Number] = {}
    for m, series in now.items():
        for metric in QUANTITIES:
            med, lo, hi = series.stats(metric)
            props.update({f"{m}_{metric}_median": round(med, 2), f"{m}_{metric}_min": round(lo, 2),
                          f"{m}_{metric}_max": round(hi, 2)})
        props[f"{m}_runs"] = len(series.samples)
    if baseline is None:
        return RuleVerdict(RULE, tuple(lines), (), ("no baseline given: measured only",), props)
    props["baseline"] = baseline_source
    pairs: list[Pair] = []
    for m, series in now.items():
        base = baseline.get(m)
        if base is None or not base.samples:
            problems.append(f"the baseline ({baseline_source}) has no {m} copy for this configuration")
            continue
        lines.append("baseline " + describe(base))
        pairs.append(Pair(f"{m} size: baseline / now", base.stats("request_bytes")[0] / 1024,
                          series.stats("request_bytes")[0] / 1024, "KiB"))
        for metric in QUANTITIES:
            bmed, nmed = base.stats(metric)[0], series.stats(metric)[0]
            allowed = allowed_change(metric, base, series)
            props[f"{m}_{metric}_baseline_median"] = round(bmed, 2)
            props[f"{m}_{metric}_allowed_change"] = round(allowed, 2)
            if abs(nmed - bmed) > allowed:
                problems.append(
                    f"{m} copy: host {metric.replace('_bytes', ' size')} {_fmt(metric, nmed)} against "
                    f"{_fmt(metric, bmed)} in the baseline ({baseline_source}); the noise allows "
                    f"{_fmt(metric, allowed)} (spreads of both runs, at least {REL_FLOOR[metric]:.0%})")
    return RuleVerdict(RULE, tuple(lines), tuple(problems), tuple(notes), props, pair_figure(*pairs))


# --- baseline files -------------------------------------------------------------------------------
# {"vioconform_baseline": 1, "configs": {"libvirt:virtio-scsi:latency5ms":
#     {"buffered": [{"request_bytes": 131072, "depth": 1.6}, ...], "direct": [...]}}, "meta": {...}}

BASELINE_FORMAT = 1


def series_to_json(series: dict[str, RegimeSeries]) -> dict[str, Any]:
    return {m: [{"request_bytes": s.request_bytes, "depth": s.depth} for s in ser.samples]
            for m, ser in series.items()}


def parse_baseline(text: str, source: str) -> dict[str, dict[str, RegimeSeries]]:
    """config id -> mode -> series; ParseError naming the file and what is wrong."""
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise ParseError(f"baseline {source}: not JSON ({e})") from None
    if not isinstance(doc, dict) or doc.get("vioconform_baseline") != BASELINE_FORMAT:
        raise ParseError(f"baseline {source}: not a vioconform baseline (made by --save-baseline), "
                         f"format {BASELINE_FORMAT}")
    out: dict[str, dict[str, RegimeSeries]] = {}
    configs = doc.get("configs")
    if not isinstance(configs, dict):
        raise ParseError(f"baseline {source}: no 'configs'")
    for cfg, modes in configs.items():
        if not isinstance(modes, dict):
            raise ParseError(f"baseline {source}: {cfg} is not an object")
        out[cfg] = {}
        for m, samples in modes.items():
            try:
                out[cfg][m] = RegimeSeries(m, tuple(RegimeSample(float(s["request_bytes"]), float(s["depth"]))
                                          for s in samples))
            except (KeyError, TypeError, ValueError) as e:
                raise ParseError(f"baseline {source}: {cfg} {m}: bad sample ({e!r})") from None
            if not out[cfg][m].samples:
                raise ParseError(f"baseline {source}: {cfg} {m} has no samples")
    return out


def merge_baseline(existing: str | None, config: str, series: dict[str, RegimeSeries],
                   meta: dict[str, str]) -> str:
    """The baseline file's new text with ``config``'s series replaced (other configurations kept)."""
    doc: dict[str, Any] = {"vioconform_baseline": BASELINE_FORMAT, "configs": {}, "meta": {}}
    if existing and existing.strip():
        parse_baseline(existing, "the file --save-baseline names")  # never overwrite a file that is not one
        doc = json.loads(existing)
    doc.setdefault("configs", {})[config] = series_to_json(series)
    doc.setdefault("meta", {})[config] = meta
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"
