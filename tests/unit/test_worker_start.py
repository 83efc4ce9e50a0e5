"""fixtures.workerstart.StartWatch: a worker that never reports its collection stops the run."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

from fixtures.workerstart import STACKS_DIR, StartWatch, arm_worker, disarm_worker, dump_late_workers, py_spy


def watch(timeout_s: float) -> tuple[StartWatch, list[list[str]], threading.Event]:
    calls: list[list[str]] = []
    fired = threading.Event()

    def on_hang(late: list[str]) -> None:
        calls.append(late)
        fired.set()

    return StartWatch(timeout_s, on_hang), calls, fired


def test_workers_that_collect_in_time_stop_nothing() -> None:
    w, calls, fired = watch(0.3)
    w.started("gw0")
    w.started("gw1")
    w.collected("gw1")
    w.collected("gw0")
    assert not fired.wait(0.6) and calls == []


def test_a_worker_that_never_collects_is_named_once() -> None:
    w, calls, fired = watch(0.2)
    for gw in ("gw0", "gw1", "gw2"):
        w.started(gw)
    w.collected("gw0")
    assert fired.wait(5.0)
    assert calls == [["gw1", "gw2"]]


def test_stop_cancels_the_watch() -> None:
    w, calls, fired = watch(0.2)
    w.started("gw0")
    w.stop()
    assert not fired.wait(0.5) and calls == []


def test_start_up_time_is_measured_per_worker() -> None:
    now = [100.0]
    w = StartWatch(60.0, lambda late: None, clock=lambda: now[0])
    w.started("gw0")
    now[0] = 101.5
    w.started("gw1")
    now[0] = 103.0
    assert w.collected("gw0") == 3.0
    assert w.collected("gw1") == 1.5
    w.stop()
    assert w.ready_s == {"gw0": 3.0, "gw1": 1.5}


#: A stand-in worker: arms the stack dump as a worker does, says so, then waits in a function
#: whose name the dump must show.
_STUCK_WORKER = """
import sys, time
from pathlib import Path
sys.path.insert(0, {root!r})
from fixtures.workerstart import arm_worker
arm_worker(Path({results!r}), "gw7")
def waiting_for_something_that_never_comes():
    print("armed", flush=True)
    time.sleep(60)
waiting_for_something_that_never_comes()
"""


def test_a_late_worker_writes_its_stacks_into_the_results(tmp_path: Path) -> None:
    root = str(Path(__file__).resolve().parents[2])
    proc = subprocess.Popen([sys.executable, "-c", _STUCK_WORKER.format(root=root, results=str(tmp_path))],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "armed"
        files = dump_late_workers({"gw7": proc.pid, "gw8": None}, tmp_path)
    finally:
        proc.kill()
        proc.wait()
    names = {p.name for p in files}
    assert {"gw7.stacks.txt", "controller.stacks.txt"} <= names, names
    assert "waiting_for_something_that_never_comes" in (tmp_path / STACKS_DIR / "gw7.stacks.txt").read_text()
    # this test's own stack is the controller's
    assert "test_a_late_worker_writes_its_stacks" in (tmp_path / STACKS_DIR / "controller.stacks.txt").read_text()
    if py_spy() is not None:  # the project's requirements install it; the fast lane may run without
        assert "waiting_for_something_that_never_comes" in (tmp_path / STACKS_DIR / "gw7.py-spy.txt").read_text()


def test_a_worker_that_was_never_asked_leaves_no_file(tmp_path: Path) -> None:
    assert arm_worker(tmp_path, "gw3") is not None
    disarm_worker()
    assert not (tmp_path / STACKS_DIR).exists()


def test_a_worker_gets_the_controllers_preflight_in_plain_types() -> None:
    """What crosses execnet to a worker: the failed hosts and the baseline run's id, nothing else."""
    from fixtures import preflight

    given = preflight.PreflightFindings(None, {"loop": "libvirt host root@127.0.0.1:1 is unreachable"}).for_worker()
    assert given == {"host_errors": {"loop": "libvirt host root@127.0.0.1:1 is unreachable"}, "baseline_run": None}
    assert preflight.from_worker_input(given).host_errors == given["host_errors"]
