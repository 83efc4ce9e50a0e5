"""Runs commands in a guest over SSH (paramiko), with the guest's host key pinned.

The suite never switches host-key checking off: the backend learns the key the guest
presents through a trusted side channel (the embedded guest prints it on its serial
console) and every connection rejects any other key.
"""

from __future__ import annotations

import base64
import logging
import shlex
import socket
import time
from dataclasses import dataclass
from pathlib import Path

import paramiko
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from hypervisors.base import SshEndpoint


# paramiko logs every connection at INFO; the suite's own progress lines are what a user reads.
logging.getLogger("paramiko").setLevel(logging.WARNING)


class GuestCommandError(RuntimeError):
    """A guest command failed; carries its output so the failure can show it."""

    def __init__(self, result: "CommandResult", hint: str = "") -> None:
        self.result = result
        msg = (f"guest command failed (exit {result.exit_status}): {result.command}\n"
               f"stdout: {result.stdout.strip()[-1500:] or '(empty)'}\n"
               f"stderr: {result.stderr.strip()[-1500:] or '(empty)'}")
        super().__init__(msg + (f"\n{hint}" if hint else ""))


class GuestUnreachable(RuntimeError):
    """SSH to the guest could not be established; the message says what was tried."""


@dataclass(frozen=True)
class CommandResult:
    command: str
    exit_status: int
    stdout: str
    stderr: str
    duration_s: float

    @property
    def ok(self) -> bool:
        return self.exit_status == 0


def generate_run_key(directory: Path) -> tuple[Path, str]:
    """Write a fresh ed25519 private key for this run; return its path and the public key's base64."""
    key = Ed25519PrivateKey.generate()
    path = directory / "id_ed25519"
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                       serialization.NoEncryption()))
    path.chmod(0o600)
    pub = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return path, pub.decode().split()[1]


def _pinned_key(line: str) -> paramiko.PKey:
    kind, _, blob = line.strip().partition(" ")
    data = base64.b64decode(blob.split()[0])
    if kind == "ssh-ed25519":
        return paramiko.Ed25519Key(data=data)
    return paramiko.PKey.from_type_string(kind, data)


class SshTransport:
    """One SSH connection to a guest; ``run`` executes a shell command as the endpoint's user."""

    def __init__(self, endpoint: SshEndpoint, connect_timeout_s: float = 60.0) -> None:
        self.endpoint = endpoint
        self._client = self._connect(connect_timeout_s)

    def _connect(self, timeout_s: float) -> paramiko.SSHClient:
        ep = self.endpoint
        deadline = time.monotonic() + timeout_s
        last: Exception | None = None
        while time.monotonic() < deadline:
            client = paramiko.SSHClient()
            host_id = ep.host if ep.port == 22 else f"[{ep.host}]:{ep.port}"
            key = _pinned_key(ep.host_key)
            client.get_host_keys().add(host_id, key.get_name(), key)
            client.set_missing_host_key_policy(paramiko.RejectPolicy())
            try:
                client.connect(ep.host, port=ep.port, username=ep.user, key_filename=str(ep.key_path),
                               timeout=10, banner_timeout=20, auth_timeout=20,
                               allow_agent=False, look_for_keys=False)
                return client
            except paramiko.BadHostKeyException as e:
                client.close()
                raise GuestUnreachable(f"guest at {host_id} presented a host key other than the pinned one: {e}") from e
            except (OSError, paramiko.SSHException, socket.timeout) as e:
                client.close()
                last = e
                time.sleep(0.5)
        raise GuestUnreachable(f"SSH to {ep.user}@{ep.host}:{ep.port} failed for {timeout_s:.0f} s: {last}")

    def run(self, command: str, check: bool = True, timeout_s: float = 300.0, hint: str = "") -> CommandResult:
        """Run ``command`` with /bin/sh; raise GuestCommandError on a non-zero exit if ``check``."""
        t0 = time.monotonic()
        try:
            _, out, err = self._client.exec_command(command, timeout=timeout_s)
            stdout = out.read().decode(errors="replace")
            stderr = err.read().decode(errors="replace")
            status = out.channel.recv_exit_status()
        except (socket.timeout, paramiko.SSHException) as e:
            raise GuestUnreachable(f"guest command timed out or lost its connection after "
                                   f"{time.monotonic() - t0:.0f} s: {command}: {e}") from e
        result = CommandResult(command, status, stdout, stderr, time.monotonic() - t0)
        if check and not result.ok:
            raise GuestCommandError(result, hint)
        return result

    def read_file(self, path: str) -> str:
        return self.run(f"cat {shlex.quote(path)}").stdout

    def close(self) -> None:
        self._client.close()
