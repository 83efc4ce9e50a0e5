"""Two stored runs compared (:func:`compare_runs`), and the comparison as text and as JUnit XML.

``python -m reports.compare`` (reports/store/compare.py) reads its arguments and the store and calls these;
the arithmetic is model/across/moves.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sqlalchemy as sa
from junit_xml import TestCase, TestSuite, to_xml_report_string

from model.across.fingerprint import change_line, differences
from model.across.moves import (
    ALPHA,
    FLAKY_MIN_FLIPS,
    FLAKY_WINDOW,
    MIN_EFFECT,
    Flip,
    Key,
    Moved,
    Spread,
    flaky,
    moved_metrics,
    repeats_needed,
    verdict_flips,
)
from reports.store.engine import Store, StoredRun
from reports.store.schema import metrics, samples
from reports.store.store_error import StoreError
from reports.store.tested import print_table


@dataclass(frozen=True)
class Comparison:
    """What ``compare`` found between run ``a`` (the baseline) and run ``b``."""

    a: StoredRun
    b: StoredRun
    flips: list[Flip]
    flaky: dict[Key, int]
    history: int  # runs the flakiness was judged over
    moved: list[Moved]
    fingerprint_diff: list[tuple[str, str, str]]  # the environment (model.across.fingerprint): QEMU, libvirt, image...
    tested_diff: list[tuple[str, str, str]]  # the rest of what was tested (drivers, disk names, boot settings)
    min_effect: float | None  # None: each metric's measured minimum effect (MIN_EFFECTS)
    alpha: float
    #: B's failed verdicts' layer at fault (the ``blame`` case property, model/blame.py)
    blame: dict[Key, str] = field(default_factory=dict)

    @property
    def changed(self) -> str:
        """What changed between the runs, one line (model.across.fingerprint.change_line)."""
        return change_line(self.a.id, self.b.id, self.a.fingerprint, self.b.fingerprint, self.a.revision,
                           self.b.revision)

    @property
    def mixed(self) -> str:
        """The line that says the runs are of two series ("" when they are of one)."""
        if self.a.series == self.b.series:
            return ""
        return (f"DIFFERENT SERIES: run {self.a.id} is of series {self.a.series}, run {self.b.id} of series "
                f"{self.b.series}; compared as asked, but they are two jobs, not one job on two builds")

    def of_kind(self, kind: str) -> list[Flip]:
        return [f for f in self.flips if f.kind == kind]

    @property
    def regressions(self) -> list[Flip]:
        return self.of_kind("regression")

    @property
    def worse(self) -> list[Moved]:
        """The metrics that got worse beyond the noise, decided and judged (model.across.moves.Moved.regression)."""
        return [m for m in self.moved if m.regression]

    @property
    def failing(self) -> list[Key]:
        """The rule and configuration of each regression: a verdict passed -> failed, or a metric worse."""
        return sorted({(f.rule, f.config) for f in self.regressions} | {(m.rule, m.config) for m in self.worse})


def compare_runs(store: Store, a: StoredRun, b: StoredRun, flaky_window: int = FLAKY_WINDOW,
                 min_effect: float | None = None, alpha: float = ALPHA) -> Comparison:
    """Run ``b`` against the baseline ``a``; StoreError if ``a`` is incomplete (an interrupted run
    is never a baseline) or ``b`` reached no verdict (nothing to compare). ``min_effect`` None: each metric's measured minimum effect
    (model.across.moves.MIN_EFFECTS); a number: that one for every metric."""
    if a.id == b.id:  # a copy of a stored results directory is that run (its run id is its identity)
        raise StoreError(f"both arguments name run {a.id} ({a.source or 'no directory'}): there is nothing to "
                         "compare; give two different runs (python -m reports.store list shows them)")
    if not a.complete:
        raise StoreError(f"run {a.id} is incomplete (interrupted): it is never used as a baseline; "
                         f"compare against a complete run")
    b_verdicts = store.verdicts(b.id)
    if not any(outcome in ("passed", "failed") for outcome in b_verdicts.values()):
        raise StoreError(f"run {b.id} reached no verdict (each rule an error, a skip or not run): there is "
                         "nothing to compare; its own results say why" + (f" ({b.source})" if b.source else ""))
    history = [store.verdicts(r.id) for r in store.last_runs(b, flaky_window, b)]
    if not b.complete:  # b is not among the complete runs last_runs gives: its verdicts come last
        history.append(b_verdicts)
    a_verdicts = store.verdicts(a.id)
    errored = {key: f"the rule ended in ERROR in run {run.id}: its numbers may be partial"
               for run, verdicts in ((a, a_verdicts), (b, b_verdicts)) for key, v in verdicts.items() if v == "error"}
    moved = moved_metrics(store.series(a.id), store.series(b.id), min_effect, alpha=alpha,
                          labels=(f"run {a.id}", f"run {b.id}"), not_judged=errored)
    return Comparison(a, b, verdict_flips(a_verdicts, b_verdicts), flaky(history), len(history), moved,
                      *differences(a.fingerprint, b.fingerprint), min_effect, alpha, blames(store, b.id))


def blames(store: Store, run_id: int) -> dict[Key, str]:
    """The layer at fault of each failed verdict of a run: its ``blame`` case property, as stored."""
    q = (sa.select(metrics.c.rule, metrics.c.config, samples.c.text).join(samples, samples.c.metric_id == metrics.c.id)
         .where(metrics.c.run_id == run_id, metrics.c.name == "blame"))
    with store.engine.connect() as conn:
        return {(r.rule, r.config): str(r.text) for r in conn.execute(q) if r.text}


def _spread(s: Spread, unit: str) -> str:
    inner = f"{s.median:g}" if s.n == 1 else f"{s.median:g} [{s.lo:g}..{s.hi:g}] n={s.n}"
    return f"{inner} {unit}".rstrip()


def _effect(m: Moved) -> str:
    return "new" if abs(m.effect) == float("inf") else f"{m.effect:+.0%}"


def _decider(m: Moved) -> str:
    """What decided a move (model.across.moves' "Which way decided"), in a few words."""
    return {"rank test": f"the rank test (p={m.p:.3g})",
            "measured minimum effect": f"its measured minimum effect {m.min_effect:.1%}",
            "given minimum effect": f"--min-effect {m.min_effect:g}",
            "undecided": "nothing"}[m.decided_by]


def _decision(m: Moved, alpha: float) -> str:
    """Which way decided the move and, for a move that is not judged, why. A parameter (a setting,
    a count) is reported, never judged."""
    if m.direction == "parameter":
        return "reported, never judged"
    said = f"decided by {_decider(m)}"
    if not m.tested:
        said += f" (the rank test needs {repeats_needed(alpha)} repeats in each run, these have {m.a.n} and {m.b.n})"
    if m.decided_by == "undecided":
        said = (f"undecided{said.removeprefix('decided by nothing')}: this metric's noise was never measured "
                "(python -m bench.noise measures it; --min-effect sets a bar)")
    if m.not_judged:
        return f"{said}; not judged: {m.not_judged}"
    return f"{said}; a regression" if m.regression else said


def describe_move(m: Moved, alpha: float = ALPHA) -> str:
    return (f"{m.rule}[{m.config}] {m.name}: {_spread(m.a, m.unit)} -> {_spread(m.b, m.unit)} ({_effect(m)}, "
            f"{m.judgement}; {m.direction}; {_decision(m, alpha)})")


def _run_line(tag: str, r: StoredRun) -> str:
    state = "complete" if r.complete else "INCOMPLETE (interrupted)"
    return f"{tag}: run {r.id}, started {r.started or '?'}, {state}, {r.source or 'no directory'}"


def print_comparison(c: Comparison, written: str = "") -> None:
    """The comparison as text: what changed between the runs first (after a line saying they are of
    two series, if they are), ``written`` (where the JUnit file went) after the runs' own lines, and
    the count of regressions last."""
    if c.mixed:
        print(c.mixed)
    print(c.changed)
    print(_run_line("A (baseline)", c.a))
    print(_run_line("B", c.b))
    if written:
        print(written)
    if c.fingerprint_diff:
        print(f"Fingerprint changes ({len(c.fingerprint_diff)} entries):")
        print_table(["  key", "A", "B"], [[f"  {k}", va, vb] for k, va, vb in c.fingerprint_diff])
    if c.tested_diff:
        print(f"Also different in what was tested (not part of the fingerprint; --tested shows all): "
              f"{', '.join(k for k, _, _ in c.tested_diff)}")
    sections = (("Regressions (passed -> failed)", "regression"), ("Fixes (failed -> passed)", "fix"),
                ("Harness errors (not conformance failures)", "error"), ("Other verdict changes", "changed"))
    for title, kind in sections:
        flips = c.of_kind(kind)
        print(f"{title}: {len(flips)}")
        for f in flips:
            blamed = c.blame.get((f.rule, f.config)) if f.after == "failed" else None
            print(f"  {f.rule}[{f.config}]: {f.before} -> {f.after}" + (f"  blame: {blamed}" if blamed else ""))
    print(f"Flaky (pass/fail flipped {FLAKY_MIN_FLIPS}+ times across the last {c.history} runs of series "
          f"{c.b.series}): {len(c.flaky)}")
    for (rule, config), n in c.flaky.items():
        print(f"  {rule}[{config}]: {n} flips")
    effect = (f"--min-effect {c.min_effect:g}" if c.min_effect is not None
              else f"the metric's measured minimum effect (its rule's MIN_EFFECTS; {MIN_EFFECT:.0%} if unmeasured)")
    print(f"Metrics moved beyond the noise (each median outside the other run's spread, |change| >= {effect}; "
          f"with {repeats_needed(c.alpha)}+ repeats in each run the rank test decides, p <= {c.alpha:g}, "
          f"else the minimum effect alone): {len(c.moved)}")
    for m in c.moved:
        print("  " + describe_move(m, c.alpha))
    print(f"Regressions (a metric worse beyond the noise): {len(c.worse)}")
    for m in c.worse:
        print(f"  {m.rule}[{m.config}] {m.name}: {_effect(m)}, decided by {_decider(m)}")
    print(f"{len(c.failing)} regression(s)." if c.failing else "No regression.")


def comparison_junit(c: Comparison) -> str:
    """One case per rule and configuration that changed: a failure on a regression (a verdict
    passed -> failed, or a metric worse beyond the noise), an error when B has a harness error, the
    moved metrics and flakiness in the case's output."""
    verdict_keys = sorted({(f.rule, f.config) for f in c.flips} | set(c.flaky) | {(m.rule, m.config) for m in c.moved})
    cases = []
    flips = {(f.rule, f.config): f for f in c.flips}
    for rule, config in verdict_keys:
        case = TestCase(name=f"{rule}[{config}]", classname=f"vioconform.compare.{rule}")
        out = [describe_move(m, c.alpha) for m in c.moved if (m.rule, m.config) == (rule, config)]
        if (rule, config) in c.flaky:
            out.append(f"flaky: {c.flaky[(rule, config)]} pass/fail flips across the last {c.history} runs")
        f = flips.get((rule, config))
        worse = [m for m in c.worse if (m.rule, m.config) == (rule, config)]
        if f is not None:
            out.insert(0, f"verdict: {f.before} -> {f.after} ({f.kind})")
        if f is not None and f.kind == "regression":
            case.add_failure_info(message=f"regression: passed in run {c.a.id}, failed in run {c.b.id}")
        elif worse:
            case.add_failure_info(message="regression: " + "; ".join(
                f"{m.name} {_spread(m.a, m.unit)} -> {_spread(m.b, m.unit)} ({_effect(m)}, worse), decided by {_decider(m)}"
                for m in worse))
        elif f is not None and f.kind == "error":
            case.add_error_info(message=f"harness error in run {c.b.id} (was {f.before} in run {c.a.id})")
        case.stdout = "\n".join(out)
        cases.append(case)
    properties = {"series": c.b.series, "changed": c.changed, **({"mixed_series": c.mixed} if c.mixed else {})}
    text: str = to_xml_report_string([TestSuite(f"vioconform.compare.{c.a.id}-{c.b.id}", cases,
                                                properties=properties)], encoding="utf-8")
    return text
