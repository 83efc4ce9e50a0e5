"""Two or more runs side by side, from their JUnit files alone: what was tested (the suite
properties: image, guest OS and kernel, each controller's driver and boot settings) and each
rule's verdict per configuration.

    python -m reports.compare results/A/junit.xml results/B/junit.xml [--all]

Prints one row per key, one column per run; rows where the runs differ are marked ``*`` (with
``--all`` the equal rows are printed too). Exit code 0. A file that is not a vioconform JUnit
file is named with the reason (exit 2).
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path


class NotAJunitFile(ValueError):
    """A file that is not a JUnit file the suite wrote; ``str()`` says which and why."""


def read_run(path: Path) -> dict[str, str]:
    """A run's suite properties, and ``verdict.<case name>`` -> passed/failed/error/skipped per test case."""
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
        out[p.get("name", "")] = p.get("value", "")
    for case in suite.iter("testcase"):
        kind = next((k for k in ("failure", "error", "skipped") if case.find(k) is not None), "passed")
        out[f"verdict.{case.get('name', '')}"] = {"failure": "failed"}.get(kind, kind)
    return out


def side_by_side(runs: Sequence[dict[str, str]], everything: bool = False) -> list[list[str]]:
    """Rows of [mark, key, value per run]: the keys of every run in a stable order (what was
    tested, then the verdicts); a key a run lacks is "-". Only rows that differ unless ``everything``."""
    keys = sorted({k for r in runs for k in r}, key=lambda k: (k.startswith("verdict."), k))
    rows = []
    for k in keys:
        values = [r.get(k, "-") for r in runs]
        differ = len(set(values)) > 1
        if differ or everything:
            rows.append(["*" if differ else " ", k, *values])
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m reports.compare", description=__doc__.split("\n\n")[0])
    ap.add_argument("junit", nargs="+", type=Path, help="the runs' junit.xml files")
    ap.add_argument("--all", action="store_true", help="print the rows that are equal too")
    args = ap.parse_args(argv)
    try:
        runs = [read_run(p) for p in args.junit]
    except NotAJunitFile as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    rows = side_by_side(runs, args.all)
    header = [" ", "key", *(str(p) for p in args.junit)]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for r in [header, *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    if not rows:
        print("(the runs do not differ)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
