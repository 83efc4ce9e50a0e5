"""Run-to-run noise of the default suite on this machine: each metric's coefficient of variation.

    python -m bench.noise                 # 10 runs of the default suite (every rule, virtio-scsi + virtio-blk)
    python -m bench.noise --runs 3 --markdown
    python -m bench.noise --from-store sqlite:///path.db   # recompute from runs stored earlier

Each run is a whole suite run (its own guest and boot), written to a results store of the
benchmark's own (a temporary SQLite file unless ``--store`` names one); the table then gives,
per metric and configuration, the runs, the mean of the runs' medians, and the CV across runs
(model/across/run_to_run.py). The last table is per metric name: the noisiest configuration's CV and the
minimum effect ``compare`` should require for it (3 x sqrt 2 x CV, floor 2 %, and at least the
widest change seen between two of the runs; model/across/run_to_run.py says why). Only metrics with a direction (higher- or lower-better) are listed: parameters are settings.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from bench.suite_run import run_suite_at
from model.across.run_to_run import MIN_EFFECT_FLOOR, run_to_run, worst_by_name
from reports.store import Store, StoreError

CONTROLLERS = "virtio-scsi,virtio-blk"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.noise", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10, help="whole suite runs (default 10)")
    ap.add_argument("--store", default=None, metavar="URL", help="store to write the runs to (default: a new temporary SQLite file)")
    ap.add_argument("--from-store", default=None, metavar="URL", help="measure nothing: use every complete run in this store")
    ap.add_argument("--markdown", action="store_true", help="also print the per-name table as Markdown (for docs/benchmarks.md)")
    ap.add_argument("--all", action="store_true", help="also list parameters (settings and counts), not only "
                                                        "metrics with a direction")
    ap.add_argument("suite_args", nargs="*", help="extra arguments for the suite (after --)")
    args = ap.parse_args(argv)
    if args.runs < 2 and not args.from_store:
        ap.error("--runs must be 2 or more: one run has no run-to-run spread")
    work = Path(tempfile.mkdtemp(prefix="vioconform-bench-noise-"))
    url = args.from_store or args.store or f"sqlite:///{work / 'noise.db'}"
    try:
        store = Store(url, create=not args.from_store)  # --from-store only reads: never creates one
    except StoreError as e:
        print(f"bench.noise: {e}", file=sys.stderr)
        return 2
    if not args.from_store:
        for i in range(args.runs):
            t0 = time.monotonic()
            run = run_suite_at(work / f"run{i}", "-q", "--controllers", CONTROLLERS, "--store", "none",
                               *args.suite_args, timeout=None)
            if not run.junit.exists():
                print(run.output[-5000:], file=sys.stderr)
                print(f"bench.noise: run {i} wrote no JUnit file (exit {run.returncode})", file=sys.stderr)
                return 1
            run_id, _ = store.import_dir(run.results)
            outcomes = run.outcomes()
            bad = sorted(n for n, o in outcomes.items() if o in ("failed", "error"))
            print(f"run {i + 1}/{args.runs}: {time.monotonic() - t0:.0f} s, stored as run {run_id}, "
                  f"{sum(o == 'passed' for o in outcomes.values())} passed, {len(bad)} failed {bad or ''}", flush=True)
    stored = [r for r in store.runs() if r.complete]
    rows = [r for r in run_to_run([store.series(r.id) for r in stored]) if args.all or r.direction != "parameter"]
    if not rows:
        print(f"bench.noise: no metric measured by 2 or more complete runs in {store.shown}", file=sys.stderr)
        return 1
    print(f"\nrun-to-run spread over {len(stored)} complete runs ({store.shown})")
    print(f"{'rule':16} {'configuration':38} {'metric':34} {'runs':>4} {'mean':>12} {'CV %':>6}")
    for r in rows:
        print(f"{r.rule:16} {r.config:38} {r.name:34} {r.runs:>4} {r.mean:>12.4g} {100 * r.cv:>6.2f}")
    worst = worst_by_name(rows)
    print(f"\n{'metric':34} {'unit':9} {'CV %':>8} {'widest %':>9} {'min effect %':>12}  (noisiest configuration)")
    for name in sorted(worst):
        r = worst[name]
        print(f"{name:34} {r.unit:9} {100 * r.cv:>8.2f} {100 * r.widest:>9.1f} {100 * r.min_effect:>12.1f}  ({r.config})")
    if args.markdown:
        print("\n| metric | unit | runs | CV | widest change | min effect | noisiest configuration |\n"
              "|---|---|---|---|---|---|---|")
        for name in sorted(worst):
            r = worst[name]
            where = r.config.split(":")[1] if r.min_effect > MIN_EFFECT_FLOOR else "both (never moved)"
            print(f"| `{name}` | {r.unit} | {r.runs} | {100 * r.cv:.2f} % | {100 * r.widest:.1f} % | "
                  f"{100 * r.min_effect:.1f} % | {where} |")
        print("\n    " + "\n    ".join(f'"{n}": {worst[n].min_effect:.3f},  # CV {100 * worst[n].cv:.2f} %, widest '
                                         f'{100 * worst[n].widest:.1f} % ({worst[n].config.split(":")[1]})'
                                         for n in sorted(worst)))
    print(f"\nraw results: {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
