"""The rule a bisect looks for, taken from a failure when --rule is not given: a reproducer bundle's
configuration.json, a stored run's verdicts (--from-run ID --store URL), a results directory; a run whose
failures name several rules, or none, is a usage error naming them (reports/bisect_rule.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reports.bisect_rule import RuleUnknown, resolve_rule
from reports.store import RunData, Store
from tests.unit.test_bisect_runner import BAD, GOOD, bisect_cli, row_of, script
from tests.unit.test_bisect_runner import REPLAY as STAND_IN_REPLAY


def _bundle(tmp_path: Path, rule: str) -> Path:
    script(tmp_path / "bundle" / "replay", STAND_IN_REPLAY)
    (tmp_path / "bundle" / "configuration.json").write_text(json.dumps({"rule": rule, "test_id": "x"}))
    return tmp_path / "bundle"


def _stored(tmp_path: Path, outcomes: dict[str, str]) -> tuple[str, str]:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = Store(url)
    try:
        run_id, _ = store.add_run(RunData({"hypervisor": "libvirt"},
                                          verdicts={(rule, "libvirt:virtio-scsi:latency5ms"): (outcome, "")
                                                    for rule, outcome in outcomes.items()}))
    finally:
        store.close()
    return str(run_id), url


def test_the_rule_comes_from_the_bundle_or_the_one_failed_rule_of_a_stored_run(tmp_path: Path) -> None:
    assert resolve_rule(None, _bundle(tmp_path, "queue-depth"), None, None) == "queue-depth"
    run, url = _stored(tmp_path, {"limits": "passed", "io-size": "failed", "discard": "skipped"})
    assert resolve_rule(None, None, run, url) == "io-size"
    assert resolve_rule("io_size", None, run, url) == "io-size"  # given both ways: they agree


@pytest.mark.parametrize(("outcomes", "said"), [
    ({"limits": "failed", "io-size": "failed"}, "io-size, limits failed in it; give --rule RULE"),
    ({"limits": "passed"}, "no rule failed in it: there is nothing to bisect"),
])
def test_a_run_of_several_failed_rules_or_none_is_refused_naming_them(tmp_path: Path, outcomes: dict[str, str],
                                                                        said: str) -> None:
    run, url = _stored(tmp_path, outcomes)
    with pytest.raises(RuleUnknown, match=said):
        resolve_rule(None, None, run, url)


def test_no_rule_a_disagreement_or_an_unreadable_run_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RuleUnknown, match="give the rule to bisect: --rule RULE, --bundle DIR"):
        resolve_rule(None, None, None, None)
    with pytest.raises(RuleUnknown, match=r"named twice, differently: --rule: limits; --bundle .*: queue-depth"):
        resolve_rule("limits", _bundle(tmp_path, "queue-depth"), None, None)
    with pytest.raises(RuleUnknown, match=r"no junit\.xml in it.*a stored run's id needs --store URL"):
        resolve_rule(None, None, "7", None)


def test_a_bisect_without_rule_bisects_the_bundles_rule(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path, "queue-depth")
    done = bisect_cli("--builds", str(row_of(tmp_path, GOOD, BAD, BAD)), "--bundle", str(bundle),
                      "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "bisect of queue-depth over 3 builds" in done.stdout
    assert f"first bad build: {tmp_path / 'builds' / 'qemu-1'}" in done.stdout.splitlines()
    done = bisect_cli("--builds", str(row_of(tmp_path, GOOD, BAD)), "--out", str(tmp_path / "out2"))
    assert done.returncode == 2 and "give the rule to bisect" in done.stderr
