"""A rule whose only failure was a bound overrun while the host held the guest's vCPUs back reached no
verdict: the test ends in ERROR (HostBusy, exit 10), never a pass, its verdict and numbers kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures.outcomes import RuleFailure
from model.judging.host_busy import HostBusy
from model.rules.hotplug import judge_hotplug
from reports.records import Record
from suites.assertions import conclude
from tests.model.test_host_busy import LATE_BUSY, LATE_QUIET


def test_an_unjudged_bound_ends_in_error_never_a_pass(tmp_path: Path) -> None:
    record = Record(nodeid="suites/test_hotplug.py::test_hotplug[x]", rule="hotplug", config="x")
    with pytest.raises(HostBusy, match=r"hotplug on x could not be judged: the host was busy: .*60\.67 %"):
        conclude(judge_hotplug(LATE_BUSY), record, "x", tmp_path)
    assert record.verdict is not None and record.verdict.properties["seen_vcpu_wait_pct"] == 60.67


def test_an_overrun_with_the_vcpus_not_waiting_is_a_verdict(tmp_path: Path) -> None:
    record = Record(nodeid="suites/test_hotplug.py::test_hotplug[x]", rule="hotplug", config="x")
    with pytest.raises(RuleFailure, match="past the bound of 5 s"):
        conclude(judge_hotplug(LATE_QUIET), record, "x", tmp_path)
    assert record.blame  # a layer is named, as for every failure
