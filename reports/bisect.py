"""Find the build that broke a rule: bisect it over QEMU builds, commits of a source tree, or guest kernels.

    python -m reports.bisect --builds FILE --rule RULE [--store URL] [--repeats N] [--bundle DIR] -- [suite options]
    python -m reports.bisect --git REPO --good REV --bad REV --build CMD [--built PATH] --rule RULE ...
    python -m reports.bisect --kernels FILE --rule RULE ... -- [suite options]

The row: ``--builds FILE`` lists QEMU builds in build order, one path a line, the first known good and the
last known bad; ``--git`` takes the first-parent commits from ``--good`` to ``--bad``, each checked out in a
worktree of its own and built with ``--build`` (a build that fails is skipped); ``--kernels FILE`` lists guest
kernels (``.deb`` package files or versions apt has, as ``--guest-kernel-deb`` and ``--guest-kernel`` take them).
Each step runs the rule on one candidate: the suite itself (``-k RULE --emulator BUILD`` and the suite options
after ``--``), or with ``--bundle DIR`` a reproducer bundle's ``replay --qemu BUILD``. What each answer
means, how flaky and skipped steps are gone around and how the culprit is confirmed: model/bisect.py.

With ``--store URL`` every suite step is stored under the series ``bisect_<rule>`` (never the nightly's:
``--baseline last`` and ``compare --last`` of a nightly series never see it); without it the steps are
stored nowhere. Everything goes into a new directory (``--out``, default ``results/bisect-<date-time>``):
``steps/NN-<phase>/`` per step (its output and results), ``bisect.html`` and ``junit.xml``.

Exit codes (docs/reference.md#exit-codes): 0 the first bad candidate was found and confirmed (the last lines
say ``first bad build: PATH`` and ``last good build: PATH``); 1 the ends contradict (the good end fails or
the bad end passes); 2 a usage error or bad input, before any step; 3 cannot decide (skips or flakiness leave
it open, an end cannot be tested, or the confirmation disagreed): the last lines say why and name the
suspects; 4 interrupted (Ctrl-C, SIGTERM: the running step's suite ends its guest itself); 11 the page or
the JUnit file could not be written.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from enum import IntEnum
from pathlib import Path
from types import FrameType

from model.across.series import series_problem
from model.bisect import Finding, Outcome, Step, StepResult, Verdict, bisect
from model.rules import RULE_MODULES
from model.secret import redact_url, register_environment, register_url, scrub
from reports.bisect_record import result_lines, step_line, write_records
from reports.bisect_steps import (
    CANNOT_TEST,
    DEFAULT_STEP_TIMEOUT_S,
    BuiltStep,
    ReplayStep,
    SuiteStep,
    Terminated,
    Tester,
    commits_between,
)
from reports.results import DEFAULT_PARENT, OutputPathError, check_not_in_results_dirs, not_regular, unique_dir


class BisectExit(IntEnum):
    FOUND = 0
    ENDS_CONTRADICT = 1
    USAGE = 2
    CANNOT_DECIDE = 3
    INTERRUPTED = 4
    NOT_WRITTEN = 11


#: Suite options the bisect sets itself for each step; given after ``--`` they are a usage error.
OWN_OPTIONS = ("-k", "--emulator", "--results-dir", "--store", "--series", "--repeats", "--junit-xml", "--junitxml",
               "--guest-kernel", "--guest-kernel-deb")
#: What ``--one`` exits with on a usage error: above 127, so that ``git bisect run`` stops rather than
#: taking it for a bad commit (it reads 1-127 but 125 as bad).
GIT_BISECT_ABORT = 128
#: The default directory's name under results/.
OUT_PREFIX = "bisect-"


class UsageError(ValueError):
    """Bad input, reported before any step: the message says what to fix."""


def recorded_command(argv: Sequence[str]) -> list[str]:
    """The command as the page shows it: a URL's password and every registered secret as ``***``."""
    return ["python -m reports.bisect", *(scrub(redact_url(a) if "://" in a else a) for a in argv)]


def rule_name(given: str) -> str:
    """The rule's name (``queue-depth``) from it or its ``-k`` form (``queue_depth``)."""
    names = [m.RULE for m in RULE_MODULES]
    name = given.replace("_", "-")
    if name not in names:
        raise UsageError(f"--rule {given}: no such rule; the rules are {', '.join(names)}")
    return name


def read_row(path: Path, what: str, kernels: bool = False) -> list[str]:
    """The candidates listed in ``path``, one a line (blank lines and ``#`` comments skipped): two or more,
    no repeats; a QEMU build is an executable file, a kernel a ``.deb`` file or a version."""
    kind = not_regular(path)
    if kind is not None or not path.is_file():
        raise UsageError(f"{what} {path}: {'it is ' + kind if kind else 'no such file'}; give a file listing one "
                         f"{'kernel' if kernels else 'QEMU build'} a line, the known good first, the known bad last")
    lines = [(n, line.strip()) for n, line in enumerate(path.read_text().splitlines(), 1)]
    row = [(n, line) for n, line in lines if line and not line.startswith("#")]
    for n, item in row:
        p = Path(item).expanduser()
        if kernels and item.endswith(".deb") and not p.is_file():
            raise UsageError(f"{what} {path} line {n}: {item}: no such package file")
        if not kernels and not (p.is_file() and p.stat().st_mode & 0o111):
            raise UsageError(f"{what} {path} line {n}: {item}: not an executable file (a QEMU build is the path of "
                             "its qemu-system-* binary)")
    items = [str(Path(i).expanduser()) if not kernels or i.endswith(".deb") else i for _, i in row]
    if len(items) < 2:
        raise UsageError(f"{what} {path} lists {len(items)} candidate(s); a bisect needs two or more: the known good "
                         "first, the known bad last")
    repeated = sorted({i for i in items if items.count(i) > 1})
    if repeated:
        raise UsageError(f"{what} {path} lists {', '.join(repeated)} more than once; list each candidate once, in "
                         "build order")
    return items


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m reports.bisect", description=__doc__.split("\n\n")[0],
                                 epilog="Options after -- go to the suite (python -m pytest suites --help).")
    row = ap.add_mutually_exclusive_group(required=True)
    row.add_argument("--builds", type=Path, metavar="FILE", help="QEMU builds in build order, one path a line: "
                     "the first known good, the last known bad")
    row.add_argument("--git", type=Path, metavar="REPO", help="a source tree: bisect its commits from --good to --bad")
    row.add_argument("--kernels", type=Path, metavar="FILE", help="guest kernels in order, one a line: a .deb "
                     "file (--guest-kernel-deb) or a version apt has (--guest-kernel)")
    row.add_argument("--one", metavar="BUILD", help="test one QEMU build and exit 0 (passes), 1 (fails) or 125 (cannot "
                     "test): a step for git bisect run (a usage error then exits 128, which stops git bisect)")
    ap.add_argument("--rule", required=True, help="the failing rule (queue-depth or queue_depth)")
    ap.add_argument("--good", metavar="REV", help="with --git: the known good commit")
    ap.add_argument("--bad", metavar="REV", help="with --git: the known bad commit")
    ap.add_argument("--build", metavar="CMD", help="with --git: the build command, run by sh in each commit's worktree")
    ap.add_argument("--built", default="build/qemu-system-x86_64", metavar="PATH",
                    help="with --git: the built QEMU, relative to the worktree (default %(default)s)")
    ap.add_argument("--bundle", type=Path, metavar="DIR", help="test each build with this reproducer bundle's "
                    "replay (--qemu BUILD) instead of the suite")
    ap.add_argument("--store", metavar="URL", help="store every suite step in this results store, series "
                    "bisect_<rule> (default: stored nowhere)")
    ap.add_argument("--repeats", type=int, metavar="N", help="repeats of each step (default: the rule's own)")
    ap.add_argument("--out", type=Path, metavar="DIR", help="a new or empty directory for the steps and the records "
                    f"(default {DEFAULT_PARENT}/{OUT_PREFIX}<date-time>)")
    ap.add_argument("--step-timeout", type=float, default=DEFAULT_STEP_TIMEOUT_S, metavar="S",
                    help="a step not done after S seconds is stopped and skipped (default %(default)g)")
    return ap


def _check(args: argparse.Namespace, suite_options: Sequence[str]) -> None:
    """UsageError for options that cannot work together."""
    if args.git is not None and not (args.good and args.bad and args.build):
        raise UsageError("--git needs --good REV, --bad REV and --build CMD")
    if args.git is None and (args.good or args.bad or args.build):
        raise UsageError("--good, --bad and --build go with --git REPO")
    if args.repeats is not None and args.repeats < 1:
        raise UsageError(f"--repeats {args.repeats}: give 1 or more")
    if args.step_timeout <= 0:
        raise UsageError(f"--step-timeout {args.step_timeout:g}: give a number of seconds above 0")
    if args.bundle is not None:
        if args.kernels is not None:
            raise UsageError("--bundle replays one guest kernel, the bundle's own; bisect kernels with the suite "
                             "(leave --bundle out)")
        if suite_options or args.store:
            raise UsageError("--bundle replays the bundle alone: suite options after -- and --store do not apply")
        replay = args.bundle / "replay"
        if not (replay.is_file() and replay.stat().st_mode & 0o111):
            raise UsageError(f"--bundle {args.bundle}: no executable replay in it; give a reproducer bundle's directory")
    own = [o for o in suite_options if o.split("=")[0] in OWN_OPTIONS]
    if own:
        raise UsageError(f"{', '.join(own)} after --: the bisect sets {', '.join(OWN_OPTIONS)} itself for each step")


def _out_dir(given: Path | None) -> Path:
    if given is None:
        return unique_dir(DEFAULT_PARENT.resolve(), OUT_PREFIX + time.strftime("%Y%m%d-%H%M%S"))[0]
    try:
        check_not_in_results_dirs([("--out", given)])
    except OutputPathError as e:
        raise UsageError(str(e)) from None
    if given.exists() and (not given.is_dir() or any(given.iterdir())):
        raise UsageError(f"--out {given}: not a new or empty directory; the bisect never writes over earlier files")
    given.mkdir(mode=0o700, parents=True, exist_ok=True)
    return given.resolve()


def bisect_series(rule: str) -> str:
    """The series every suite step of a bisect of ``rule`` is stored under: ``bisect_queue_depth``."""
    series = f"bisect_{rule.replace('-', '_')}"
    problem = series_problem(series)
    if problem:
        raise UsageError(f"the series {series}: {problem}")
    return series


def make_tester(args: argparse.Namespace, rule: str, suite_options: Sequence[str], workdir: Path) -> Tester:
    inner: Tester
    if args.bundle is not None:
        inner = ReplayStep(args.bundle, args.repeats, args.step_timeout)
    else:
        inner = SuiteStep(rule, tuple(suite_options), args.repeats, args.store, bisect_series(rule),
                          args.kernels is not None, args.step_timeout)
    if args.git is None:
        return inner
    return BuiltStep(args.git.resolve(), args.build, args.built, inner, workdir, args.step_timeout)


def run(args: argparse.Namespace, suite_options: Sequence[str], argv: Sequence[str]) -> int:
    """The bisect once its input is read: every step printed as it ends, then the records."""
    rule = rule_name(args.rule)
    _check(args, suite_options)
    bisect_series(rule)  # a usage error now, before anything is created
    if args.one is not None:
        return one_step(args, rule, suite_options)
    what = "commit" if args.git else "kernel" if args.kernels else "build"
    if args.git is not None:
        try:
            row = commits_between(args.git, args.good, args.bad)
        except ValueError as e:
            raise UsageError(str(e)) from None
    else:
        row = read_row(args.kernels or args.builds, "--kernels" if args.kernels else "--builds", args.kernels is not None)
    out = _out_dir(args.out)
    # the worktrees and built QEMUs: a directory the QEMU user libvirt runs the emulator as can read
    workdir = Path(tempfile.mkdtemp(prefix="vioconform-bisect-", dir="/var/tmp"))
    workdir.chmod(0o755)
    tester = make_tester(args, rule, suite_options, workdir)
    dirs: list[str] = []
    print(f"bisect of {rule} over {len(row)} {what}s: {row[0]} (good) .. {row[-1]} (bad); steps in {out}/steps",
          flush=True)

    def step(index: int, candidate: str) -> StepResult:
        name = f"{len(dirs) + 1:02d}-{index:03d}"
        d = out / "steps" / name
        d.mkdir(parents=True, mode=0o700)
        dirs.append(f"steps/{name}")
        return tester(candidate, d)

    def show(done: Step) -> None:
        print(scrub(step_line(len(dirs), done)), flush=True)

    try:
        outcome = bisect(row, step, show, what)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    for line in result_lines(outcome, what):
        print(scrub(line))
    try:
        for path in write_records(out, outcome, rule, recorded_command(argv), dirs, what):
            print(f"written: {path}")
    except OSError as e:
        print(f"NOT WRITTEN: {e}", file=sys.stderr)
        return BisectExit.NOT_WRITTEN
    return exit_code(outcome)


def one_step(args: argparse.Namespace, rule: str, suite_options: Sequence[str]) -> int:
    """``--one BUILD``: one step, its verdict as the exit code ``git bisect run`` reads."""
    build = Path(args.one).expanduser().absolute()
    if not (build.is_file() and build.stat().st_mode & 0o111):
        raise UsageError(f"--one {args.one}: not an executable file (a QEMU build is the path of its qemu-system-* "
                         "binary); a build step that made none should exit 125 itself")
    out = _out_dir(args.out) / "steps" / "01-one"
    out.mkdir(parents=True, mode=0o700)
    result = make_tester(args, rule, suite_options, out)(str(build), out)
    print(f"{build}: {result.verdict.value} ({result.counts}){f' [{result.note}]' if result.note else ''}")
    return {Verdict.PASS: 0, Verdict.FAIL: 1, Verdict.SKIP: CANNOT_TEST}[result.verdict]


def exit_code(outcome: Outcome) -> int:
    return {Finding.FOUND: BisectExit.FOUND, Finding.GOOD_END_FAILS: BisectExit.ENDS_CONTRADICT,
            Finding.BAD_END_PASSES: BisectExit.ENDS_CONTRADICT,
            Finding.CANNOT_DECIDE: BisectExit.CANNOT_DECIDE}[outcome.finding]


def _sigterm(signum: int, frame: FrameType | None) -> None:
    raise Terminated


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ours, suite_options = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    args = parser().parse_args(ours)
    register_environment()
    for given in [args.store, *suite_options]:
        if given and "://" in given:
            register_url(given)
    signal.signal(signal.SIGTERM, _sigterm)
    try:
        return run(args, suite_options, argv)
    except UsageError as e:
        print(f"python -m reports.bisect: error: {e}", file=sys.stderr)
        return GIT_BISECT_ABORT if args.one is not None else BisectExit.USAGE
    except KeyboardInterrupt:
        print("interrupted: the bisect stopped; the steps done so far are in their directories", file=sys.stderr)
        return BisectExit.INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
