"""BackgroundFio.stop's one guest command, run by real shells (dash, as Debian's /bin/sh, and
busybox sh, as the embedded guest's) on real processes: the SIGINT, the guest-side wait and its
deadline. The files and the process stand in for fio (guest.tools.fio.Fio.start writes the same
pid and ``running`` files)."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from guest.tools.fio import BackgroundFio, FioJob, FioOutput
from transport.ssh import CommandResult

#: what the stand-in fio has printed
STDOUT = '{"fio version": "fio-3.33", "jobs": []}\n'
STDERR = "fio: terminating on signal 2\n"

#: How long the stand-in may take to start and set its SIGINT handler: only a hung start fails.
READY_TIMEOUT_S = 60.0
#: What separates "stop waited for fio's end" (0.3 s) or "gave up at its deadline" (1-2 s) from
#: waiting for the stand-in's own end (120 s): a loaded host may take seconds more, never a minute.
WAITED_FOREVER_S = 60.0

SHELLS = [pytest.param(("dash", "-c"), id="dash"), pytest.param(("busybox", "sh", "-c"), id="busybox")]


class LocalShell:
    """The GuestShell protocol on this machine's shell."""

    def __init__(self, argv: tuple[str, ...]) -> None:
        if shutil.which(argv[0]) is None:
            pytest.skip(f"{argv[0]} is not installed")
        self.argv = argv
        self.commands = 0

    def run(self, command: str, check: bool = True, timeout_s: float = 300.0) -> CommandResult:
        self.commands += 1
        p = subprocess.run([*self.argv, command], capture_output=True, text=True, timeout=timeout_s, check=False)
        return CommandResult(command, p.returncode, p.stdout, p.stderr, 0.0)


@contextlib.contextmanager
def stand_in(tmp_path: Path, on_sigint: str,
             shell: tuple[str, ...] = ("dash", "-c")) -> Iterator[tuple[BackgroundFio, subprocess.Popen[bytes]]]:
    """fio's files, with ``shell`` to run the stop command, and a process that, like the detached
    fio, has written ``STDOUT`` and ``STDERR`` and removes ``running`` when it ends, once it has
    written its exit status (128); ``on_sigint``: what it does on SIGINT ("exit" after 0.3 s, or "ignore")."""
    run = BackgroundFio(LocalShell(shell), FioJob("qd1", iodepth=1), str(tmp_path / "vioc-qd1-vda"))
    f = run.files
    Path(f["running"]).touch()
    Path(f["out"]).write_text(STDOUT)
    Path(f["err"]).write_text(STDERR)
    ready = tmp_path / "handler-set"
    code = ("import os, signal, sys, time\n"
            "def end(*_):\n    time.sleep(0.3)\n    open(sys.argv[2], 'w').write('128\\n')\n"
            "    os.remove(sys.argv[1])\n    sys.exit(0)\n"
            + ("signal.signal(signal.SIGINT, end)\n" if on_sigint == "exit"
               else "signal.signal(signal.SIGINT, signal.SIG_IGN)\n")
            + "open(sys.argv[3], 'w').close()\n"
            + "time.sleep(120)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, f["running"], f["rc"], str(ready)])
    Path(f["pid"]).write_text(f"{proc.pid}\n")
    # The SIGINT must find the handler set: on a loaded host the interpreter's start alone can take
    # longer than any fixed sleep, so wait for the stand-in to say so.
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not ready.exists():
        assert proc.poll() is None and time.monotonic() < deadline, "the stand-in fio never set its handler"
        time.sleep(0.02)
    try:
        yield run, proc
    finally:
        proc.kill()
        proc.wait()


def timed_stop(run: BackgroundFio, timeout_s: float) -> tuple[bool, float]:
    """``run.stop(timeout_s)`` and the seconds it took."""
    t0 = time.monotonic()
    ended = run.stop(timeout_s)
    return ended, time.monotonic() - t0


@pytest.mark.parametrize("shell", SHELLS)
def test_stop_signals_fio_and_waits_in_the_guest_until_it_ends(tmp_path: Path, shell: tuple[str, ...]) -> None:
    with stand_in(tmp_path, "exit", shell) as (run, proc):
        ended, took = timed_stop(run, 10.0)
        assert ended is True
        assert run.stopped and proc.wait(5) == 0
        assert 0.3 <= took < 10.0, took  # it waited for the end (0.3 s), not for the deadline (10 s)


@pytest.mark.parametrize("shell", SHELLS)
def test_stop_gives_up_at_its_deadline_when_fio_does_not_end(tmp_path: Path, shell: tuple[str, ...]) -> None:
    with stand_in(tmp_path, "ignore", shell) as (run, proc):
        ended, took = timed_stop(run, 1.0)
        assert ended is False
        assert run.stopped and proc.poll() is None
        assert 1.0 <= took < WAITED_FOREVER_S, took  # whole seconds of the guest's uptime: 1-2 s, not fio's end


def test_stop_after_fio_ended_by_itself(tmp_path: Path) -> None:
    """No ``running`` file: fio had ended; no signal is sent, and it counts as ended."""
    with stand_in(tmp_path, "ignore") as (run, proc):
        Path(run.files["running"]).unlink()
        assert run.stop(5.0) is True
        assert not run.stopped and proc.poll() is None


@pytest.mark.parametrize("shell", SHELLS)
def test_finish_stops_fio_runs_the_other_command_and_reads_fios_output_in_one_command(
        tmp_path: Path, shell: tuple[str, ...]) -> None:
    """measure.window's stop: fio stopped, the in-flight samples read (``also``), fio's output read."""
    samples = tmp_path / "samples"
    samples.write_text("12.30 4 0\n12.40 3 0\n")
    with stand_in(tmp_path, "exit", shell) as (run, proc):
        done = run.finish(10.0, also=f"cat {samples}; rm -f {samples}")
        assert isinstance(run.shell, LocalShell) and run.shell.commands == 1
        assert done.ended and run.stopped and proc.wait(5) == 0
        assert done.also_stdout == "12.30 4 0\n12.40 3 0\n" and not samples.exists()
        assert done.output == FioOutput(STDOUT, STDERR, 128, stopped=True) and done.output.status == 0
        assert not any(Path(run.files[k]).exists() for k in ("out", "err", "rc", "pid", "running"))


def test_finish_when_fio_does_not_end_says_so_and_still_runs_the_other_command(tmp_path: Path) -> None:
    """The sampler stops even then (``also``); fio's output so far comes back, with no exit status (255)."""
    with stand_in(tmp_path, "ignore") as (run, proc):
        done = run.finish(1.0, also="echo sampler-stopped")
        assert not done.ended and run.stopped and proc.poll() is None
        assert done.also_stdout == "sampler-stopped\n"
        assert done.output == FioOutput(STDOUT, STDERR, 255, stopped=True)
