"""--with-rules: a rule whose module says OPT_IN runs only where it names it (fixtures/opt_in.py); its
tests are deselected otherwise and the run says which; a name that is not such a rule is refused."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.opt_in import with_rules
from model.rules import limits

ROOT = Path(__file__).resolve().parents[2]
#: A run of the suite's collection with limits made opt-in (the module's OPT_IN set before the plugin loads).
COLLECT = """
import sys
import model.rules.limits
model.rules.limits.OPT_IN = True
import pytest
sys.exit(pytest.main(["suites", "--collect-only", "-q", "-p", "no:cacheprovider", *sys.argv[1:]]))
"""


def _collected(*args: str) -> tuple[list[str], str]:
    proc = subprocess.run([sys.executable, "-c", COLLECT, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [line for line in proc.stdout.splitlines() if line.startswith("suites/")], proc.stdout


def test_an_opt_in_rule_is_left_out_unless_named() -> None:
    tests, said = _collected()
    assert tests and not any("test_limits" in t for t in tests)
    assert "outside the default suite, not run: limits (add them: --with-rules limits)" in said
    tests, _ = _collected("--with-rules", "limits")
    assert any("test_limits" in t for t in tests) and any("test_queue_depth" in t for t in tests)
    tests, _ = _collected("--with-rules", "all")
    assert any("test_limits" in t for t in tests)


def test_with_rules_takes_only_rules_outside_the_default_suite(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "OPT_IN", True, raising=False)
    assert with_rules("limits") == ("limits",) and with_rules("all") == ("limits",)
    not_outside = "'queue-depth' is not a rule outside the default suite; the rules outside it are: limits"
    for text, said in (("queue-depth", not_outside), (",", "',' names no rule")):
        with pytest.raises(argparse.ArgumentTypeError) as e:
            with_rules(text)
        assert str(e.value).startswith(said)
