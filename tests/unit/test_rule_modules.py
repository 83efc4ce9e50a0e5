"""Every rule is two files and one page, and its module declares the same interface
(model/rules/spec.py): ``RULE``, ``METRICS``, ``MIN_EFFECTS`` and one ``judge_*`` function that
returns a ``RuleVerdict``; model/rules/__init__.py lists every rule module; measure/ imports none."""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType

import pytest

from model.across.run_to_run import MIN_EFFECT_FLOOR
from model.rules import RULE_MODULES
from model.rules.spec import DIRECTIONS, MetricSpec
from model.rules.verdict import RuleVerdict
from tests.unit.test_layering import import_graph

ROOT = Path(__file__).resolve().parents[2]
#: The modules of model/rules/ that are no rule: the package, the verdict, the figures, what a rule
#: declares, and the comparison of any rule with a stored baseline.
NOT_RULES = {"__init__", "verdict", "figures", "spec", "against_baseline"}

MODULES = pytest.mark.parametrize("module", RULE_MODULES, ids=[m.RULE for m in RULE_MODULES])


def test_every_rule_module_is_listed() -> None:
    files = {p.stem for p in (ROOT / "model" / "rules").glob("*.py")} - NOT_RULES
    assert sorted(files) == sorted(m.RULE.replace("-", "_") for m in RULE_MODULES), \
        "add the rule module to RULE_MODULES in model/rules/__init__.py (or its name to NOT_RULES here)"


@MODULES
def test_the_rule_is_two_files_and_a_page(module: ModuleType) -> None:
    stem = module.__name__.rpartition(".")[2]
    assert stem.replace("_", "-") == module.RULE
    suite = ROOT / "suites" / f"test_{stem}.py"
    assert f'@pytest.mark.rule("{module.RULE}")' in suite.read_text()
    assert (ROOT / "docs" / "rules" / f"{module.RULE}.md").is_file()


@MODULES
def test_metric_specs_are_patterns_with_a_unit_and_a_direction(module: ModuleType) -> None:
    assert isinstance(module.METRICS, tuple) and module.METRICS
    for pattern, spec in module.METRICS:
        re.compile(pattern)
        assert isinstance(spec, MetricSpec) and spec.direction in DIRECTIONS, pattern


@MODULES
def test_minimum_effects_are_measured_fractions(module: ModuleType) -> None:
    assert isinstance(module.MIN_EFFECTS, Mapping)
    assert all(isinstance(v, float) and v >= MIN_EFFECT_FLOOR for v in module.MIN_EFFECTS.values())


@MODULES
def test_one_judge_returns_the_verdict(module: ModuleType) -> None:
    judges = [fn for name, fn in inspect.getmembers(module, inspect.isfunction)
              if fn.__module__ == module.__name__ and name.startswith("judge_")]
    assert len(judges) == 1, [j.__name__ for j in judges]
    assert typing.get_type_hints(judges[0])["return"] is RuleVerdict


def test_measure_imports_no_rule_module() -> None:
    """A measurement returns measurement types; the suite or the rule turns them into the rule's figures."""
    edges = [f"{m} imports {t}" for m, targets in import_graph().items() if m.startswith("measure")
             for t in targets if t.startswith("model.rules")]
    assert edges == []
