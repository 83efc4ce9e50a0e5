"""Undo everything a run created, on success, failure, Ctrl-C and SIGTERM.

Each resource is registered right after it is created; ``CleanupStack.run()`` undoes them
newest first and keeps going past errors, so one stuck VM does not leak the rest.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

log = logging.getLogger("vioconform.cleanup")


class CleanupStack:
    """A LIFO of undo actions; safe to run twice (the second run does nothing)."""

    def __init__(self) -> None:
        self._items: list[tuple[str, Callable[[], object]]] = []
        self._lock = threading.Lock()

    def push(self, what: str, undo: Callable[[], object]) -> Callable[[], None]:
        """Register ``undo`` for ``what``; returns a function that runs it now and forgets it."""
        item = (what, undo)
        with self._lock:
            self._items.append(item)

        def run_now() -> None:
            with self._lock:
                if item not in self._items:
                    return
                self._items.remove(item)
            undo()

        return run_now

    def run(self) -> list[str]:
        """Undo everything, newest first. Returns the descriptions of undo actions that failed."""
        failed: list[str] = []
        while True:
            with self._lock:
                if not self._items:
                    return failed
                what, undo = self._items.pop()
            try:
                undo()
            except Exception as e:  # noqa: BLE001 keep cleaning: one failure must not leak the rest
                log.warning("cleanup of %s failed: %s", what, e)
                failed.append(f"{what}: {e}")

    def __len__(self) -> int:
        return len(self._items)


#: The process-wide stack: run at interpreter exit as a last resort.
GLOBAL = CleanupStack()
atexit.register(GLOBAL.run)


def _sigterm(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def install_signal_handlers() -> None:
    """Turn SIGTERM into KeyboardInterrupt, so pytest tears fixtures down as on Ctrl-C."""
    if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
        signal.signal(signal.SIGTERM, _sigterm)


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold Ctrl-C and SIGTERM until the block ends.

    For calls that create something on a server (libvirt's createXML): an interrupt in the
    middle abandons the client's wait while the server goes on creating, so the undo that
    runs next would find nothing yet and the VM would leak. Held, the interrupt lands after
    the call returns, when the thing exists and its undo can find it.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = {signal.SIGINT, signal.SIGTERM}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


# --- run directories --------------------------------------------------------------------------
RUN_DIR_PREFIX = "vioconform-run-"
OWNER_FILE = "owner.pid"


def make_run_dir(cleanup: CleanupStack) -> Path:
    """A fresh run directory (console log, disk files, keys), removed by ``cleanup``. It records
    its owner's pid, so a run killed with SIGKILL leaves a directory the next run can sweep."""
    path = Path(tempfile.mkdtemp(prefix=RUN_DIR_PREFIX))
    cleanup.push(f"run directory {path}", lambda: shutil.rmtree(path, ignore_errors=True))
    (path / OWNER_FILE).write_text(f"{os.getpid()}\n")
    return path


def owner_alive(pid: int) -> bool:
    """Whether the process that made something (a run directory, a domain, a log) still runs.
    A zombie does not: a killed pytest-xdist worker stays one until its controller reaps it, and
    the controller sweeps what the worker left before that."""
    if pid <= 0:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[:1] != ["Z"]  # the state follows the command name in ()


def sweep_run_dirs(base: Path | None = None) -> list[Path]:
    """Remove run directories whose owner process is gone; returns them. A directory without
    an owner file, or whose owner is alive, is left alone: only what a run made is removed."""
    swept = []
    for path in (base or Path(tempfile.gettempdir())).glob(f"{RUN_DIR_PREFIX}*"):
        try:
            pid = int((path / OWNER_FILE).read_text().strip())
        except (OSError, ValueError):
            continue
        if not owner_alive(pid):
            log.warning("removing run directory %s of dead process %d", path, pid)
            shutil.rmtree(path, ignore_errors=True)
            swept.append(path)
    return swept
