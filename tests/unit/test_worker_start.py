"""fixtures.workerstart.StartWatch: a worker that never reports its collection stops the run."""

from __future__ import annotations

import threading

from fixtures.workerstart import StartWatch


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
