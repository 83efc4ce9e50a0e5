"""A refused check channel is an answer: the guest's SSH server said no at once, so the guest is not
hung. In a nine-controller run under load a guest was reported dead with "its SSH server did not
answer for 15 s (Unable to open channel.)" five seconds into its fio command; only silence for the
whole timeout is a hang (transport/ssh.py's SshTransport._check_ssh_answers)."""

from __future__ import annotations

from pathlib import Path

import paramiko
import pytest

from model.errors import GuestDied, GuestDiedEarlier
from model.types import SshEndpoint
from transport import ssh
from transport.ssh import SshTransport


class _Transport:
    def __init__(self, error: Exception) -> None:
        self.error = error

    def is_active(self) -> bool:
        return True

    def open_session(self, timeout: float) -> paramiko.Channel:
        raise self.error


class _Client:
    def __init__(self, transport: _Transport) -> None:
        self.transport = transport

    def get_transport(self) -> _Transport:
        return self.transport


def _ssh(error: Exception) -> SshTransport:
    t = SshTransport.__new__(SshTransport)
    t.endpoint = SshEndpoint("127.0.0.1", 2222, "root", Path("key"), "")
    t._liveness, t._console, t._gone = None, None, None
    t._client = _Client(_Transport(error))  # type: ignore[assignment]
    return t


@pytest.mark.parametrize("error", [paramiko.ChannelException(1, "Administratively prohibited"),
                                   paramiko.SSHException("Unable to open channel.")])
def test_a_refused_channel_is_not_a_dead_guest(error: Exception) -> None:
    _ssh(error)._check_ssh_answers("fio ...", 0.0)  # no GuestDied


def test_silence_for_the_whole_timeout_is_a_dead_guest(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[float] = []

    def clock() -> float:  # the channel open took the whole timeout: every later reading is that late
        calls.append(0.0)
        return 100.0 if len(calls) == 1 else 100.0 + ssh.SSH_ANSWER_TIMEOUT_S

    monkeypatch.setattr("transport.ssh.time.monotonic", clock)
    t = _ssh(paramiko.SSHException("Timeout opening channel."))
    with pytest.raises(GuestDied, match="did not answer for 15 s") as died:
        t._check_ssh_answers("fio ...", 0.0)
    assert not isinstance(died.value, GuestDiedEarlier)  # the rule it happened under is the ERROR
    # every later command (a later rule) fails at once: that rule never ran (NOT RUN, fixtures/outcomes.py)
    with pytest.raises(GuestDiedEarlier, match="the guest died earlier: its SSH server did not answer"):
        t.run("true")
