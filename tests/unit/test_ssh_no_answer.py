"""An SSH server that accepts TCP and never speaks SSH is named, within the bound, for the guest's SSH
(transport/ssh.py) and the libvirt host's (hypervisors/libvirt/hostlink.py): "the server at
HOST:PORT did not answer SSH within N s", not paramiko's "No existing session" and its traceback.

The servers are real sockets on 127.0.0.1: one that accepts and stays silent, one that closes each
connection at once, one that sends a banner and then nothing (a handshake that never finishes).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hypervisors.libvirt.hostlink import HOST_SSH_TIMEOUTS, HostAddress, HostLink, HostLinkError
from model.types import SshEndpoint
from transport.ssh import GUEST_SSH_TIMEOUTS, GuestUnreachable, SshTimeouts, SshTransport, generate_run_key

#: The short timeouts these tests give (the defaults are 10-30 s a step; their sums are checked below).
STEP_S = 2.0
#: How much later than its timeouts a connect may return here: thread start-up and a 0.5 s retry
#: pause, on a loaded 2-core machine.
SLACK_S = 3.0
#: What each server kind is called, and what the suite says about it.
SAYS = {"silent": r"the server at 127\.0\.0\.1:\d+ did not answer SSH within 2 s \(it accepted the TCP connection "
                  r"and sent nothing\)",
        "closes": r"the server at 127\.0\.0\.1:\d+ sent no SSH banner",
        "banner-only": r"the server at 127\.0\.0\.1:\d+ \(SSH-2\.0-OpenSSH_9\.2p1\) did not finish the SSH "
                       r"handshake within 2 s"}


@pytest.fixture(params=list(SAYS))
def server(request: pytest.FixtureRequest) -> Iterator[tuple[str, int]]:
    """(kind, port) of a TCP server on 127.0.0.1 that does not speak SSH (or stops after its banner)."""
    kind = request.param
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    held: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if kind == "closes":
                conn.close()
                continue
            if kind == "banner-only":
                conn.sendall(b"SSH-2.0-OpenSSH_9.2p1\r\n")
            held.append(conn)  # and never a word more

    thread = threading.Thread(target=serve, name=f"ssh-{kind}", daemon=True)
    thread.start()
    try:
        yield kind, listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(5)
        listener.close()
        for c in held:
            c.close()


def test_the_guest_ssh_names_a_server_that_does_not_speak(server: tuple[str, int], tmp_path: Path,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    kind, port = server
    key_path, pub = generate_run_key(tmp_path)
    endpoint = SshEndpoint("127.0.0.1", port, "root", key_path, f"ssh-ed25519 {pub}")
    caplog.set_level(logging.DEBUG)
    t0 = time.monotonic()
    with pytest.raises(GuestUnreachable, match=rf"^SSH to root@127\.0\.0\.1:{port} failed for 2 s: {SAYS[kind]}"):
        SshTransport(endpoint, connect_timeout_s=STEP_S)
    assert time.monotonic() - t0 < STEP_S + SLACK_S
    assert "Traceback" not in caplog.text and "No existing session" not in caplog.text, caplog.text


def test_the_host_link_names_a_server_that_does_not_speak(server: tuple[str, int], tmp_path: Path,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    kind, port = server
    known = tmp_path / "known_hosts"
    known.write_text("")
    address = HostAddress.from_uri(f"qemu+ssh://root@127.0.0.1:{port}/system?known_hosts={known}")
    caplog.set_level(logging.DEBUG)
    t0 = time.monotonic()
    with pytest.raises(HostLinkError, match=rf"^libvirt host root@127\.0\.0\.1:{port}: {SAYS[kind]}"):
        HostLink(address, SshTimeouts(connect_s=STEP_S, banner_s=STEP_S, handshake_s=STEP_S))
    # at most the banner and the handshake wait (the TCP connection is instant here)
    assert time.monotonic() - t0 < 2 * STEP_S + SLACK_S
    assert "Traceback" not in caplog.text and "No existing session" not in caplog.text, caplog.text


def test_default_timeouts_stay_within_their_bounds() -> None:
    """A libvirt host that fails at any step is reported within the 30 s the suite allows a bad host;
    the guest's steps fit in the boot wait's probe timeouts."""
    host = HOST_SSH_TIMEOUTS
    assert host.connect_s + host.banner_s + host.handshake_s <= 30
    assert GUEST_SSH_TIMEOUTS.within(3.0) == SshTimeouts(3.0, 3.0, 3.0)
    assert GUEST_SSH_TIMEOUTS.within(-1.0).banner_s > 0
