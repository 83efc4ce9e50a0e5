"""bench.rules' choice of rules for each run: the suite's --with-rules and -k as given, and a fault whose
own rule is outside the default suite (wce-lie: write-cache) runs with that rule added; the first healthy
run's baseline where it saved one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bench.rules import compared_with, selection
from model.faults import FAULTS

ROOT = Path(__file__).resolve().parents[2]


def test_the_runs_take_the_suites_own_selection() -> None:
    assert selection("", "") == []
    assert selection("write-cache", "write_cache") == ["--with-rules", "write-cache", "-k", "write_cache"]


def test_a_fault_of_a_rule_outside_the_default_suite_adds_its_rule() -> None:
    assert selection("", "", FAULTS["wce-lie"]) == ["--with-rules", "write-cache"]
    assert selection("identity", "", FAULTS["wce-lie"]) == ["--with-rules", "identity,write-cache"]
    assert selection("write-cache", "", FAULTS["wce-lie"]) == ["--with-rules", "write-cache"]
    assert selection("all", "", FAULTS["wce-lie"]) == ["--with-rules", "all"]
    assert selection("", "", FAULTS["flush-dropped"]) == []  # direct-io is in the default suite


def test_later_runs_compare_with_the_baseline_only_where_one_was_saved(tmp_path: Path) -> None:
    base = tmp_path / "baseline.json"
    assert compared_with(base) == []  # -k write_cache: the suite saved no baseline (exit 4 when given one)
    base.write_text("{}")
    assert compared_with(base) == ["--baseline", str(base)]


def test_an_unknown_fault_is_refused_before_any_run() -> None:
    done = subprocess.run([sys.executable, "-m", "bench.rules", "--faults", "--fault", "wce-lies"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "argument --fault: invalid choice: 'wce-lies' (choose from" in done.stderr and "'wce-lie'" in done.stderr
    assert done.stdout == ""  # no run started
