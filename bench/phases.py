"""Where the default suite's time goes: per rule and controller, per phase (measure/phase_times.py).

Runs the default suite (every rule on virtio-scsi and virtio-blk, one guest) as a user does and
prints, from the run's ``phases.json``: boot, set-up, fio start, ramp, measured window, fio stop, the kernel-log check,
teardown and everything else (``other``: settings reads, cache drops, SSH round trips), in seconds,
and the run's wall time.

    python -m bench.phases [--controllers virtio-scsi,virtio-blk] [-k EXPR] [--markdown] [extra suite args]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from bench.suite_run import run_suite_at
from measure.phase_times import PHASES

COLUMNS = (*PHASES, "other", "total")


def rows_of(table: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """``{rule[config]: {phase: s}}`` from a phases table keyed by node id; ``other`` is each
    test's total less its phases."""
    rows: dict[str, dict[str, float]] = defaultdict(lambda: dict.fromkeys(COLUMNS, 0.0))
    for nodeid, phases in table.items():
        module, _, rest = nodeid.partition("::")
        rule = Path(module).stem.removeprefix("test_").replace("_", "-")
        config = rest.partition("[")[2].rstrip("]")
        key = f"{rule}[{config}]" if config else rule
        row = rows[key]
        for name, seconds in phases.items():
            row[name] = row.get(name, 0.0) + seconds
        row["other"] = max(0.0, row["total"] - sum(row[p] for p in PHASES))
    return dict(rows)


def render(rows: dict[str, dict[str, float]], wall_s: float, markdown: bool) -> str:
    sums = {c: sum(r[c] for r in rows.values()) for c in COLUMNS}
    lines = []
    if markdown:
        lines.append("| test | " + " | ".join(COLUMNS) + " |")
        lines.append("|---|" + "---:|" * len(COLUMNS))
        for key in sorted(rows):
            lines.append(f"| {key} | " + " | ".join(f"{rows[key][c]:.1f}" for c in COLUMNS) + " |")
        lines.append("| **sum** | " + " | ".join(f"**{sums[c]:.1f}**" for c in COLUMNS) + " |")
    else:
        width = max((len(k) for k in rows), default=10)
        lines.append(f"{'test':<{width}} " + " ".join(f"{c:>8}" for c in COLUMNS))
        for key in sorted(rows):
            lines.append(f"{key:<{width}} " + " ".join(f"{rows[key][c]:8.1f}" for c in COLUMNS))
        lines.append(f"{'sum':<{width}} " + " ".join(f"{sums[c]:8.1f}" for c in COLUMNS))
    lines.append(f"wall time of the run: {wall_s:.1f} s (the tests' sum {sums['total']:.1f} s; the rest is "
                 "pytest's start, collection and the checks before any guest)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.phases", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--controllers", default="virtio-scsi,virtio-blk")
    ap.add_argument("-k", dest="select", default=None)
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table (for docs/benchmarks.md)")
    args, extra = ap.parse_known_args(argv)
    with tempfile.TemporaryDirectory(prefix="vioconform-bench-phases-") as tmp:
        results = Path(tmp) / "results"
        t0 = time.monotonic()
        run = run_suite_at(results, "--controllers", args.controllers,
                           *(["-k", args.select] if args.select else []), *extra, timeout=3600)
        wall = time.monotonic() - t0
        files = sorted(results.glob("phases*.json"))
        if not files:
            raise SystemExit(f"the run wrote no phases.json (exit {run.returncode}):\n{run.output[-3000:]}")
        table: dict[str, dict[str, float]] = {}
        for f in files:
            table.update(json.loads(f.read_text()))
        outcomes = run.outcomes()
    print(render(rows_of(table), wall, args.markdown))
    print(f"verdicts: {dict(sorted((o, list(outcomes.values()).count(o)) for o in set(outcomes.values())))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
