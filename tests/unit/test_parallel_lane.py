"""The parallel guest lane's work units (tests/conftest.py): a module whose tests share an expensive
module fixture must be one unit, or each worker that picks one of its tests makes the fixture again
(a whole-suite guest run is minutes under CI load)."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import pytest

from tests import lane_order
from tests.conftest import CHEAP_MODULE_FIXTURES, SHARED_MODULES, work_unit
from tests.lane_order import LONG_SECONDS, UNIT_SECONDS, longest_first, unit_seconds

ROOT = Path(__file__).resolve().parents[2]


def test_every_module_fixture_outside_the_fast_lane_is_accounted_for() -> None:
    found = set()
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(("tests/unit/", "tests/model/")):
            continue
        if re.search(r'scope="(module|package|session)"', path.read_text()):
            found.add(rel)
    unlisted = found - set(SHARED_MODULES) - set(CHEAP_MODULE_FIXTURES)
    assert not unlisted, f"add to SHARED_MODULES or CHEAP_MODULE_FIXTURES in tests/conftest.py: {sorted(unlisted)}"
    for rel in (*SHARED_MODULES, *CHEAP_MODULE_FIXTURES):
        assert (ROOT / rel).is_file(), rel
    assert not set(SHARED_MODULES) & set(CHEAP_MODULE_FIXTURES)


def test_a_shared_module_is_one_unit_and_other_tests_are_their_own() -> None:
    a = "tests/e2e/test_rules_guest.py::test_healthy_guest_passes_every_rule"
    b = "tests/e2e/test_rules_guest.py::test_fault_fails_its_rule[io-breakup]"
    assert work_unit(a) == work_unit(b) == "tests/e2e/test_rules_guest.py"
    c = "tests/e2e/test_image_boot.py::test_healthy_image_passes_the_rules_and_is_left_unchanged"
    d = "tests/e2e/test_image_boot.py::test_a_guest_with_another_host_key_is_refused_with_the_remedy"
    assert work_unit(c) == c and work_unit(d) == d


@dataclass(frozen=True)
class FakeItem:
    """What the lane's order reads of a collected test: its node id and whether it is marked ``long``."""

    nodeid: str
    long: bool = False

    def get_closest_marker(self, name: str) -> object | None:
        return object() if name == "long" and self.long else None


def test_the_lane_hands_out_the_longest_units_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """By each unit's time in the lane, not by its number of tests: the shared whole-suite module (one
    unit of several tests) before the healthy image's single test, a long test missing from the table
    after the timed ones longer than a long test is taken to be, the rest in pytest's order; a shared
    module's tests stay together. The times are this test's own, so a new measurement changes no order here."""
    shared = "tests/e2e/test_rules_guest.py"
    image = "tests/e2e/test_image_boot.py::test_healthy_image_passes_the_rules_and_is_left_unchanged"
    monkeypatch.setattr(lane_order, "UNIT_SECONDS", {shared: 300, image: 200, "tests/e2e/test_controllers.py": 100,
                                                     "tests/e2e/test_d.py::test_timed_short": LONG_SECONDS - 1})
    items = [FakeItem("tests/e2e/test_a.py::test_quick"),
             FakeItem("tests/e2e/test_d.py::test_timed_short"),
             FakeItem(f"{shared}::test_healthy_guest_passes_every_rule"),
             FakeItem("tests/e2e/test_b.py::test_untimed_but_long", long=True),
             FakeItem(image),
             FakeItem("tests/e2e/test_c.py::test_quick_too"),
             FakeItem(f"{shared}::test_fault_fails_its_rule[io-breakup]"),
             FakeItem("tests/e2e/test_controllers.py::test_queue_depth_passes_on_every_controller", long=True)]
    ordered = cast(list[pytest.Item], list(items))
    longest_first(ordered, work_unit)
    assert [i.nodeid for i in ordered] == [
        f"{shared}::test_healthy_guest_passes_every_rule", f"{shared}::test_fault_fails_its_rule[io-breakup]", image,
        "tests/e2e/test_controllers.py::test_queue_depth_passes_on_every_controller",
        "tests/e2e/test_b.py::test_untimed_but_long", "tests/e2e/test_d.py::test_timed_short",
        "tests/e2e/test_a.py::test_quick", "tests/e2e/test_c.py::test_quick_too"]
    assert unit_seconds(shared, []) > unit_seconds(image, [])


def test_every_timed_unit_is_a_test_of_the_lane() -> None:
    """A renamed or removed test leaves no time behind in tests/lane_order.py (it would order nothing)."""
    for key in UNIT_SECONDS:
        module, _, name = key.partition("::")
        path = ROOT / module
        assert path.is_file() and not module.startswith(("tests/unit/", "tests/model/")), key
        assert (module in SHARED_MODULES) == (not name), key  # a shared module is timed whole, a test alone
        if name:
            defined = {n.name for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.FunctionDef)}
            assert name in defined, key
