"""Every rule is two files and one page, and its module declares the same interface
(model/judging/spec.py's ``RuleModule``): ``RULE``, ``METRICS``, ``MIN_EFFECTS``, ``BLAME``,
``DEFAULT_REPEATS``, ``REPEATABLE``, ``HOST_CPU_BOUND`` and one ``judge_*`` function that returns a
``RuleVerdict``; every module of model/rules/ is a rule, and model/rules/__init__.py finds each; measure/
imports none."""

from __future__ import annotations

import inspect
import re
import sys
import typing
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType

import pytest

from model.across.run_to_run import MIN_EFFECT_FLOOR
from model.blame import TRAIL_KEYS, BlameSettings
from model.judging.spec import DIRECTIONS, MetricSpec, RuleModule
from model.judging.verdict import RuleVerdict
from model.rules import RULE_MODULES, rule_module
from tests.unit.test_layering import import_graph

ROOT = Path(__file__).resolve().parents[2]

MODULES = pytest.mark.parametrize("module", RULE_MODULES, ids=[m.RULE for m in RULE_MODULES])


def test_every_module_of_model_rules_is_a_rule() -> None:
    files = {p.stem for p in (ROOT / "model" / "rules").glob("*.py")} - {"__init__"}
    assert sorted(files) == sorted(m.RULE.replace("-", "_") for m in RULE_MODULES), \
        "model/rules/ holds rules and nothing else (the verdict machinery is model/judging/)"


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
def test_the_module_declares_every_name_of_the_interface(module: ModuleType) -> None:
    """model/rules/__init__.py refuses a module without them at import; this checks each found, by the Protocol's
    own names."""
    missing = [name for name in typing.get_type_hints(RuleModule) if not hasattr(module, name)]
    assert missing == [], f"{module.__name__} declares no {', '.join(missing)} (model/judging/spec.py)"


@MODULES
def test_blame_settings_name_settings_a_trail_follows(module: ModuleType) -> None:
    assert isinstance(module.BLAME, BlameSettings) and isinstance(module.BLAME.keys, frozenset)
    assert module.BLAME.keys <= set(TRAIL_KEYS), sorted(module.BLAME.keys - set(TRAIL_KEYS))


@MODULES
def test_repeats_are_declared(module: ModuleType) -> None:
    assert type(module.DEFAULT_REPEATS) is int and module.DEFAULT_REPEATS >= 1
    assert type(module.REPEATABLE) is bool
    assert module.REPEATABLE or module.DEFAULT_REPEATS == 1, "a rule --repeats does not apply to measures once"


@MODULES
def test_host_cpu_bound_is_a_tuple_of_patterns(module: ModuleType) -> None:
    assert isinstance(module.HOST_CPU_BOUND, tuple)
    for pattern in module.HOST_CPU_BOUND:
        assert isinstance(pattern, str)
        re.compile(pattern)


def test_a_rule_is_found_by_its_name() -> None:
    assert [rule_module(m.RULE) for m in RULE_MODULES] == list(RULE_MODULES)
    with pytest.raises(KeyError):
        rule_module("no-such-rule")


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


def test_a_module_of_model_rules_that_is_no_rule_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the package does with a module that declares less than a rule: it names what is missing."""
    from model import rules

    module = ModuleType("model.rules.not_a_rule")
    module.RULE = "not-a-rule"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "model.rules.not_a_rule", module)
    with pytest.raises(TypeError, match=r"model/rules/not_a_rule\.py declares no METRICS, MIN_EFFECTS, BLAME"):
        rules._declared("not_a_rule")
