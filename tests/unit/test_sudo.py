"""A non-root login runs every command as root in one ``sudo -n sh`` per connection: output, exit status, quoting,
a background job and a signal to it all go through; a sudo that asks for a password is one clear
error when the connection is made. Against a real SSH server on 127.0.0.1 with a ``sudo`` stand-in
that checks ``-n`` and runs the rest (the host's own sudo would need a sudoers entry)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from model.types import SshEndpoint
from tests.vsphere.vsphere_sshd import LoopbackSshd
from transport.ssh import CommandResult, SshTransport, SudoNotUsable, generate_run_key, sudo_problem

#: Runs "sudo -n CMD ARGS" as CMD ARGS (the server runs as this test's user), logging each call.
FAKE_SUDO = """#!/bin/sh
[ "$1" = "-n" ] || { echo "sudo: this stand-in wants -n" >&2; exit 2; }
shift
echo "$*" >> "$(dirname "$0")/calls"
exec "$@"
"""
ASKS_PASSWORD = """#!/bin/sh
echo "sudo: a password is required" >&2
exit 1
"""


def server_with(tmp_path: Path, sudo_script: str) -> tuple[LoopbackSshd, SshEndpoint]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sudo").write_text(sudo_script)
    (bin_dir / "sudo").chmod(0o755)
    key_path, pub = generate_run_key(tmp_path)
    server = LoopbackSshd(tmp_path, lambda _user: [pub], path_prepend=[bin_dir])
    return server, SshEndpoint("127.0.0.1", server.port, "qa", key_path, server.host_key_line)


@pytest.fixture
def qa(tmp_path: Path) -> Iterator[tuple[SshTransport, Path]]:
    server, endpoint = server_with(tmp_path, FAKE_SUDO)
    ssh = SshTransport(endpoint, connect_timeout_s=20)
    yield ssh, tmp_path / "bin" / "calls"
    ssh.close()
    server.stop()


def test_output_status_and_quoting_go_through_sudo(qa: tuple[SshTransport, Path]) -> None:
    ssh, calls = qa
    assert calls.read_text().splitlines() == ["sh"]  # one root shell, opened by the check made on connecting
    ran = ssh.run("""x="it's"; echo "$x $((1 + 1))"; echo err >&2; exit 3""", check=False)
    assert (ran.stdout, ran.stderr, ran.exit_status) == ("it's 2\n", "err\n", 3)
    assert ran.command == """x="it's"; echo "$x $((1 + 1))"; echo err >&2; exit 3"""  # errors show the user's command


def test_a_background_job_started_through_sudo_can_be_signalled(qa: tuple[SshTransport, Path], tmp_path: Path) -> None:
    """As fio is started and stopped (guest.tools.fio): detached with setsid, stopped with kill -INT."""
    ssh, _ = qa
    pid, done = tmp_path / "pid", tmp_path / "done"
    # A program that sets its own SIGINT handler, as fio does: a shell's background job starts with
    # SIGINT ignored, which a shell script could not undo.
    job = tmp_path / "job.py"
    job.write_text("import os, signal, sys, time\n"
                   f"signal.signal(signal.SIGINT, lambda *_: (open({str(done)!r}, 'w').write('INT'), sys.exit(0)))\n"
                   f"open({str(pid)!r}, 'w').write(str(os.getpid()))\n"
                   "while True:\n    time.sleep(0.1)\n")
    t0 = time.monotonic()
    ssh.run(f"setsid {sys.executable} {job} </dev/null >/dev/null 2>&1 &")
    try:
        assert time.monotonic() - t0 < 10  # the command returns at once; the job runs on
        deadline = time.monotonic() + 10
        while not (pid.exists() and pid.read_text().strip()):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert ssh.run(f"kill -0 $(cat {pid})", check=False).ok
        ssh.run(f"kill -INT $(cat {pid})")
        while not done.exists():
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert done.read_text() == "INT"
    finally:  # a failed check must not leave the job running
        if pid.exists() and pid.read_text().strip() and not done.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid.read_text()), signal.SIGKILL)


def test_a_sudo_that_asks_for_a_password_is_one_clear_error(tmp_path: Path) -> None:
    server, endpoint = server_with(tmp_path, ASKS_PASSWORD)
    try:
        with pytest.raises(SudoNotUsable) as e:
            SshTransport(endpoint, connect_timeout_s=20)
    finally:
        server.stop()
    said = str(e.value)
    assert said.startswith("user qa's sudo asks for a password (sudo: a password is required); the suite runs its "
                           "commands as root through sudo -n and needs passwordless sudo (NOPASSWD)"), said
    assert "\n" not in said


def test_sudo_problems_are_named() -> None:
    def ran(status: int, stderr: str) -> CommandResult:
        return CommandResult("true", status, "", stderr, 0.1)

    assert sudo_problem("qa", ran(0, "")) is None
    missing = sudo_problem("qa", ran(127, "sh: 1: sudo: not found"))
    assert missing is not None and missing.startswith("user qa has no sudo in the guest (sh: 1: sudo: not found)")
    other = sudo_problem("qa", ran(1, "qa is not in the sudoers file."))
    assert other is not None and other.startswith("sudo -n failed for user qa (qa is not in the sudoers file.)")
