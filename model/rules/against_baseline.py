"""A rule's numbers against a stored baseline run (``--baseline RUN``), for every rule.

The baseline is a run in the results store (an earlier night, the previous image or hypervisor
build). Each metric with a direction that this run and the baseline both measured for the same
rule and configuration is compared as ``compare`` compares runs (model/across/moves.py: each median
outside the other's spread, at least the metric's measured minimum effect, and the rank test when
there are enough repeats). A move in the worse direction fails the rule, with both numbers; a
better move, and any parameter (a setting, a count) that changed, is a note. The rule's own
verdict stays as it was: a baseline only adds.

A rule asked to compare that finds no baseline (the baseline run has no verdict for its
configuration) is never a plain pass: its own verdict stands, a failure stays a failure with the
reason in a note, and a pass becomes an ERROR (:class:`BaselineMissing`): the comparison that
was asked for was not made, and CI must not read that as green.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from model.across.metrics import describe
from model.across.moves import MIN_EFFECT, MIN_EFFECTS, Moved, Series, metric_moved
from model.rules.verdict import Number, RuleVerdict


class BaselineMissing(Exception):
    """``--baseline`` was given, and the baseline run has no verdict for this rule and
    configuration: the comparison asked for was not made. The message says which run and why."""


def series_of(properties: Mapping[str, Number]) -> dict[str, Series]:
    """A rule's properties as metric series: ``NAME.rK`` are the repeats of NAME (and NAME, their
    median, is then not a sample of its own); a plain NAME is the one sample. Text is left out."""
    samples: dict[str, dict[int, float]] = {}
    info = {}
    for prop, value in properties.items():
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            continue
        d = describe(prop)
        info[d.name] = d
        samples.setdefault(d.name, {})[d.repeat] = float(value)
    out = {}
    for name, by_repeat in samples.items():
        repeats = {k: v for k, v in by_repeat.items() if k > 0} or by_repeat
        out[name] = Series(info[name].unit, info[name].direction, tuple(repeats[k] for k in sorted(repeats)))
    return out


def _describe(m: Moved) -> str:
    a = f"{m.a.median:g}" + (f" [{m.a.lo:g}..{m.a.hi:g}]" if m.a.n > 1 else "")
    b = f"{m.b.median:g}" + (f" [{m.b.lo:g}..{m.b.hi:g}]" if m.b.n > 1 else "")
    effect = "new" if abs(m.effect) == float("inf") else f"{m.effect:+.0%}"
    return f"{m.name}: {a} -> {b} {m.unit} ({effect}, {m.judgement})".replace("  ", " ")


def against_baseline(verdict: RuleVerdict, now: Mapping[str, Number], baseline: Mapping[str, Series] | None,
                     source: str, missing: str = "") -> RuleVerdict:
    """``verdict`` with the comparison against ``baseline`` (the baseline run's series of this rule
    and configuration, by metric name) added; None: the baseline has no data for it, said in a note
    (``missing``: the sentence that says why; the caller makes a pass of it an ERROR)."""
    if baseline is None:
        return replace(verdict, notes=(*verdict.notes, missing or f"no baseline for this configuration in {source}"),
                       properties={**verdict.properties, "baseline_source": source, "baseline_metrics_compared": 0})
    mine = series_of(now)
    shared = sorted(set(mine) & set(baseline))
    moved = [m for name in shared
             if (m := metric_moved(("", "", name), baseline[name], mine[name],
                                   MIN_EFFECTS.get(name, MIN_EFFECT))) is not None]
    worse = [m for m in moved if m.judgement == "worse"]
    other = [m for m in moved if m.judgement != "worse"]
    line = (f"against the baseline {source}: {len(shared)} metrics compared, {len(moved)} moved beyond the "
            f"noise (each metric's measured minimum effect), {len(worse)} for the worse")
    return replace(verdict, lines=(*verdict.lines, line),
                   problems=(*verdict.problems, *(f"worse than the baseline {source}: {_describe(m)}" for m in worse)),
                   notes=(*verdict.notes, *(f"moved since the baseline: {_describe(m)}" for m in other)),
                   properties={**verdict.properties, "baseline_source": source,
                               "baseline_metrics_compared": len(shared),
                               "baseline_metrics_worse": len(worse),
                               # which ones, for a report or a script: comma-separated names ("" none)
                               "baseline_worse": ",".join(m.name for m in worse),
                               "baseline_moved": ",".join(m.name for m in other)})
