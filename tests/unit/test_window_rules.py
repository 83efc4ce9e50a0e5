"""``--window-s`` governs every rule that measures a steady-state window, and its help names them.

Read from the suites' source: every call of ``measure.window.measure`` in suites/ takes the window
from the options (``suite_options.window_s``), never a number of its own, and the rules whose suites
call it are exactly ``WINDOW_RULES``, which ``--help`` lists.
"""

from __future__ import annotations

import ast
from pathlib import Path

from fixtures.options_measure import WINDOW_RULES
from tests.unit.test_help_defaults import group, rendered_help

SUITES = Path(__file__).resolve().parents[2] / "suites"


def _rule_of(tree: ast.Module) -> str | None:
    """The rule a suite module's test is marked with (``@pytest.mark.rule("...")``)."""
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "rule"
                and node.args and isinstance(node.args[0], ast.Constant)):
            return str(node.args[0].value)
    return None


def _windows(tree: ast.Module) -> list[str]:
    """The window argument of every ``measure(disk, job, window_s, ...)`` call, as source text."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "measure":
            given = node.args[2] if len(node.args) > 2 else next(k.value for k in node.keywords if k.arg == "window_s")
            found.append(ast.unparse(given))
    return found


def windows_by_rule() -> dict[str, list[str]]:
    by_rule: dict[str, list[str]] = {}
    for path in sorted(SUITES.glob("test_*.py")):
        tree = ast.parse(path.read_text())
        rule, windows = _rule_of(tree), _windows(tree)
        if windows:
            assert rule is not None, f"{path.name} measures a window but names no rule"
            by_rule[rule] = windows
    return by_rule


def test_every_measured_window_is_the_option() -> None:
    own = {rule: w for rule, windows in windows_by_rule().items() for w in windows if w != "suite_options.window_s"}
    assert not own, f"rules that measure a window of their own, not --window-s: {own}"


def test_the_window_rules_are_those_that_measure_one() -> None:
    assert sorted(windows_by_rule()) == sorted(WINDOW_RULES)


def test_the_help_names_every_window_rule() -> None:
    text = rendered_help(group()["--window-s"])
    assert all(rule in text for rule in WINDOW_RULES), text
