"""The parallel guest lane's work units (tests/conftest.py): a module whose tests share an expensive
module fixture must be one unit, or each worker that picks one of its tests makes the fixture again
(a whole-suite guest run is minutes under CI load)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import CHEAP_MODULE_FIXTURES, SHARED_MODULES, work_unit

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
    d = "tests/e2e/test_image_boot.py::test_tcq_off_fails_queue_depth_on_the_image_booted_by_uefi"
    assert work_unit(c) == c and work_unit(d) == d
