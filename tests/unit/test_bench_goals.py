"""The benchmarks print the project's speed goals (bench/goals.py) beside what they measure: the first
verdict within 10 s of the process's start, the default suite in 90 s on the embedded guest and in
150 s on an image."""

from __future__ import annotations

import subprocess
import time

import pytest

pytest.importorskip("libvirt")  # the benches import the libvirt backend (tox -e unit has none)

from bench.phases import goal_line
from bench.time_to_verdict import process_age_s, verdict_line


def test_the_first_verdict_is_judged_from_the_process_start_against_10_s() -> None:
    line = verdict_line("virtio-scsi", True, 12.2, 13.9, image=False)
    assert "13.9 s from the process's start, 12.2 s from the bench's first line" in line
    assert "goal 10 s: MISSED" in line
    assert "goal 10 s: met" in verdict_line("virtio-scsi", True, 8.0, 9.9, image=False)


def test_an_images_first_verdict_has_no_goal_of_its_own() -> None:
    line = verdict_line("virtio-scsi", True, 70.0, 71.0, image=True)
    assert "goal" not in line.replace("no goal", "") and "150 s" in line, line


def test_the_default_suites_wall_is_judged_against_its_goal() -> None:
    assert goal_line(85.0, image=False, whole_default=True).endswith("(goal 90 s: met)")
    assert goal_line(152.0, image=True, whole_default=True).endswith("(goal 150 s: MISSED)")
    assert "no goal of its own" in goal_line(20.0, image=False, whole_default=False)


def test_process_age_counts_from_the_process_start() -> None:
    """A lower bound only (a loaded host makes the age larger, never smaller)."""
    proc = subprocess.Popen(["sleep", "30"])
    try:
        time.sleep(0.5)
        assert process_age_s(str(proc.pid)) >= 0.45
    finally:
        proc.kill()
        proc.wait()
    assert process_age_s() > 0
