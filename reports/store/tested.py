"""What two or more runs tested, side by side, from their JUnit files (``python -m reports.compare --tested``).

What was tested (the suite properties: image, guest OS and kernel, each controller's driver and boot
settings) and each rule's verdict per configuration, one column per run; a row where the runs differ
is marked ``*``. It reads the files alone: no store is opened.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

from reports.results import not_regular
from reports.store.read import RUN_ID_KEY


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


def print_table(header: list[str], rows: list[list[str]]) -> None:
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
    print_table([" ", "key", *(str(p) for p in paths)], rows)
    if not rows:
        print("(the runs do not differ)")
    return 0
