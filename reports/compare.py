"""Compare runs: regressions, fixes, flaky configurations and metrics that moved beyond the noise.

    python -m reports.compare A B [--store URL] [--junit PATH]
    python -m reports.compare --last N [RUN | --series NAME] [--store URL]
    python -m reports.compare --tested results/A/junit.xml results/B/junit.xml [--all]

A and B are run ids in the results store (reports/store.py) or results directories (imported
into the store on the fly, once). ``--last N`` compares a run (default: the newest complete run,
of ``--series NAME`` if given) with the previous complete run of its series (model/across/series.py:
the job, whatever QEMU, libvirt, kernel, machine type, image or fio it ran on), and judges
flakiness over the series' last N runs. Every comparison begins with what changed between the
two runs (``run 41 -> 42: qemu.version 7.2.22 -> 8.0.0; unchanged: ...``, model.across.fingerprint
change_line); two runs of different series are compared only after a first line that says so.
The arithmetic is model/across/moves.py: verdict flips are exact; a metric moved only when both
run's median lies outside the other's spread, the change is at least ``--min-effect`` and a rank test over the
repeats says so. An interrupted run is never a baseline (A).

Exit code: 1 when B has a regression (passed -> failed), 0 otherwise, 2 on bad input (a store
that cannot be opened, a run id that does not exist, an incomplete baseline, a run B in which no
rule reached a verdict: nothing was compared, so it is never a 0) and on a usage error
(argparse's code: ``--alpha`` outside (0, 1), a negative ``--min-effect``, a ``--junit`` path that
is a directory, a device or the store's own file), which is reported before anything is read or
written, so a usage error is never mistaken for a regression. ``--junit PATH``
writes one case per rule and configuration that changed: a failure on a regression, an error on a
harness error.

``--tested`` (also chosen when every argument is a file) is the side-by-side printer of JUnit
files: what was tested (the suite properties: image, guest OS and kernel, each controller's
driver and boot settings) and each rule's verdict per configuration, one column per run; rows
where the runs differ are marked ``*`` (``--all`` prints the equal rows too). Exit code 0; a
file that is not a vioconform JUnit file is named with the reason (exit 2).
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import sqlalchemy as sa
from junit_xml import TestCase, TestSuite, to_xml_report_string

from model.across.fingerprint import change_line, differences
from model.across.moves import (
    ALPHA,
    FLAKY_MIN_FLIPS,
    FLAKY_WINDOW,
    MIN_EFFECT,
    MIN_EFFECTS,
    Flip,
    Key,
    Moved,
    Spread,
    flaky,
    moved_metrics,
    repeats_needed,
    verdict_flips,
)
from model.across.series import series_problem
from reports.results import OutputPathError, check_outputs, not_regular, write_atomic
from reports.store import (
    RUN_ID_KEY,
    Store,
    StoredRun,
    StoreError,
    default_url,
    metrics,
    opened_store,
    samples,
    sqlite_file,
    store_side_files,
)


class NotAJunitFile(ValueError):
    """A file that is not a JUnit file the suite wrote; ``str()`` says which and why."""


def read_run(path: Path) -> dict[str, str]:
    """A run's suite properties, and ``verdict.<case name>`` -> passed/failed/error/skipped per test case."""
    kind = not_regular(path)
    if kind is not None:  # a FIFO would be read for ever
        raise NotAJunitFile(f"{path}: it is {kind}, not a JUnit file")
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        raise NotAJunitFile(f"{path}: {e}") from None
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    if suite is None:
        raise NotAJunitFile(f"{path}: no <testsuite> element: not a JUnit file")
    out: dict[str, str] = {}
    props = suite.find("properties")
    for p in props if props is not None else []:
        if p.get("name") != RUN_ID_KEY:  # each run's own identity: not what was tested
            out[p.get("name", "")] = p.get("value", "")
    for case in suite.iter("testcase"):
        kind = next((k for k in ("failure", "error", "skipped") if case.find(k) is not None), "passed")
        out[f"verdict.{case.get('name', '')}"] = {"failure": "failed"}.get(kind, kind)
        blamed = case.find("properties/property[@name='blame']")
        if blamed is not None:  # a failure's layer at fault (model/blame.py)
            out[f"blame.{case.get('name', '')}"] = blamed.get("value", "")
    return out


def side_by_side(runs: Sequence[dict[str, str]], everything: bool = False) -> list[list[str]]:
    """Rows of [mark, key, value per run]: the keys of every run in a stable order (what was
    tested, then the verdicts); a key a run lacks is "-". Only rows that differ unless ``everything``."""
    keys = sorted({k for r in runs for k in r}, key=_row_order)
    rows = []
    for k in keys:
        values = [r.get(k, "-") for r in runs]
        differ = len(set(values)) > 1
        if differ or everything:
            rows.append(["*" if differ else " ", k, *values])
    return rows


def _row_order(key: str) -> tuple[bool, str, bool]:
    """What was tested first, then each case's verdict with its blame (a failure's layer) under it."""
    kind, _, case = key.partition(".")
    return (True, case, kind == "blame") if kind in ("verdict", "blame") else (False, key, False)


def _print_table(header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for r in [header, *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())


def tested(paths: Sequence[Path], everything: bool = False) -> int:
    """The side-by-side printer of what was tested (``--tested``, or JUnit files as arguments)."""
    try:
        runs = [read_run(p) for p in paths]
    except NotAJunitFile as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    rows = side_by_side(runs, everything)
    _print_table([" ", "key", *(str(p) for p in paths)], rows)
    if not rows:
        print("(the runs do not differ)")
    return 0


# --- two stored runs -------------------------------------------------------------------------

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


def compare_runs(store: Store, a: StoredRun, b: StoredRun, flaky_window: int = FLAKY_WINDOW,
                 min_effect: float | None = None, alpha: float = ALPHA) -> Comparison:
    """Run ``b`` against the baseline ``a``; StoreError if ``a`` is incomplete (an interrupted run
    is never a baseline) or ``b`` reached no verdict (nothing to compare). ``min_effect`` None: each metric's measured minimum effect
    (model.across.moves.MIN_EFFECTS); a number: that one for every metric."""
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
    return Comparison(a, b, verdict_flips(store.verdicts(a.id), b_verdicts), flaky(history), len(history),
                      moved_metrics(store.series(a.id), store.series(b.id), MIN_EFFECT if min_effect is None else min_effect,
                                    MIN_EFFECTS if min_effect is None else {}, alpha=alpha),
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


def describe_move(m: Moved, alpha: float = ALPHA) -> str:
    effect = "new" if abs(m.effect) == float("inf") else f"{m.effect:+.0%}"
    test = (f"p={m.p:.3g}" if m.tested else
            f"untested: {m.a.n} and {m.b.n} samples cannot reach p<={alpha:g} "
            f"(the rank test needs {repeats_needed(alpha)} repeats in each run)")
    return (f"{m.rule}[{m.config}] {m.name}: {_spread(m.a, m.unit)} -> {_spread(m.b, m.unit)} ({effect}, "
            f"{m.judgement}; {m.direction}; {test})")


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
        _print_table(["  key", "A", "B"], [[f"  {k}", va, vb] for k, va, vb in c.fingerprint_diff])
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
    effect = (f"{c.min_effect:.0%}" if c.min_effect is not None
              else f"the metric's measured minimum effect (model/across/moves.py MIN_EFFECTS; {MIN_EFFECT:.0%} if unmeasured)")
    print(f"Metrics moved beyond the noise (each median outside the other run's spread, |change| >= {effect}, rank test "
          f"p <= {c.alpha:g}): {len(c.moved)}")
    for m in c.moved:
        print("  " + describe_move(m, c.alpha))
    print(f"{len(c.regressions)} regression(s)." if c.regressions else "No regression.")


def comparison_junit(c: Comparison) -> str:
    """One case per rule and configuration of either run: a failure on a regression, an error
    when B has a harness error, the moved metrics and flakiness in the case's output."""
    verdict_keys = sorted({(f.rule, f.config) for f in c.flips} | set(c.flaky) | {(m.rule, m.config) for m in c.moved})
    cases = []
    flips = {(f.rule, f.config): f for f in c.flips}
    for rule, config in verdict_keys:
        case = TestCase(name=f"{rule}[{config}]", classname=f"vioconform.compare.{rule}")
        out = [describe_move(m, c.alpha) for m in c.moved if (m.rule, m.config) == (rule, config)]
        if (rule, config) in c.flaky:
            out.append(f"flaky: {c.flaky[(rule, config)]} pass/fail flips across the last {c.history} runs")
        f = flips.get((rule, config))
        if f is not None:
            out.insert(0, f"verdict: {f.before} -> {f.after} ({f.kind})")
            if f.kind == "regression":
                case.add_failure_info(message=f"regression: passed in run {c.a.id}, failed in run {c.b.id}")
            elif f.kind == "error":
                case.add_error_info(message=f"harness error in run {c.b.id} (was {f.before} in run {c.a.id})")
        case.stdout = "\n".join(out)
        cases.append(case)
    properties = {"series": c.b.series, "changed": c.changed, **({"mixed_series": c.mixed} if c.mixed else {})}
    text: str = to_xml_report_string([TestSuite(f"vioconform.compare.{c.a.id}-{c.b.id}", cases,
                                                properties=properties)], encoding="utf-8")
    return text


def _resolve(store: Store, ref: str) -> StoredRun:
    """A run id in the store, or a results directory (imported on the fly, once)."""
    if ref.isdigit():
        return store.run(int(ref))
    path = Path(ref)
    if path.is_dir():
        run_id, _ = store.import_dir(path)
        return store.run(run_id)
    raise StoreError(f"{ref}: neither a run id in the store nor a results directory; give a number from "
                     f"python -m reports.store list, or a directory such as results/20261123-020000")


def newest_run(store: Store, series: str | None) -> StoredRun:
    """The newest complete run (of ``series``, if given); StoreError naming what the store lacks."""
    complete = store.series_runs(series) if series is not None else [r for r in store.runs() if r.complete]
    if complete:
        return complete[-1]
    if series is None:
        raise StoreError(f"store {store.shown} has no complete run; run the suite, or import results with "
                         f"python -m reports.store import DIR")
    known = sorted({r.series for r in store.runs()})
    raise StoreError(f"store {store.shown} has no complete run of series {series}; its series: "
                     f"{', '.join(known) or 'none'} (python -m reports.store --store {store.shown} list shows each run's)")


def _last(store: Store, n: int, ref: str | None, series: str | None = None) -> tuple[StoredRun, StoredRun]:
    b = _resolve(store, ref) if ref else newest_run(store, series)
    previous = [r for r in store.last_runs(b, max(n, 2), b) if r.id != b.id]
    if not previous:
        raise StoreError(f"run {b.id} has no earlier complete run of its series ({b.series}) in {store.shown}; "
                         f"compare two runs by id or directory instead")
    return previous[-1], b


def series_arg(text: str) -> str:
    """``--series``: a name a series can have (model.across.series), else argparse's usage error."""
    problem = series_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{text!r}: {problem}")
    return text


def check_output_arg(ap: argparse.ArgumentParser, what: str, path: Path, store_url: str | None) -> None:
    """argparse's usage error, before the store is opened, for an output option (``--junit``,
    ``-o``) that names no file to write (a directory, a device) or the store's own file."""
    try:
        check_outputs([(what, path), ("--store", sqlite_file(store_url or default_url()))],
                      taken=store_side_files(store_url or default_url()))
    except OutputPathError as e:
        ap.error(str(e))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m reports.compare", description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="*", help="two runs (ids or results directories), or junit.xml files for --tested")
    ap.add_argument("--tested", action="store_true",
                    help="print what was tested side by side (suite properties and verdicts of JUnit files)")
    ap.add_argument("--all", action="store_true", help="with --tested: print the rows that are equal too")
    ap.add_argument("--store", help=f"SQLAlchemy URL of the results store (default {default_url()})")
    ap.add_argument("--last", type=int, metavar="N",
                    help="compare a run (default: the newest complete one) with the previous complete run of its "
                         "series, whatever changed in between; flakiness over the series' last N runs")
    ap.add_argument("--series", type=series_arg, metavar="NAME",
                    help="with --last and no RUN: the newest complete run of this series (python -m reports.store "
                         "list shows each run's)")
    ap.add_argument("--min-effect", type=float, default=None,
                    help="smallest relative change of a metric reported, for every metric (default: each metric's "
                         f"minimum effect measured from run-to-run noise, see docs/benchmarks.md; {MIN_EFFECT} for one not measured)")
    ap.add_argument("--alpha", type=float, default=ALPHA, help=f"rank test significance level (default {ALPHA})")
    ap.add_argument("--junit", type=Path, metavar="PATH", help="also write the comparison as JUnit XML")
    args = ap.parse_args(argv)
    if args.tested or (args.runs and all(Path(r).is_file() for r in args.runs)):
        if not args.runs:
            ap.error("--tested needs junit.xml files")
        if args.junit is not None:  # it would be left unwritten while the command says nothing
            ap.error("--junit writes the comparison of two runs; --tested only prints what the files tested")
        return tested([Path(r) for r in args.runs], args.all)
    if args.last is None and len(args.runs) != 2:
        ap.error("give two runs (ids or results directories), or --last N [RUN]")
    if args.last is not None and (len(args.runs) > 1 or args.last < 2):
        ap.error("--last N takes N >= 2 and at most one run")
    if args.series is not None and (args.last is None or args.runs):
        ap.error("--series picks the newest run of a series for --last N; give it with --last and no RUN")
    if not 0 < args.alpha < 1:  # also refuses nan
        ap.error(f"--alpha {args.alpha:g} is not a significance level; give one between 0 and 1, e.g. {ALPHA}")
    if args.min_effect is not None and not 0 <= args.min_effect < float("inf"):
        ap.error(f"--min-effect {args.min_effect:g} is not a relative change; give 0 or more, e.g. 0.1 for 10 %")
    if args.junit is not None:
        check_output_arg(ap, "--junit", args.junit, args.store)
    try:
        with opened_store(args.store) as store:
            if args.last is not None:
                a, b = _last(store, args.last, args.runs[0] if args.runs else None, args.series)
                window = args.last
            else:
                a, b = _resolve(store, args.runs[0]), _resolve(store, args.runs[1])
                window = FLAKY_WINDOW
            store.check_outside_runs([("--junit", args.junit)])
            c = compare_runs(store, a, b, window, args.min_effect, args.alpha)
    except StoreError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    not_written = written = ""
    if args.junit is not None:
        try:
            write_atomic(args.junit, comparison_junit(c) + "\n")
            written = f"JUnit: {args.junit}"
        except OSError as e:
            not_written = f"error: --junit {args.junit} not written: {e.strerror or e}"
    print_comparison(c, written)
    if not_written:  # exit 2, never 1: that code says "regression"
        print(not_written, file=sys.stderr)
        return 2
    return 1 if c.regressions else 0


if __name__ == "__main__":
    sys.exit(main())
