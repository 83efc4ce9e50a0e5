"""fixtures.progress: the ETA from an earlier run's phases, the elapsed-time clock."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from fixtures.progress import Earlier, Estimate, Progress, clock, durations_of, image_to_build


def test_clock() -> None:
    assert [clock(s) for s in (0, 4.4, 59.6, 65.2, 3600)] == ["0s", "4s", "1m00s", "1m05s", "60m00s"]


def test_durations_come_from_every_phases_file_of_a_results_directory(tmp_path: Path) -> None:
    (tmp_path / "phases.gw0.json").write_text(json.dumps({"a": {"total": 10.0, "window": 2.0}, "(session)": {}}))
    (tmp_path / "phases.gw1.json").write_text(json.dumps({"b": {"total": 4.5}}))
    (tmp_path / "phases.json").write_text("{not json")
    assert durations_of(tmp_path) == Earlier({"a": 10.0, "b": 4.5}, 0.0)


def test_an_earlier_runs_one_offs_are_no_tests_own_time(tmp_path: Path) -> None:
    """The first test's set-up (``once``: build, probe, boot) is the guest's start, less the build a
    cached image does not repeat; a run that recorded no ``once`` counts its ``boot`` phase."""
    (tmp_path / "phases.json").write_text(json.dumps({
        "a": {"total": 200.0, "once": 190.0, "build": 150.0, "boot": 30.0}, "b": {"total": 6.0}}))
    assert durations_of(tmp_path) == Earlier({"a": 10.0, "b": 6.0}, 40.0)
    (tmp_path / "phases.json").write_text(json.dumps({"a": {"total": 50.0, "boot": 35.0}, "b": {"total": 6.0}}))
    assert durations_of(tmp_path) == Earlier({"b": 6.0}, 35.0)


def test_eta_from_an_earlier_run_counts_an_unknown_test_as_its_mean() -> None:
    est = Estimate(["a", "b", "c"], Earlier({"a": 10.0, "b": 20.0}))
    assert est.remaining_s() == 10.0 + 20.0 + 15.0
    est.finished("a", 10.0)  # at the earlier run's pace
    assert est.remaining_s() == 35.0
    assert est.line("a", "PASSED", 12.0) == "1/3 rule tests done, 12s elapsed, ETA 35s: PASSED a"
    est.finished("b", 1.0)
    est.finished("c", 1.0)
    assert est.line("c", "FAILED", 14.0).startswith("3/3 rule tests done, 14s elapsed, done")


def test_a_first_run_has_no_eta_until_its_own_tests_give_a_mean() -> None:
    est = Estimate(["a", "b"], Earlier())
    assert est.remaining_s() is None and "ETA unknown" in est.line("x", "", 0.0)
    est.finished("a", 8.0)
    assert est.remaining_s() == 8.0


def test_the_guest_start_counts_until_a_test_is_done() -> None:
    est = Estimate(["a", "b"], Earlier({"a": 10.0, "b": 20.0}, 40.0))
    assert est.remaining_s() == 70.0
    est.finished("a", 10.0)
    assert est.remaining_s() == 20.0


def test_a_test_left_counts_as_its_rules_time_on_another_configuration() -> None:
    """Without an earlier run: the second controller's tests take what the first's took (a rule test
    runs 1-30 s: the mean of all would miss each by up to 3x)."""
    tests = ["t.py::q[scsi]", "t.py::a[scsi]", "t.py::q[blk]", "t.py::a[blk]", "t.py::z[blk]"]
    est = Estimate(tests, Earlier())
    est.finished("t.py::q[scsi]", 30.0)
    est.finished("t.py::a[scsi]", 2.0)
    assert est.remaining_s() == 30.0 + 2.0 + 16.0  # z: no rule time, the mean
    later = Estimate(tests, Earlier({"t.py::q[scsi]": 20.0, "t.py::a[scsi]": 4.0}))
    assert later.remaining_s() == 20.0 + 4.0 + 20.0 + 4.0 + 12.0


def test_a_run_that_builds_the_image_gives_no_eta_before_its_first_test(caplog: pytest.LogCaptureFixture) -> None:
    """An earlier run's tests tell nothing of the minutes an image build takes: the start line says
    when the first ETA comes instead of a number the build would make false."""
    config: Any = None
    building_said = {True: "ETA after the first test (the guest image is not cached: this run builds it first)",
                     False: "ETA 30s (from an earlier run)"}
    for building, said in building_said.items():
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="vioconform.progress"):
            Progress(config, lambda: Earlier({"suites/t.py::a[c]": 30.0}), building.__bool__)._start(
                ["suites/t.py::a[c]"])
        assert caplog.records[-1].getMessage() == f"1 rule tests; {said}"
    assert not image_to_build("vsphere", None, None) and not image_to_build("libvirt", Path("/srv/x.qcow2"), None)


def test_an_earlier_runs_times_go_at_this_runs_pace() -> None:
    """Recorded: the earlier run's alignment took 16 s on a loaded host, this run's 6 s on an idle one;
    every test left then runs at about that pace."""
    est = Estimate(["t::a[s]", "t::b[s]", "t::a[b]"], Earlier({"t::a[s]": 16.0, "t::b[s]": 30.0, "t::a[b]": 16.0}))
    assert est.pace() == 1.0 and est.remaining_s() == 62.0
    est.finished("t::a[s]", 6.0)
    assert est.pace() == pytest.approx(6 / 16) and est.remaining_s() == pytest.approx((30.0 + 16.0) * 6 / 16)
    est.finished("t::b[s]", 300.0)  # one test's time never stretches the rest past the bound
    assert est.pace() == 5.0
