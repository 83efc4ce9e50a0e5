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

**A busy host is not a slower guest.** The numbers that follow the host CPU the guest gets
(model/across/contention.py's ``HOST_CPU_BOUND``: IOPS, latencies, the depths the guest keeps up, IOPS
scaling) move with the host's other work, most under QEMU's TCG where every guest instruction is emulated
on a host thread. So each run records how long its guest's vCPUs waited for a host CPU in its most
contended window (``host_vcpu_wait_pct``, model/parse/hostcpu.py), and such a number is judged against a
baseline only when neither run's vCPUs waited more than its ``WAIT_MAX_PCT``; otherwise its move is a note that
names both runs' waits, never a failure. A figure a run did not record (an older run, vSphere) is
no evidence: what the other run recorded decides. A rule left with no metric with a direction that
could be judged made no comparison: an ERROR, as above.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from model.across.contention import HOST_CPU_BOUND, WAIT_MAX_PCT, WAIT_PROPERTY, busy_host
from model.across.metrics import HOST_EVIDENCE, describe
from model.across.moves import MIN_EFFECT, MIN_EFFECTS, Moved, Series, metric_moved
from model.judging.verdict import Number, RuleVerdict


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


def host_contention(now: Mapping[str, Series], baseline: Mapping[str, Series],
                    wait_max_pct: float = WAIT_MAX_PCT) -> str:
    """Why this run's host-CPU-bound numbers cannot be judged against the baseline's ("": they
    can): either run's vCPUs waited for a host CPU more than ``wait_max_pct`` of a window
    (model/across/contention.py)."""
    waits = {who: runs[WAIT_PROPERTY].values if WAIT_PROPERTY in runs else ()
             for who, runs in (("this run", now), ("the baseline", baseline))}
    return busy_host(waits, wait_max_pct)


def against_baseline(verdict: RuleVerdict, now: Mapping[str, Number], baseline: Mapping[str, Series] | None,
                     source: str, missing: str = "") -> RuleVerdict:
    """``verdict`` with the comparison against ``baseline`` (the baseline run's series of this rule
    and configuration, by metric name) added; None: the baseline has no data for it, said in a note
    (``missing``: the sentence that says why; the caller makes a pass of it an ERROR)."""
    if baseline is None:
        return replace(verdict, notes=(*verdict.notes, missing or f"no baseline for this configuration in {source}"),
                       properties={**verdict.properties, "baseline_source": source, "baseline_metrics_compared": 0})
    mine = series_of(now)
    shared = sorted((set(mine) & set(baseline)) - HOST_EVIDENCE)  # the host's load is evidence, not a metric
    contention = host_contention(mine, baseline)
    set_aside = {n for n in shared if contention and mine[n].direction != "parameter" and HOST_CPU_BOUND.fullmatch(n)}
    judged = [n for n in shared if mine[n].direction != "parameter" and n not in set_aside]
    moved = [m for name in shared
             if (m := metric_moved(("", "", name), baseline[name], mine[name],
                                   MIN_EFFECTS.get(name, MIN_EFFECT))) is not None]
    worse = [m for m in moved if m.judgement == "worse" and m.name not in set_aside]
    other = [m for m in moved if m.judgement != "worse" and m.name not in set_aside]
    unjudged = [m for m in moved if m.name in set_aside]
    line = (f"against the baseline {source}: {len(shared)} metrics compared, {len(moved)} moved beyond the "
            f"noise (each metric's measured minimum effect), {len(worse)} for the worse")
    if set_aside:
        line += f"; {len(set_aside)} not judged: {contention}"
    return replace(verdict, lines=(*verdict.lines, line),
                   problems=(*verdict.problems, *(f"worse than the baseline {source}: {_describe(m)}" for m in worse)),
                   notes=(*verdict.notes, *(f"moved since the baseline: {_describe(m)}" for m in other),
                          *(f"moved since the baseline, not judged (a busy host): {_describe(m)}" for m in unjudged)),
                   properties={**verdict.properties, "baseline_source": source,
                               "baseline_metrics_compared": len(shared),
                               "baseline_metrics_judged": len(judged),
                               "baseline_metrics_not_judged": len(set_aside),
                               "baseline_metrics_worse": len(worse),
                               # which ones, for a report or a script: comma-separated names ("" none)
                               "baseline_worse": ",".join(m.name for m in worse),
                               "baseline_moved": ",".join(m.name for m in other),
                               "baseline_not_judged": contention})
