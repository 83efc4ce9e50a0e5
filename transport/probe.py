"""One SSH handshake with a booting guest, told apart by how far it got.

A guest reached through QEMU's user-mode port forward accepts the TCP connection on the host
side whatever the guest does (QEMU accepts, then tries the guest's port 22 and closes when nothing
answers), so only the SSH banner shows that the guest's SSH server runs. Past the banner the
probe checks the host key against the pinned one (no trust on first use) and then logs in with
the run's key, so a boot wait can tell "not up yet" from "up, but not the guest we prepared"
(another host key: the seed was not applied) and from "our key is refused".
"""

from __future__ import annotations

import base64
import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

import paramiko

#: paramiko logs a failed handshake with its traceback at ERROR; a failed probe is expected while a
#: guest boots, and the probe's result says what happened.
PROBE_LOG = "vioconform.probe.paramiko"
logging.getLogger(PROBE_LOG).setLevel(logging.CRITICAL + 1)

#: TCP connect to the forward on 127.0.0.1: instant unless QEMU is gone.
CONNECT_TIMEOUT_S = 5.0
#: Seconds a connection may stay silent before its banner counts as missing. QEMU's port forward
#: holds a connection open, silent, while the guest's network is not up yet, and passes the banner
#: on once its sshd answers; so a long wait loses nothing (the boot wait probes in a thread of its own).
BANNER_TIMEOUT_S = 20.0
#: Key exchange and authentication: under TCG a few hundred ms to 2 s here.
HANDSHAKE_TIMEOUT_S = 30.0


class Stage(Enum):
    """How far a probe got."""

    NO_CONNECTION = "no TCP connection"
    NO_BANNER = "connection closed or silent before an SSH banner"
    SSH_ERROR = "SSH handshake failed"
    HOST_KEY_MISMATCH = "another host key"
    AUTH_REFUSED = "key refused"
    READY = "logged in"


@dataclass(frozen=True)
class ProbeResult:
    stage: Stage
    #: what was seen: the exception's words, or the presented host key line on a mismatch
    detail: str = ""
    #: the server's banner ("SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3"), once one was read
    banner: str = ""

    @property
    def spoke_ssh(self) -> bool:
        return self.stage not in (Stage.NO_CONNECTION, Stage.NO_BANNER)


def key_line(key: paramiko.PKey) -> str:
    return f"{key.get_name()} {key.get_base64()}"


def pinned_key(line: str) -> paramiko.PKey:
    """The ``ssh-ed25519 AAAA...`` line (a comment after it is ignored) as a paramiko key."""
    kind, _, rest = line.strip().partition(" ")
    data = base64.b64decode(rest.split()[0])
    if kind == "ssh-ed25519":
        return paramiko.Ed25519Key(data=data)
    return paramiko.PKey.from_type_string(kind, data)


def load_private_key(path: Path) -> paramiko.PKey:
    """An unencrypted private key file of any type paramiko reads (OpenSSH or PEM)."""
    return paramiko.PKey.from_path(str(path))


def probe(host: str, port: int, user: str, client_key: paramiko.PKey, host_key_line: str,
          via: Callable[[str, int], Any] | None = None) -> ProbeResult:
    """Connect, read the banner, compare the host key with ``host_key_line``, authenticate as
    ``user`` with ``client_key``; close again. Never raises for what the guest does. ``via``
    connects where ``host:port`` is a remote libvirt host's (``SshEndpoint.via``)."""
    try:
        sock = via(host, port) if via is not None else socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S)
    except OSError as e:
        return ProbeResult(Stage.NO_CONNECTION, str(e))
    transport = paramiko.Transport(sock)
    transport.set_log_channel(PROBE_LOG)
    try:
        expected = pinned_key(host_key_line)
        # Ask for the pinned key's type first, as paramiko's SSHClient does for a known host.
        options = transport.get_security_options()
        options.key_types = [expected.get_name(), *(t for t in options.key_types if t != expected.get_name())]
        transport.banner_timeout = BANNER_TIMEOUT_S
        try:
            transport.start_client(timeout=HANDSHAKE_TIMEOUT_S)
        except (paramiko.SSHException, EOFError, OSError) as e:
            banner = transport.remote_version or ""
            return ProbeResult(Stage.SSH_ERROR if banner else Stage.NO_BANNER, str(e) or type(e).__name__, banner)
        banner = transport.remote_version or ""
        presented = transport.get_remote_server_key()
        if presented.get_name() != expected.get_name() or presented.asbytes() != expected.asbytes():
            return ProbeResult(Stage.HOST_KEY_MISMATCH, key_line(presented), banner)
        try:
            transport.auth_publickey(user, client_key)
        except paramiko.AuthenticationException as e:
            return ProbeResult(Stage.AUTH_REFUSED, str(e), banner)
        except (paramiko.SSHException, EOFError, OSError) as e:
            return ProbeResult(Stage.SSH_ERROR, str(e) or type(e).__name__, banner)
        return ProbeResult(Stage.READY, "", banner)
    finally:
        transport.close()
        sock.close()
