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


class _Interrupts:
    """The run's interrupts (SIGINT, SIGTERM): the first raises KeyboardInterrupt and starts the
    run's orderly end (its rule ends in ERROR, the results are written and stored as incomplete, the
    guest and everything else it made are removed); each later one is noted in ``noted``, never
    raised, so that no cleanup step and no result is cut short by it (seven Ctrl-C a third of a
    second apart once left the guest's run directory, no report and exit 130)."""

    def __init__(self) -> None:
        self.ending = False
        #: the run's end began with a signal (not pytest.exit, nor a KeyboardInterrupt raised by the suite)
        self.by_signal = False
        self.noted: list[str] = []
        #: the handlers before install_signal_handlers, put back by restore_signal_handlers
        self.previous: dict[int, Any] = {}

    def handle(self, signum: int, frame: Any) -> None:
        __tracebackhide__ = True  # pytest's "KeyboardInterrupt" line names where the run was, not this handler
        name = signal.Signals(signum).name
        if self.ending:
            self.noted.append(name)
            # os.write, not logging or print: a signal handler may run inside either's own write; and
            # a closed or full stderr must not raise into whatever code the signal interrupted
            with contextlib.suppress(OSError):
                os.write(2, f"\nvioconform: {name} noted: the run is already ending (its guest is being removed and "
                            "its results written); SIGKILL stops it at once, and the next run removes what it leaves\n"
                            .encode())
            return
        self.ending = self.by_signal = True
        raise KeyboardInterrupt() if signum == signal.SIGINT else KeyboardInterrupt(f"signal {signum}")


_INTERRUPTS = _Interrupts()


def install_signal_handlers() -> None:
    """Turn SIGTERM into KeyboardInterrupt, so pytest tears fixtures down as on Ctrl-C; the first
    SIGINT or SIGTERM raises, every later one is noted and the run's end goes on (:class:`_Interrupts`).
    SIGINT ignored (a job started in the background) stays ignored, a handler of someone else's stays."""
    for signum, ours_if in ((signal.SIGTERM, (signal.SIG_DFL, None)), (signal.SIGINT, (signal.default_int_handler,))):
        current = signal.getsignal(signum)
        if current in ours_if:
            _INTERRUPTS.previous[signum] = current
            signal.signal(signum, _INTERRUPTS.handle)


def shield_interrupts() -> None:
    """The run is ending after an interrupt that was no signal (pytest.exit, a worker that never
    started): later SIGINT and SIGTERM are noted, as after a first signal."""
    _INTERRUPTS.ending = True


def interrupts_noted() -> tuple[str, ...]:
    """The interrupts that came after the first, while the run was ending (``("SIGINT", "SIGINT")``)."""
    return tuple(_INTERRUPTS.noted)


def restore_signal_handlers() -> None:
    """The run has ended (pytest_unconfigure): the handlers before :func:`install_signal_handlers` back, for a
    process that goes on (pytest run in-process by a test). After an interrupt the process is about to
    exit: the handler stays, so an interrupt in its last steps is noted too, not a traceback and exit 130."""
    if _INTERRUPTS.by_signal:
        return
    for signum, handler in _INTERRUPTS.previous.items():
        if signal.getsignal(signum) == _INTERRUPTS.handle:
            signal.signal(signum, handler)
    _INTERRUPTS.previous.clear()
    _INTERRUPTS.ending = False
    _INTERRUPTS.noted.clear()


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
