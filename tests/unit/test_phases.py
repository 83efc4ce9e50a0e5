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


def test_each_guest_command_is_counted_in_its_tests_row_with_its_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    """The session's transport (fixtures/journal.py) counts every command, failed or not, in the running
    test's row, whichever phase it falls in; bench.phases prints the count and the seconds. Only the
    network under the transport is replaced here (the parent's ``run``)."""
    from fixtures.journal import JournaledSsh
    from transport.ssh import CommandResult, GuestCommandError, SshTransport

    def fake_run(self: SshTransport, command: str, check: bool = True, timeout_s: float = 300.0,
                 hint: str = "") -> CommandResult:
        time.sleep(0.01)
        return CommandResult(command, 1 if command == "false" else 0, "", "", 0.01)

    monkeypatch.setattr(SshTransport, "run", fake_run)
    ssh = object.__new__(JournaledSsh)
    node = "suites/test_resize.py::test_resize[libvirt:virtio-blk:file]"
    phase_times.begin_test(node)
    ssh.run("true")
    with phase_times.phase("window"):
        ssh.run("true")
    with pytest.raises(GuestCommandError):
        ssh.run("false")
    phase_times.add_duration(node, 1.0)
    phase_times.end_test()
    row = phase_times.table()[node]
    assert row[phase_times.COMMANDS] == 3 and 0.03 <= row[phase_times.COMMAND_S] < 1.0
    r = rows_of({node: row})["resize[libvirt:virtio-blk:file]"]
    assert r["other"] == pytest.approx(1.0 - r["window"])  # the commands' seconds are not a phase of their own
    text = render({"resize[libvirt:virtio-blk:file]": r}, 2.0, markdown=True)
    assert "| commands | cmd-s |" in text and "| 3.0 |" in text
