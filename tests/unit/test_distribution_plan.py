"""Every rule runs on a full distribution in CI: the healthy test-image run (tests/e2e/test_image_boot.py)
selects each rule once, on one controller (tests/e2e/distribution.py), and a rule added to the suite
without a place in that plan fails here, not silently never on a distribution. The rules outside the
default suite (--with-rules) are not in that run: their e2e tests run them on the embedded guest."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from model.rules import RULE_MODULES, opt_in
from tests.e2e.distribution import ON_THE_TEST_IMAGE, cases, selection

ROOT = Path(__file__).resolve().parents[2]


def test_every_rule_has_a_controller_on_the_test_image() -> None:
    assert set(ON_THE_TEST_IMAGE) == {m.RULE for m in RULE_MODULES if not opt_in(m.RULE)}
    assert set(ON_THE_TEST_IMAGE.values()) == {"virtio-scsi", "virtio-blk"}  # both drivers load and are recorded


def test_the_selection_collects_each_rule_once_on_its_controller(tmp_path: Path) -> None:
    """The ``-k`` expression, given to the suite's own collection with both controllers: one test per
    rule, on the plan's controller, and no other."""
    pytest.importorskip("libvirt")  # the suite's collection imports the libvirt backend (tox -e unit has none)
    proc = subprocess.run([sys.executable, "-m", "pytest", "suites", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "--results-dir", str(tmp_path / "r"), "--store", "none", "--controllers", "virtio-scsi,virtio-blk", "-k", selection(ON_THE_TEST_IMAGE)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    collected = [line for line in proc.stdout.splitlines() if line.startswith("suites/")]
    modules = {f"suites/test_{r.replace('-', '_')}.py": r for r in ON_THE_TEST_IMAGE}
    by_rule: dict[str, str] = {}
    for nodeid in collected:
        rule = modules[nodeid.partition("::")[0]]
        assert rule not in by_rule, (rule, by_rule.get(rule), nodeid)
        by_rule[rule] = nodeid.partition("[")[2].rstrip("]")
    assert {f"{r}[{c}]" for r, c in by_rule.items()} == set(cases(ON_THE_TEST_IMAGE))
