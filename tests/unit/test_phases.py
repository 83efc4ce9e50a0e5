"""Per-phase timing (measure/phase_times.py) and bench.phases' table."""

from __future__ import annotations

import time

import pytest

from bench.phases import render, rows_of
from measure import phase_times


@pytest.fixture(autouse=True)
def clean() -> None:
    phase_times.reset()


def test_phases_add_up_per_test_and_the_rest_is_other() -> None:
    phase_times.begin_test("suites/test_queue_depth.py::test_q[libvirt:virtio-scsi:latency5ms]")
    with phase_times.phase("ramp"):
        time.sleep(0.02)
    with phase_times.phase("ramp"):
        time.sleep(0.02)
    with pytest.raises(RuntimeError), phase_times.phase("window"):
        raise RuntimeError("still counted")
    phase_times.add_duration("suites/test_queue_depth.py::test_q[libvirt:virtio-scsi:latency5ms]", 1.0)
    phase_times.end_test()
    with phase_times.phase("teardown"):
        pass
    table = phase_times.table()
    row = table["suites/test_queue_depth.py::test_q[libvirt:virtio-scsi:latency5ms]"]
    assert 0.04 <= row["ramp"] < 0.5 and "window" in row and row["total"] == 1.0
    assert "teardown" in table[phase_times.SESSION]
    rows = rows_of({k: v for k, v in table.items() if k != phase_times.SESSION})
    r = rows["queue-depth[libvirt:virtio-scsi:latency5ms]"]
    assert r["other"] == pytest.approx(1.0 - r["ramp"] - r["window"])
    text = render(rows, 12.5, markdown=True)
    assert "| queue-depth[libvirt:virtio-scsi:latency5ms] |" in text and "wall time of the run: 12.5 s" in text
