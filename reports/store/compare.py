"""Compare runs: regressions, fixes, flaky configurations and metrics that moved beyond the noise.

    python -m reports.compare A B [--store URL] [--junit PATH]
    python -m reports.compare --last N [RUN | --series NAME] [--store URL]
    python -m reports.compare --tested results/A/junit.xml results/B/junit.xml [--all]

A and B are run ids in the results store (reports/store/) or results directories (imported
into the store on the fly, once). ``--last N`` compares a run (default: the newest complete run,
of ``--series NAME`` if given) with the previous complete run of its series (model/across/series.py:
the job, whatever QEMU, libvirt, kernel, machine type, image or fio it ran on), and judges
flakiness over the series' last N runs. Every comparison begins with what changed between the
two runs (``run 41 -> 42: qemu.version 7.2.22 -> 8.0.0; unchanged: ...``, model.across.fingerprint
change_line); two runs of different series are compared only after a first line that says so.
The arithmetic is model/across/moves.py: verdict flips are exact; a metric moved when each run's
median lies outside the other's spread and the change is at least the metric's measured minimum
effect (``--min-effect`` sets one for every metric); with 4 or more repeats in each run a rank test
over them decides too, with fewer (queue-depth keeps one sample per run by default, a nightly job
runs ``--repeats 3``) the minimum effect decides alone, and each move says which way decided. A
metric that got worse beyond its noise is a regression, except where it is not judged: the
numbers that follow the host CPU when either run's vCPUs waited for a host CPU over 10 % of a
window (model/across/contention.py), a rule's numbers where it ended in ERROR, and a metric whose
noise was never measured where the rank test cannot decide. An interrupted run is never a
baseline (A).

Exit code: 1 when B has a regression (a verdict passed -> failed, or a metric worse beyond its
noise), 0 otherwise, 2 on bad input (a store that cannot be opened, a run id that does not exist,
both arguments one run, an incomplete baseline, a run B in which no rule reached a verdict: nothing
was compared, so it is never a 0) and on a usage error (argparse's code: ``--alpha`` outside (0, 1),
a negative ``--min-effect``, a ``--junit`` path that is a directory, a device or the store's own
file, a run that is neither a run id in ASCII digits nor a results directory, an option the chosen
mode would ignore), which is reported before anything is read or written, so a usage error is never
mistaken for a regression. ``--junit PATH`` writes one case per rule and configuration that changed:
a failure on a regression, an error on a harness error.

``--tested`` (also chosen when every argument is a file) is the side-by-side printer of JUnit
files: what was tested (the suite properties: image, guest OS and kernel, each controller's
driver and boot settings) and each rule's verdict per configuration, one column per run; rows
where the runs differ are marked ``*`` (``--all`` prints the equal rows too). It takes two or more
files and none of the options of a comparison. Exit code 0; a file that is not a vioconform JUnit
file is named with the reason (exit 2).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from model.across.moves import ALPHA, FLAKY_WINDOW, MIN_EFFECT, repeats_needed
from model.across.series import series_problem
from reports.results import OutputPathError, check_outputs, write_atomic
from reports.store.comparison import compare_runs, comparison_junit, print_comparison
from reports.store.engine import Store, StoredRun, opened_store
from reports.store.schema import parse_run_id
from reports.store.store_error import StoreError
from reports.store.tested import tested
from reports.store.urls import default_url, sqlite_file, store_side_files


def ref_problem(ref: str) -> str:
    """Why ``ref`` names no run to compare ("" when it is a run id or a results directory)."""
    if parse_run_id(ref) is not None or Path(ref).is_dir():
        return ""
    if Path(ref).is_file():
        return (f"{ref} is a file; a comparison reads stored runs: give its results directory "
                f"({Path(ref).parent}) or its run id (python -m reports.store list), or --tested and two or more "
                "junit.xml files to print what they tested side by side")
    digits = " (a run id is written in the digits 0-9)" if ref.isdigit() else ""
    return (f"{ref}: neither a run id in the store{digits} nor a results directory; give a number from "
            f"python -m reports.store list, or a directory such as results/20261123-020000")


def _resolve(store: Store, ref: str) -> StoredRun:
    """A run id in the store, or a results directory (imported on the fly, once)."""
    number = parse_run_id(ref)
    if number is not None:
        return store.run(number)
    if Path(ref).is_dir():
        run, _ = store.import_dir(Path(ref))
        return store.run(run)
    raise StoreError(ref_problem(ref) or f"{ref}: not a results directory any more")


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


def _comparison_options(args: argparse.Namespace) -> list[str]:
    """The options given that only a comparison of stored runs reads."""
    given = (("--last", args.last), ("--series", args.series), ("--store", args.store),
             ("--min-effect", args.min_effect), ("--alpha", args.alpha), ("--junit", args.junit))
    return [name for name, value in given if value is not None]


def _check_tested_args(ap: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """argparse's usage error for what the side-by-side printer of JUnit files would ignore."""
    unread = _comparison_options(args)
    if unread and args.tested:
        ap.error(f"--tested prints JUnit files side by side and compares no stored runs, so {', '.join(unread)} "
                 "would be ignored: leave it out, or drop --tested and give two runs (ids or results directories)")
    if unread:  # every argument a file: the printer, unless an option asks for a comparison
        ap.error(f"{', '.join(unread)} {'is' if len(unread) == 1 else 'are'} for a comparison of stored runs, and "
                 + ref_problem(args.runs[0]))
    if len(args.runs) < 2:
        ap.error("--tested prints two or more junit.xml files side by side; give at least two "
                 "(or two runs, ids or results directories, to compare them)")


def _check_comparison_args(ap: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """argparse's usage error for a comparison of stored runs whose arguments name no runs, or that
    carries an option it would ignore."""
    if args.all:
        ap.error("--all prints the equal rows of --tested (JUnit files side by side) too; a comparison of stored "
                 "runs prints what changed: leave --all out, or give --tested and junit.xml files")
    if args.last is None and len(args.runs) != 2:
        ap.error("give two runs (ids or results directories), or --last N [RUN]")
    if args.last is not None and (len(args.runs) > 1 or args.last < 2):
        ap.error("--last N takes N >= 2 and at most one run")
    if args.series is not None and (args.last is None or args.runs):
        ap.error("--series picks the newest run of a series for --last N; give it with --last and no RUN")
    for ref in args.runs:
        problem = ref_problem(ref)
        if problem:
            ap.error(problem)


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
                    help="smallest relative change of a metric reported, for every metric; with fewer than "
                         f"{repeats_needed(ALPHA)} repeats in a run it alone decides a move (default: each metric's "
                         "minimum effect measured from run-to-run noise, see docs/benchmarks.md; a metric not measured "
                         f"is reported at {MIN_EFFECT} and undecided there)")
    ap.add_argument("--alpha", type=float, default=None, help=f"rank test significance level (default {ALPHA})")
    ap.add_argument("--junit", type=Path, metavar="PATH", help="also write the comparison as JUnit XML")
    args = ap.parse_args(argv)
    if args.tested or (args.runs and all(Path(r).is_file() for r in args.runs)):
        _check_tested_args(ap, args)
        return tested([Path(r) for r in args.runs], args.all)
    _check_comparison_args(ap, args)
    alpha = ALPHA if args.alpha is None else args.alpha
    if not 0 < alpha < 1:  # also refuses nan
        ap.error(f"--alpha {alpha:g} is not a significance level; give one between 0 and 1, e.g. {ALPHA}")
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
            c = compare_runs(store, a, b, window, args.min_effect, alpha)
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
    return 1 if c.failing else 0

