"""--with-rules: a rule whose module says OPT_IN (identity, block-size) runs only where it names it
(fixtures/opt_in.py); its tests are deselected otherwise and the run says which; a name that is not
such a rule is refused."""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from fixtures.options_results import with_rules
from model.rules import opt_in_rules

ROOT = Path(__file__).resolve().parents[2]


def _collected(*args: str) -> tuple[list[str], str]:
    # the session makes its results directory before it collects: one of its own, never the checkout's
    with tempfile.TemporaryDirectory(prefix="vioc-opt-in-") as out:
        proc = subprocess.run([sys.executable, "-m", "pytest", "suites", "--collect-only", "-q", "-p", "no:cacheprovider",
                               "--results-dir", f"{out}/r", "--store", "none", *args], cwd=ROOT,
                              capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [line for line in proc.stdout.splitlines() if line.startswith("suites/")], proc.stdout


def test_the_rules_outside_the_default_suite_are_identity_and_block_size() -> None:
    assert opt_in_rules() == ("block-size", "identity", "throttle", "write-cache")


def test_an_opt_in_rule_is_left_out_unless_named() -> None:
    pytest.importorskip("libvirt")  # the suite's collection imports the libvirt backend (tox -e unit has none)
    tests, said = _collected()
    assert tests and not any("test_identity" in t or "test_block_size" in t for t in tests)
    assert len({t.partition("::")[0] for t in tests}) == 13  # the default suite: 13 rules
    assert ("outside the default suite, not run: block-size, identity, throttle, write-cache (add them: "
            "--with-rules block-size,identity,throttle,write-cache)") in said
    tests, _ = _collected("--with-rules", "identity")
    assert any("test_identity" in t for t in tests) and not any("test_block_size" in t for t in tests)
    tests, _ = _collected("--with-rules", "all")
    assert len({t.partition("::")[0] for t in tests}) == 13 + len(opt_in_rules())


def test_with_rules_takes_only_rules_outside_the_default_suite() -> None:
    assert with_rules("identity") == ("identity",) and with_rules("all") == ("block-size", "identity", "throttle", "write-cache")
    not_outside = ("'queue-depth' is not a rule outside the default suite; the rules outside it are: block-size, identity, "
                   "throttle, write-cache")
    for text, said in (("queue-depth", not_outside), (",", "',' names no rule")):
        with pytest.raises(argparse.ArgumentTypeError) as e:
            with_rules(text)
        assert str(e.value).startswith(said)
