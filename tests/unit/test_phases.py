"""Per-phase timing (measure/phases.py) and bench.phases' table."""

from __future__ import annotations

import time

import pytest

from bench.phases import render, rows_of
from measure import phases


@pytest.fixture(autouse=True)
def clean() -> None:
    phases.reset()


def test_phases_add_up_per_test_and_the_rest_is_other() -> None:
    phases.begin_test("suites/test_queue_depth.py::test_q[libvirt:virtio-scsi:latency5ms]")
    with phases.phase("ramp"):
        time.sleep(0.02)
    with phases.phase("ramp"):
        time.sleep(0.02)
    with pytest.raises(RuntimeError), phases.phase("window"):
        raise RuntimeError("still counted")
    phases.add_duration("suites/test_queue_depth.py::test_q[libvirt:virtio-scsi:latency5ms]", 1.0)
    phases.end_test()
    with phases.phase("teardown"):
        pass
    table = phases.table()
    row = table["suites/test_queue_depth.py::test_q[libvirt:virtio-scsi:latency5ms]"]
    assert 0.04 <= row["ramp"] < 0.5 and "window" in row and row["total"] == 1.0
    assert "teardown" in table[phases.SESSION]
    rows = rows_of({k: v for k, v in table.items() if k != phases.SESSION})
    r = rows["queue-depth[libvirt:virtio-scsi:latency5ms]"]
    assert r["other"] == pytest.approx(1.0 - r["ramp"] - r["window"])
    text = render(rows, 12.5, markdown=True)
    assert "| queue-depth[libvirt:virtio-scsi:latency5ms] |" in text and "wall time of the run: 12.5 s" in text
