"""Scripts that ride along with the next guest command (transport/ride_along.py): one round trip, and
the command's own output, error output and exit status as if it had run alone, whatever it does (exits,
fails, prints no newline, has a syntax error); each rider gets its own output and status. Against a
real SSH server on 127.0.0.1, through the root shell of a non-root login (tests/unit/test_sudo.py's
``sudo`` stand-in) and through a root login's channel a command; and on the host's ``sh`` and busybox."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from fixtures.journal import CURRENT, JournaledSsh
from model.types import SshEndpoint
from tests.unit.test_sudo import FAKE_SUDO, server_with
from tests.vsphere.vsphere_sshd import LoopbackSshd
from transport.ride_along import Rider, Taken, wrapped
from transport.ssh import GuestCommandError, GuestUnreachable, SshTransport, generate_run_key


@pytest.fixture(params=["root shell", "channel a command"])
def ssh(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[SshTransport, LoopbackSshd, str]]:
    if request.param == "root shell":
        server, endpoint = server_with(tmp_path, FAKE_SUDO)
        transport = SshTransport(endpoint, connect_timeout_s=20)
    else:
        key_path, pub = generate_run_key(tmp_path)
        server = LoopbackSshd(tmp_path, lambda _user: [pub])
        transport = SshTransport(SshEndpoint("127.0.0.1", server.port, "root", key_path, server.host_key_line),
                                 connect_timeout_s=20)
    server.commands.clear()
    yield transport, server, request.param
    transport.close()
    server.stop()


def test_riders_go_with_the_next_command_in_one_round_trip(ssh: tuple[SshTransport, LoopbackSshd, str]) -> None:
    transport, server, mode = ssh
    before = transport.ride_along("echo marked; echo warned >&2; exit 5")
    after = transport.ride_along("echo read back", after=True)
    assert before.pending and after.pending
    ran = transport.run("printf 'no newline'; echo err >&2; exit 7", check=False)
    assert (ran.stdout, ran.stderr, ran.exit_status) == ("no newline", "err\n", 7)
    assert ran.command == "printf 'no newline'; echo err >&2; exit 7"  # errors show the caller's command
    assert (before.status, before.output) == (5, "marked\nwarned\n")
    assert (after.status, after.output) == (0, "read back\n")
    # one round trip: one channel where each command has its own, none where the root shell is open
    assert len(server.commands) == (0 if mode == "root shell" else 1)
    assert transport.run("echo alone").stdout == "alone\n"  # riders ride once
    assert before.output == "marked\nwarned\n"


def test_the_command_keeps_its_own_subshell_and_a_syntax_error_ends_only_it(
        ssh: tuple[SshTransport, LoopbackSshd, str]) -> None:
    transport, _, _ = ssh
    after = transport.ride_along('echo "${x:-unset}"; case $- in *e*) echo errexit;; esac', after=True)
    ran = transport.run("x=set; set -e; trap 'echo bye' EXIT; false; echo not reached", check=False)
    assert (ran.stdout, ran.exit_status) == ("bye\n", 1)
    assert after.output == "unset\n"
    after = transport.ride_along("echo still here", after=True)
    ran = transport.run("if then fi )", check=False)
    assert ran.exit_status == 2 and "Syntax error" in ran.stderr, ran
    assert after.output == "still here\n"


def test_a_failing_command_raises_as_it_did_and_its_riders_still_ran(ssh: tuple[SshTransport, LoopbackSshd, str]) -> None:
    transport, _, _ = ssh
    before = transport.ride_along("echo before")
    with pytest.raises(GuestCommandError, match=r"exit 3\): echo out; exit 3\nstdout: out\n"):
        transport.run("echo out; exit 3")
    assert before.output == "before\n"


def test_a_rider_dropped_before_a_command_does_not_ride(ssh: tuple[SshTransport, LoopbackSshd, str]) -> None:
    transport, _, _ = ssh
    kept, dropped = transport.ride_along("echo kept"), transport.ride_along("echo dropped")
    transport.drop_rider(dropped)
    assert transport.run("echo cmd").stdout == "cmd\n"
    assert kept.output == "kept\n" and dropped.pending


def test_a_command_that_never_returns_loses_its_riders(ssh: tuple[SshTransport, LoopbackSshd, str]) -> None:
    transport, _, _ = ssh
    rider = transport.ride_along("echo read", after=True)
    with pytest.raises(GuestUnreachable, match=r"timed out after 1 s: sleep 30$"):
        transport.run("sleep 30", timeout_s=1)
    assert not rider.ran and rider.lost.startswith("the command it rode with never returned: guest command timed out")
    assert transport.run("echo next").stdout == "next\n"


SHELLS = [["/bin/sh", "-c"], *([[b, "sh", "-c"] for b in [shutil.which("busybox")] if b])]


@pytest.mark.parametrize("shell", SHELLS, ids=lambda s: s[0])
def test_the_script_on_the_hosts_shells(shell: list[str]) -> None:
    """dash and busybox's ash, the shells of a Debian guest and of the embedded one."""
    riders = [Rider("echo one"), Rider("exit 9", after=True), Rider("printf 'x'", after=True)]
    script, taken = wrapped("echo out; echo err >&2; exit 4", riders)
    done = subprocess.run([*shell, script], capture_output=True, text=True, timeout=30, check=False)
    assert taken.settle(done.returncode, done.stdout) == (4, "out\n") and done.stderr == "err\n"
    assert [(r.status, r.output) for r in riders] == [(0, "one\n"), (9, ""), (0, "x")]


def test_output_that_ends_early_leaves_the_riders_after_it_lost() -> None:
    riders = [Rider("echo a"), Rider("echo b", after=True)]
    taken = Taken(tuple(riders), nonce="n")
    # its own output as far as it came, the status the killed shell ended with
    assert taken.settle(137, "a\n\nvioconform-ride-n-0 0\nhalf") == (137, "half")
    assert riders[0].output == "a\n" and riders[1].lost == "the command it rode with ended before it (exit 137)"


def test_the_journal_lists_the_riders_where_the_guest_ran_them(tmp_path: Path) -> None:
    """What a reproducer hands over as the guest's side (fixtures/journal.py): a command and the scripts
    that rode with it, in the order the guest ran them, each with its own exit status."""
    key_path, pub = generate_run_key(tmp_path)
    server = LoopbackSshd(tmp_path, lambda _user: [pub])
    ssh = JournaledSsh(SshEndpoint("127.0.0.1", server.port, "root", key_path, server.host_key_line),
                       connect_timeout_s=20, root_shell=True)
    try:
        CURRENT["test"] = "t1"
        ssh.ride_along("echo mark", after=False)
        ssh.ride_along("exit 3", after=True)
        ssh.run("echo rule step")
        assert [(e.test, e.command, e.exit_status) for e in ssh.journal] == [
            ("t1", "echo mark", 0), ("t1", "echo rule step", 0), ("t1", "exit 3", 3)]
        ssh.run("true")
        assert ssh.journal[-1].command == "true" and len(ssh.journal) == 4
    finally:
        CURRENT["test"] = ""
        ssh.close()
        server.stop()
