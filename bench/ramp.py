"""Is the ramp long enough? The first second of each measured window against the rest.

    python -m bench.ramp RESULTS_DIR [RESULTS_DIR ...]   # results of earlier suite runs
    python -m bench.ramp --runs 3                        # 3 runs of queue-depth and io-size first

The window opens ``measure.window.RAMP_S`` after fio's first request reached the host. If fio
had not yet reached its steady state by then, the window's first second (the host's QMP
counters, Little's law: requests in flight on average) holds less than the seconds after it.
For each fio job (``queue-depth-qd1``, ``queue-depth-qd32``, ``io-size``) this prints the first
second's depth over the mean of the later seconds, across every window found: about 1 means
the ramp had ended, well below 1 that part of it fell into the window. Needs windows of 2 s
or more (the default).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from bench.suite_run import run_suite_at
from measure.window import RAMP_S

CONTROLLERS = "virtio-scsi,virtio-blk"


def ratios(results: list[Path]) -> dict[str, list[float]]:
    """{job file name: [first second / mean of the later seconds, one per window]}."""
    out: dict[str, list[float]] = defaultdict(list)
    for root in results:
        for f in sorted(root.glob("raw/*/**/*.json")):
            try:
                per_second = json.loads(f.read_text()).get("host_depth_per_second")
            except (json.JSONDecodeError, AttributeError):
                continue
            if not isinstance(per_second, list) or len(per_second) < 2:
                continue
            rest = statistics.mean(per_second[1:])
            if rest > 0:
                out[f.stem].append(per_second[0] / rest)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.ramp", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="*", type=Path, help="results directories of earlier runs")
    ap.add_argument("--runs", type=int, default=0, help="run queue-depth and io-size this many times first")
    args = ap.parse_args(argv)
    dirs = list(args.results)
    if args.runs:
        work = Path(tempfile.mkdtemp(prefix="vioconform-bench-ramp-"))
        for i in range(args.runs):
            run = run_suite_at(work / f"run{i}", "-q", "--controllers", CONTROLLERS, "--store", "none",
                               "-k", "queue_depth or io_size", timeout=None)
            print(f"run {i + 1}/{args.runs}: exit {run.returncode}", flush=True)
            dirs.append(run.results)
    found = ratios(dirs)
    if not found:
        print("bench.ramp: no measured window of 2 s or more in " + ", ".join(map(str, dirs)), file=sys.stderr)
        return 1
    print(f"ramp {RAMP_S:g} s; host depth in the window's first second / mean of the later seconds")
    print(f"{'job':20} {'windows':>7} {'min':>6} {'median':>6} {'max':>6}")
    for job in sorted(found):
        r = found[job]
        print(f"{job:20} {len(r):>7} {min(r):>6.3f} {statistics.median(r):>6.3f} {max(r):>6.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
