"""The real suite and a results store that accepts connections and never answers (a PostgreSQL
URL at tests/silentserver.py): the run ends with a usage error within the store's connect
timeout, before any guest, and at once on SIGTERM while it waits (a long timeout then:
tests/long_store_wait.py)."""

from __future__ import annotations

import signal
import time
from pathlib import Path

from reports.store.connection import STORE_CONNECT_TIMEOUT_S
from tests.e2e.conftest import active_vioconform_domains, run_suite_at, start_suite
from tests.silentserver import silent_server
from tests.unit.test_store_safety import SIGNAL_BOUND_S

#: A bad input is reported within 30 s (the issue's bound for every hostile case).
BAD_INPUT_BOUND_S = 30.0


def test_a_silent_store_is_a_usage_error_within_the_bound(tmp_path: Path) -> None:
    with silent_server() as server:
        t0 = time.monotonic()
        run = run_suite_at(tmp_path / "r", "--controllers", "virtio-blk", "-k", "limits", "--store",
                           f"postgresql://vioconform:pg-pw@127.0.0.1:{server.port}/vioconform", timeout=120)
        took = time.monotonic() - t0
        assert server.accepted, "the run never reached the store"
    assert run.returncode == 4, run.output[-3000:]
    assert (f"--store: store postgresql://vioconform:***@127.0.0.1:{server.port}/vioconform cannot be opened: the "
            f"server did not answer within {STORE_CONNECT_TIMEOUT_S:g} s while connecting") in run.output, run.output[-3000:]
    assert took < BAD_INPUT_BOUND_S, f"{took:.0f} s"
    assert "pg-pw" not in run.output and "PASSED" not in run.output
    assert f"vioconform-{run.pid}" not in active_vioconform_domains() and run.left_behind == []
    assert not run.results.exists() or not any(run.results.iterdir())


def test_sigterm_while_waiting_for_a_silent_store_ends_the_run_at_once(tmp_path: Path) -> None:
    with silent_server() as server:
        proc = start_suite(tmp_path / "r", "--controllers", "virtio-blk", "-k", "limits", "-p", "tests.long_store_wait",
                           "--store", f"postgresql://vioconform:pg-pw@127.0.0.1:{server.port}/vioconform")
        try:
            deadline = time.monotonic() + 120
            while not server.accepted:  # collected, checking the store before any guest
                assert proc.poll() is None and time.monotonic() < deadline, "the run never reached the store"
                time.sleep(0.1)
            time.sleep(0.5)
            t0 = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=60)
            took = time.monotonic() - t0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert took < SIGNAL_BOUND_S, f"{took:.1f} s:\n{out[-3000:]}"
    assert proc.returncode == 2 and "KeyboardInterrupt" in out and "PASSED" not in out, out[-3000:]
    assert f"vioconform-{proc.pid}" not in active_vioconform_domains()
    results = tmp_path / "r"
    assert not results.exists() or not any(results.iterdir())
