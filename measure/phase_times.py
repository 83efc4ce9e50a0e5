"""Where a run's time goes: wall-clock seconds per phase, per test (``bench.phases`` prints them).

The phases, as the code marks them with ``with phase(NAME):``

- ``build``: the backend made ready: the embedded guest image and the static fio built where the cache
  lacks them, the hypervisor connected (the session's first test pays it);
- ``boot``: the guest's start, from the backend's call to SSH (the session's first test pays it);
- ``set-up``: a disk found and prepared (faults, ``--guest-setup``, fio present), once per disk;
- ``start``: fio started until its first request reaches the disk (``measure.window``);
- ``ramp``: the wait after the first request, before the window opens;
- ``window``: the measured window itself;
- ``stop``: fio stopped, its output read and parsed;
- ``kernel-log``: the kernel-log check around a rule (suites/kernel_log_watch.py): its mark before the
  measurement, the lines after it read back; where both ride with the rule's own commands (transport/ride_along.py)
  it holds no guest command, only the reading of the answer;
- ``teardown``: the session's cleanup (the guest destroyed, its files removed).

Whatever a test spends outside these (the rules' own settings reads, cache drops, SSH round trips)
is its ``other`` time: the test's duration less its phases. Across all of them, each test's row also
counts its guest commands (``guest-commands``) and their seconds (``guest-command-s``, each from the
command's start to its result: the SSH round trip, and the ``sudo`` of a login that is not root, with
the command's own work), whichever phase they fell in: what a guest whose every command costs more (a
full distribution under TCG) pays per command. The suite writes the table to
``phases.json`` in the results directory (``phases.<worker>.json`` under pytest-xdist). Beside
``total`` (the test's whole duration), the first test of each process has ``once``: its set-up's
seconds, the session's one-off costs (build, boot, the KVM probe) that no later test pays again
(fixtures/progress.py leaves them out of a test's typical time).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

PHASES = ("build", "boot", "set-up", "start", "ramp", "window", "stop", "kernel-log", "teardown")
#: Time spent before any test began (the session's set-up before the first test, rare) or after the last.
SESSION = "(session)"
#: The keys of a test's guest commands: how many ran, and their seconds (inside and outside the phases).
COMMANDS = "guest-commands"
COMMAND_S = "guest-command-s"
#: The key of the seconds of the first test's set-up (the session's one-offs) in its row.
ONCE = "once"

_lock = threading.Lock()
_current = SESSION
_table: dict[str, dict[str, float]] = {}


def begin_test(nodeid: str) -> None:
    """What follows is ``nodeid``'s (the suite's plugin calls this as each test's set-up begins)."""
    global _current
    with _lock:
        _current = nodeid


def current_test() -> str:
    """The test whose time is being counted now (``SESSION`` outside tests)."""
    with _lock:
        return _current


def end_test() -> None:
    global _current
    with _lock:
        _current = SESSION


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """Add the block's wall-clock seconds to the current test's ``name`` phase (also when it raises)."""
    t0 = time.monotonic()
    try:
        yield
    finally:
        took = time.monotonic() - t0
        with _lock:
            row = _table.setdefault(_current, {})
            row[name] = row.get(name, 0.0) + took


def add_command(seconds: float) -> None:
    """One guest command of the current test ran, taking ``seconds`` (the transport calls this)."""
    with _lock:
        row = _table.setdefault(_current, {})
        row[COMMANDS] = row.get(COMMANDS, 0.0) + 1
        row[COMMAND_S] = row.get(COMMAND_S, 0.0) + seconds


def table() -> dict[str, dict[str, float]]:
    with _lock:
        return {k: dict(v) for k, v in _table.items()}


def add_set_up(nodeid: str, seconds: float) -> None:
    """A test's set-up took ``seconds``: the process's first one is the session's one-off costs
    (``once`` in its row)."""
    with _lock:
        if not any(ONCE in row for row in _table.values()):
            _table.setdefault(nodeid, {})[ONCE] = seconds


def add_duration(nodeid: str, seconds: float) -> None:
    """The test's whole duration (set-up, call and teardown), from pytest's reports."""
    with _lock:
        row = _table.setdefault(nodeid, {})
        row["total"] = row.get("total", 0.0) + seconds


def write(path: Path) -> None:
    path.write_text(json.dumps(table(), indent=1, sort_keys=True) + "\n")


def reset() -> None:
    global _current
    with _lock:
        _table.clear()
        _current = SESSION
