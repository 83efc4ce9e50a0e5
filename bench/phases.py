"""Where the default suite's time goes: per rule and controller, per phase (measure/phase_times.py).

Runs the default suite (every rule on virtio-scsi and virtio-blk, one guest) as a user does and
prints, from the run's ``phases.json``: boot, set-up, fio start, ramp, measured window, fio stop, the kernel-log check,
teardown and everything else (``other``: settings reads, cache drops, SSH round trips), in seconds,
then each test's guest commands (``commands``) and the seconds they took (``cmd-s``, across the phases),
and the run's wall time.

    python -m bench.phases [--controllers virtio-scsi,virtio-blk] [-k EXPR] [--markdown] [extra suite args]
    python -m bench.phases --test-image     # the same on the project's cloud-init test image (--image)
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from bench.goals import against, suite_goal_s
from bench.suite_run import run_suite_at
from bench.testimage import ensure_test_image
from measure.phase_times import COMMAND_S, COMMANDS, PHASES

COLUMNS = (*PHASES, "other", "total", COMMANDS, COMMAND_S)
#: The columns' headings where they are not their keys.
HEADINGS = {COMMANDS: "commands", COMMAND_S: "cmd-s"}
DEFAULT_CONTROLLERS = "virtio-scsi,virtio-blk"


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
        lines.append("| test | " + " | ".join(HEADINGS.get(c, c) for c in COLUMNS) + " |")
        lines.append("|---|" + "---:|" * len(COLUMNS))
        for key in sorted(rows):
            lines.append(f"| {key} | " + " | ".join(f"{rows[key][c]:.1f}" for c in COLUMNS) + " |")
        lines.append("| **sum** | " + " | ".join(f"**{sums[c]:.1f}**" for c in COLUMNS) + " |")
    else:
        width = max((len(k) for k in rows), default=10)
        lines.append(f"{'test':<{width}} " + " ".join(f"{HEADINGS.get(c, c):>8}" for c in COLUMNS))
        for key in sorted(rows):
            lines.append(f"{key:<{width}} " + " ".join(f"{rows[key][c]:8.1f}" for c in COLUMNS))
        lines.append(f"{'sum':<{width}} " + " ".join(f"{sums[c]:8.1f}" for c in COLUMNS))
    lines.append(f"wall time of the run: {wall_s:.1f} s (the tests' sum {sums['total']:.1f} s; the rest is "
                 "pytest's start, collection and the checks before any guest)")
    return "\n".join(lines)


def goal_line(wall_s: float, image: bool, whole_default: bool) -> str:
    """The run's wall time against the default suite's goal (bench/goals.py), for the whole default
    suite only: a selection of it (``-k``, other controllers) has no goal of its own."""
    where = "an image (--image)" if image else "the embedded guest"
    if not whole_default:
        return f"wall {wall_s:.1f} s: a part of the default suite, which has no goal of its own"
    return f"the default suite on {where}: wall {wall_s:.1f} s ({against(wall_s, suite_goal_s(image))})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.phases", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--controllers", default=DEFAULT_CONTROLLERS)
    ap.add_argument("-k", dest="select", default=None)
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table (for docs/benchmarks.md)")
    ap.add_argument("--test-image", action="store_true",
                    help="boot the project's cloud-init test image (built once, then cached) instead of the embedded guest")
    args, extra = ap.parse_known_args(argv)
    if args.test_image:
        # the test image's boot takes 40-75 s on an idle host and several times that beside other guests
        extra = ["--image", str(ensure_test_image(print).path), "--boot-timeout", "900", *extra]
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
        accelerator = run.suite_properties().get("qemu.accel", "unknown")
    # TCG's and KVM's figures are apart on docs/benchmarks.md: every table says which it is
    print(f"accelerator: {accelerator}")
    print(render(rows_of(table), wall, args.markdown))
    default = args.select is None and args.controllers == DEFAULT_CONTROLLERS
    print(goal_line(wall, args.test_image or "--image" in extra, default))
    print(f"verdicts: {dict(sorted((o, list(outcomes.values()).count(o)) for o in set(outcomes.values())))}")
    others = {name: o for name, o in sorted(outcomes.items()) if o != "passed"}
    if others:
        print(f"not passed: {others}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
