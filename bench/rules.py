"""Time of the whole default suite (every rule on virtio-scsi and virtio-blk, one guest), the
healthy guest's repeat record, and which rules each fault moves.

    python -m bench.rules                     # one run of the default suite: its time (goal 90 s)
    python -m bench.rules --repeats 10        # 10 runs: every rule must pass 10 of 10
    python -m bench.rules --faults            # also each fault with every rule: what it fails
    python -m bench.rules --repeats 10 --faults --fault wce-lie --with-rules write-cache -k write_cache
                                              # one rule outside the default suite and its fault only

A first run saves a baseline (--save-baseline; buffered-direct skips there), then --repeats runs
compare with it, so every rule, buffered-direct included, is judged --repeats times. Prints a line per run and a table at the
end; exits 1 if a healthy run failed a rule or a fault failed to fail its own rule. ``--with-rules`` and
``-k`` are the suite's own, given to every run; a fault whose own rule is outside the default suite
(write-cache's ``wce-lie``) runs with that rule added.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from bench.goals import EMBEDDED_SUITE_GOAL_S, against
from bench.suite_run import run_suite_at
from model.faults import FAULTS, Fault
from model.rules import opt_in

CONTROLLERS = "virtio-scsi,virtio-blk"


def run_suite(results: Path, *args: str) -> tuple[float, dict[str, str]]:
    """Run the suite; (seconds, {test case name: passed|failed|skipped|error})."""
    t0 = time.monotonic()
    run = run_suite_at(results, "-q", "--controllers", CONTROLLERS, *args, timeout=None)
    took = time.monotonic() - t0
    if not run.junit.exists():
        print(run.output[-5000:], file=sys.stderr)
        raise SystemExit(f"the suite wrote no JUnit file (exit {run.returncode})")
    return took, run.outcomes()


def selection(with_rules: str, keyword: str, fault: Fault | None = None) -> list[str]:
    """The suite's arguments that choose the rules of one run: ``--with-rules`` (with ``fault``'s own rule
    added where it is outside the default suite and not named already) and ``-k``."""
    rules = [r for r in with_rules.split(",") if r]
    if fault is not None and opt_in(fault.rule) and fault.rule not in rules and "all" not in rules:
        rules.append(fault.rule)
    return (["--with-rules", ",".join(rules)] if rules else []) + (["-k", keyword] if keyword else [])


def compared_with(base: Path) -> list[str]:
    """``--baseline`` of the file the first healthy run saved; none where it saved none (rules chosen with
    ``-k``/``--with-rules`` that record nothing a baseline holds, as write-cache's counts)."""
    return ["--baseline", str(base)] if base.exists() else []


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.rules", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=1, help="healthy runs of the default suite (default 1)")
    ap.add_argument("--faults", action="store_true", help="then run every fault with every rule")
    ap.add_argument("--fault", action="append", default=[], choices=list(FAULTS), metavar="FAULT",
                    help="with --faults: this fault only (repeatable; default: every fault)")
    ap.add_argument("--with-rules", default="", metavar="RULE,...",
                    help="the suite's --with-rules in every run: rules outside the default suite to run too")
    ap.add_argument("-k", dest="keyword", default="", metavar="EXPR",
                    help="the suite's -k in every run: only the rule tests it selects (e.g. write_cache)")
    args = ap.parse_args()
    chosen = selection(args.with_rules, args.keyword)
    work = Path(tempfile.mkdtemp(prefix="vioconform-bench-rules-"))
    base = work / "baseline.json"
    # The healthy runs in a store of their own: their run-to-run spread is bench.noise's (below).
    healthy_store = f"sqlite:///{work / 'healthy.db'}"
    tally: dict[str, list[str]] = defaultdict(list)
    times = []
    bad = 0
    for i in range(args.repeats + 1):
        extra = ["--save-baseline", str(base)] if i == 0 else compared_with(base)
        took, outcomes = run_suite(work / f"healthy{i}", *extra, *chosen, "--store", healthy_store)
        times.append(took)
        failed = [n for n, o in outcomes.items() if o in ("failed", "error")]
        bad += bool(failed)
        if i > 0:
            for name, o in outcomes.items():
                tally[name].append(o)
        print(f"healthy run {i}/{args.repeats}{' (saves the baseline)' if i == 0 else ''}: {took:.0f} s, "
              f"{sum(o == 'passed' for o in outcomes.values())} "
              f"passed, {len(failed)} failed {failed or ''}", flush=True)
    goal = "" if chosen else f" (the slowest against the {against(max(times), EMBEDDED_SUITE_GOAL_S)})"
    print(f"\n{' '.join(chosen) or 'default suite'}: {min(times):.0f}-{max(times):.0f} s a run{goal}")
    print(f"{'rule[configuration]':55} passed of {args.repeats}")
    for name in sorted(tally):
        print(f"{name:55} {tally[name].count('passed'):>2}  ({', '.join(sorted(set(tally[name])))})")
    if args.faults:
        if not base.exists() and not chosen:
            raise SystemExit("no baseline was saved by the healthy run")
        print(f"\n{'fault':15} {'own rule':16} what failed (rule[configuration])")
        for name, fault in FAULTS.items():
            if args.fault and name not in args.fault:
                continue
            took, outcomes = run_suite(work / f"fault-{name}", "--inject", name, *compared_with(base),
                                       *selection(args.with_rules, args.keyword, fault), "--store", "none")
            failed = sorted(n for n, o in outcomes.items() if o in ("failed", "error"))
            skipped = sorted(n for n, o in outcomes.items() if o == "skipped")
            own_failed = [n for n in failed if n.startswith(fault.rule + "[")]
            bad += not own_failed
            print(f"{name:15} {fault.rule:16} {', '.join(failed) or 'nothing'}"
                  + (f"; skipped: {', '.join(skipped)}" if skipped else "") + f"  ({took:.0f} s)", flush=True)
    print(f"\nraw results: {work}")
    print(f"their spread: python -m bench.noise --from-store {healthy_store}; the ramp: python -m bench.ramp "
          f"{work}/healthy*")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
