"""The start watch for real (fixtures/workerstart.py): a pytest-xdist worker that stops before its
collection stops the run within the watch's timeout, incomplete and saying which worker, and its
stacks are in the results. No guest starts: the controller waits for every worker's collection
before it hands out a test."""

from __future__ import annotations

import time
from pathlib import Path

from fixtures.workerstart import STACKS_DIR, TIMEOUT_ENV
from tests.e2e.conftest import run_suite_at

#: The watch's timeout in this test: a worker here starts in 1-3 s, up to about 10 s beside busy
#: guests (python -m bench.pool --starts); the run must end well within the stalled worker's 600 s.
TIMEOUT_S = 20


def test_a_worker_that_never_collects_stops_the_run_and_leaves_its_stacks(tmp_path: Path) -> None:
    results = tmp_path / "results"
    t0 = time.monotonic()
    run = run_suite_at(results, "-p", "tests.plugins.stall_worker", "--controllers", "virtio-blk,virtio-scsi",
                       "-k", "limits", "-n", "2", timeout=300,
                       env={TIMEOUT_ENV: str(TIMEOUT_S), "VIOCONFORM_TEST_STALL_WORKER": "gw1"})
    took = time.monotonic() - t0
    assert run.returncode == 2, run.output[-3000:]  # interrupted
    assert f"pytest-xdist worker gw1 not started within {TIMEOUT_S} s" in run.output, run.output[-3000:]
    assert took < 200, took
    stacks = results / STACKS_DIR
    assert "stalled_before_collection" in (stacks / "gw1.stacks.txt").read_text()
    assert "stalled_before_collection" in (stacks / "gw1.py-spy.txt").read_text()
    assert (stacks / "controller.stacks.txt").read_text()
    assert not (stacks / "gw0.stacks.txt").exists()
    assert run.left_behind == []
