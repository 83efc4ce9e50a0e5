"""A non-root login's commands run in one root shell per connection (transport/root_shell.py) and
behave as each did in a ``sudo -n sh -c`` of its own: output exact (no newline added, large, on both
streams), exit status, a subshell of its own, an empty standard input, a syntax error that ends only
that command, a timeout that is the same error and leaves the next command working, a secret in a
command never on a command line. Against a real SSH server on 127.0.0.1 with a ``sudo`` stand-in that
logs each call (tests/unit/test_sudo.py's)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from model.types import SshEndpoint
from tests.unit.test_sudo import FAKE_SUDO, server_with
from tests.vsphere.vsphere_sshd import LoopbackSshd
from transport.root_shell import Frame
from transport.ssh import GuestUnreachable, SshTransport, generate_run_key


@pytest.fixture
def qa(tmp_path: Path) -> Iterator[tuple[SshTransport, LoopbackSshd, Path]]:
    server, endpoint = server_with(tmp_path, FAKE_SUDO)
    ssh = SshTransport(endpoint, connect_timeout_s=20)
    yield ssh, server, tmp_path / "bin" / "calls"
    ssh.close()
    server.stop()


def test_every_command_of_a_connection_runs_in_one_sudo(qa: tuple[SshTransport, LoopbackSshd, Path]) -> None:
    ssh, server, calls = qa
    for i in range(5):
        assert ssh.run(f"echo {i}").stdout == f"{i}\n"
    assert calls.read_text().splitlines() == ["sh"]
    assert server.commands == ["sudo -n sh"]


def test_output_is_exact_on_both_streams(qa: tuple[SshTransport, LoopbackSshd, Path]) -> None:
    ssh, _, _ = qa
    ran = ssh.run("printf 'no newline'; printf 'err\\n\\n' >&2; exit 7", check=False)
    assert (ran.stdout, ran.stderr, ran.exit_status) == ("no newline", "err\n\n", 7)
    assert ssh.run("true").stdout == ""
    big = ssh.run("i=0; while [ $i -lt 20000 ]; do echo line $i; i=$((i + 1)); done")
    assert big.stdout == "".join(f"line {i}\n" for i in range(20000))
    assert ssh.run("printf 'a\\n\\n'").stdout == "a\n\n"


def test_each_command_has_its_own_subshell(qa: tuple[SshTransport, LoopbackSshd, Path], tmp_path: Path) -> None:
    ssh, _, _ = qa
    home = ssh.run("pwd").stdout
    ran = ssh.run(f"cd {tmp_path}; x=set; set -e; trap 'echo bye' EXIT; false; echo not reached", check=False)
    assert (ran.stdout, ran.exit_status) == ("bye\n", 1)
    assert ssh.run("pwd; echo ${x:-unset}; case $- in *e*) echo errexit;; esac").stdout == f"{home}unset\n"
    assert ssh.run("exit 3", check=False).exit_status == 3
    assert ssh.run("echo alive").stdout == "alive\n"


def test_a_syntax_error_ends_only_its_command(qa: tuple[SshTransport, LoopbackSshd, Path]) -> None:
    ssh, _, calls = qa
    ran = ssh.run("if then fi )", check=False)
    assert ran.exit_status == 2 and "Syntax error" in ran.stderr, ran
    assert ssh.run("echo 'quotes '\"'\"' and \"more\"'; echo $((6 * 7))").stdout == "quotes ' and \"more\"\n42\n"
    assert calls.read_text().splitlines() == ["sh"]


def test_a_command_reads_an_empty_input_not_the_next_command(qa: tuple[SshTransport, LoopbackSshd, Path]) -> None:
    ssh, _, _ = qa
    assert ssh.run("cat; echo end", timeout_s=10).stdout == "end\n"
    assert ssh.run("read -r line; echo \"status $?\"", timeout_s=10).stdout == "status 1\n"


def test_a_timeout_is_the_same_error_and_the_next_command_works(qa: tuple[SshTransport, LoopbackSshd, Path]) -> None:
    ssh, _, calls = qa
    t0 = time.monotonic()
    with pytest.raises(GuestUnreachable, match=r"^guest command timed out after 1 s: sleep 30; echo late$"):
        ssh.run("sleep 30; echo late", timeout_s=1)
    assert time.monotonic() - t0 < 15
    assert ssh.run("echo next").stdout == "next\n"
    assert calls.read_text().splitlines() == ["sh", "sh"]  # the timed-out command's shell was closed


def test_a_secret_goes_on_the_shells_input_not_a_command_line(qa: tuple[SshTransport, LoopbackSshd, Path]) -> None:
    ssh, server, calls = qa
    ssh.run("secret=hunter2-not-on-argv; echo ok >/dev/null")
    assert all("hunter2" not in c for c in server.commands)
    assert "hunter2" not in calls.read_text()


def test_a_killed_shell_is_replaced_by_the_next_command(qa: tuple[SshTransport, LoopbackSshd, Path]) -> None:
    """The shell ending under a command (here the command kills it) gives that command the status
    and words the shell's end gives, as a ``sudo -n sh -c`` of its own that was killed did (this
    server's login shell reports the kill, as a real one that does not exec its command does); the
    next command opens a new shell."""
    ssh, _, calls = qa
    ran = ssh.run("echo before; kill -KILL $$", check=False, timeout_s=20)
    assert (ran.exit_status, ran.stdout, ran.stderr) == (137, "before\n", "Killed\n")
    assert ssh.run("echo again").stdout == "again\n"
    assert calls.read_text().splitlines() == ["sh", "sh"]


def test_the_frame_ignores_what_came_before_it_and_a_nonce_it_does_not_own() -> None:
    frame = Frame("x", nonce="abc")
    other = Frame("x", nonce="abd")
    out = b"late output of a background job\nvioconform-start-abc\nbody\nvioconform-end-abc 5\n"
    err = b"vioconform-start-abc\n\nvioconform-end-abc\n"
    assert other.read(out, err) is None
    framed = frame.read(out, err)
    assert framed is not None and (framed.exit_status, framed.stdout, framed.stderr) == (5, b"body", b"")
    assert frame.read(out, b"vioconform-start-abc\n") is None  # the error stream's end is still to come
    assert frame.started(out) and not other.started(out)


def test_a_guests_root_login_runs_its_commands_in_one_shell_and_an_esxi_hosts_each_on_its_own(tmp_path: Path) -> None:
    """``to_guest`` (a guest's session) asks for the root shell; a plain root transport (an ESXi host's
    vscsiStats) keeps a channel a command."""
    key_path, pub = generate_run_key(tmp_path)
    server = LoopbackSshd(tmp_path, lambda _user: [pub])
    endpoint = SshEndpoint("127.0.0.1", server.port, "root", key_path, server.host_key_line)
    try:
        for root_shell, commands in ((True, ["sh"]), (False, ["echo 1; exit 4", "echo 2; exit 4"])):
            server.commands.clear()
            ssh = SshTransport(endpoint, connect_timeout_s=20, root_shell=root_shell)
            try:
                for i in (1, 2):
                    ran = ssh.run(f"echo {i}; exit 4", check=False)
                    assert (ran.stdout, ran.exit_status) == (f"{i}\n", 4)
            finally:
                ssh.close()
            assert server.commands == commands
    finally:
        server.stop()


def test_commands_from_two_threads_run_beside_each_other(qa: tuple[SshTransport, LoopbackSshd, Path]) -> None:
    """The shell runs one command at a time; a command another thread sends meanwhile runs on a
    channel of its own through ``sudo -n sh -c``."""
    ssh, _, calls = qa
    said: dict[str, str] = {}

    def run(name: str) -> None:
        said[name] = ssh.run(f"sleep 2; echo {name}").stdout

    threads = [threading.Thread(target=run, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert said == {"a": "a\n", "b": "b\n"}
    made = calls.read_text().splitlines()
    assert made[0] == "sh" and sorted(made[1:]) in (["sh -c sleep 2; echo a"], ["sh -c sleep 2; echo b"]), made
