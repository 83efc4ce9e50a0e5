"""Every property a rule records has a spec, declared once: in its own rule module (its METRICS) or
among the shared ones (model/across/metrics.py's SHARED_METRICS), never by falling back to a unit-less
parameter; and each name resolves to the same unit, direction and minimum effect as when
model/across/metrics.py and model/across/moves.py held the per-rule tables (tests/data/metric-specs.tsv)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from model.across.metrics import METRICS, SHARED_METRICS, describe
from model.across.moves import MIN_EFFECT, MIN_EFFECTS, SHARED_MIN_EFFECTS
from model.judging.spec import Metrics
from model.rules import RULE_MODULES
from model.rules.queue_depth import judge_queue_depth
from tests.unit.rule_records import recorded, shared_recorded
from tests.unit.test_queue_depth_verdict import HEALTHY

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "metric-specs.tsv"
SHARED = "the shared declarations"


def _owners() -> list[tuple[re.Pattern[str], str]]:
    """Every declared pattern with who declares it: a rule's name, or SHARED."""
    tables: list[tuple[str, Metrics]] = [(m.RULE, m.METRICS) for m in RULE_MODULES] + [(SHARED, SHARED_METRICS)]
    return [(re.compile(pattern), owner) for owner, table in tables for pattern, _ in table]


def owners_of(prop: str) -> list[str]:
    """Who declares the patterns ``prop``'s metric name matches (one, where the tables are right)."""
    name = describe(prop).name
    return [owner for pattern, owner in _owners() if pattern.fullmatch(name)]


def test_every_rule_is_driven() -> None:
    """tests/unit/rule_records.py drives every rule's judge: a new rule needs its inputs there."""
    assert sorted(recorded()) == sorted(m.RULE for m in RULE_MODULES)


@pytest.mark.parametrize("rule", [m.RULE for m in RULE_MODULES])
def test_every_property_a_rule_records_has_its_own_spec(rule: str) -> None:
    names = recorded()[rule]
    assert names
    wrong = {n: owners_of(n) for n in names if owners_of(n) not in ([rule], [SHARED])}
    assert wrong == {}, f"properties {rule} records whose spec is not one of its own METRICS or a shared one " \
                        "(no spec: []; several: each declares it)"
    assert all(describe(n).known for n in names)


def test_what_every_rule_records_besides_has_a_shared_spec() -> None:
    names = shared_recorded()
    assert {n: owners_of(n) for n in names if owners_of(n) != [SHARED]} == {}


def test_no_two_declarations_match_one_name() -> None:
    """The patterns are disjoint over every name a rule writes and every recorded one, so the order in
    which model/across/metrics.py collects them never decides a name's spec."""
    golden = [line.split("\t")[0] for line in GOLDEN.read_text().splitlines()[1:]]
    names = {*golden, *(n for names in recorded().values() for n in names), *MIN_EFFECTS}
    assert {n: owners_of(n) for n in sorted(names) if len(owners_of(n)) > 1} == {}


def test_every_declared_pattern_matches_something_its_rule_records() -> None:
    written = {describe(n).name for names in recorded().values() for n in names} | set(shared_recorded())
    unused = [pattern for pattern, _ in METRICS if not any(re.fullmatch(pattern, n) for n in written)]
    assert unused == [], "declared patterns no rule records a name of (drive the judge in tests/unit/rule_records.py)"


def test_each_minimum_effect_belongs_to_the_rule_that_records_the_metric() -> None:
    for module in RULE_MODULES:
        assert {n: owners_of(n) for n in module.MIN_EFFECTS if owners_of(n) != [module.RULE]} == {}, module.RULE
    assert {n: owners_of(n) for n in SHARED_MIN_EFFECTS if owners_of(n) != [SHARED]} == {}
    tables = [*(m.MIN_EFFECTS for m in RULE_MODULES), SHARED_MIN_EFFECTS]
    assert sum(len(t) for t in tables) == len(MIN_EFFECTS), "a metric's minimum effect is declared twice"
    assert all(MIN_EFFECTS[n] == v for t in tables for n, v in t.items())


def test_the_directions_of_the_numbers_rules_judge_by() -> None:
    qd = judge_queue_depth(HEALTHY, device_queue_depth=128).properties
    directions = {n: describe(n).direction for n in qd}
    assert directions["qd32_host_depth"] == "higher-better" and directions["qd32_host_required"] == "parameter"
    assert directions["iops_scaling"] == "higher-better" and directions["iops_scaling_required"] == "parameter"


def test_every_recorded_name_resolves_as_before() -> None:
    """tests/data/metric-specs.tsv: what describe() and the effective minimum effect were for every
    property name of the recorded runs, every name the minimum-effect table held and every name the
    rules write (tests/unit/rule_records.py), when model/across/metrics.py and model/across/moves.py held the
    per-rule tables. The one change since: ``baseline_worse`` and ``baseline_moved`` are declared
    (known), with the unit and direction they had."""
    rows = [line.split("\t") for line in GOLDEN.read_text().splitlines()[1:]]
    assert len(rows) > 400
    changed = []
    for prop, name, repeat, unit, direction, known, min_effect in rows:
        d = describe(prop)
        now = (d.name, str(d.repeat), d.unit, d.direction, str(d.known).lower(),
               repr(MIN_EFFECTS.get(d.name, MIN_EFFECT)))
        if now != (name, repeat, unit, direction, known, min_effect):
            changed.append(f"{prop}: {(name, repeat, unit, direction, known, min_effect)} -> {now}")
    assert changed == []
