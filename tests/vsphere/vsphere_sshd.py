"""A real SSH server on 127.0.0.1 for the vSphere tests: the "guest" and the "ESXi host".

Why not dropbear or OpenSSH's sshd: the tests run as root, and both authenticate root only
through ``/root/.ssh/authorized_keys``, which a test must not touch. This server speaks the
real SSH protocol (paramiko's server side: key exchange, host key, public-key auth, exec
channels), so the backend's client code runs unchanged against it; commands run with
``/bin/sh -c`` in a subprocess, with ``path_prepend`` in front of ``PATH`` (where a test puts
a recorded ``vscsiStats``, or a ``sudo`` that serves ``sudo -n``). Which keys may log in is
asked per user name; the host key can be swapped between connections (``use_host_key``), as a
guest's cloud-init installs the one the suite chose.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import socket
import subprocess
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO

import paramiko
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from paramiko.common import AUTH_FAILED, AUTH_SUCCESSFUL, OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED, OPEN_SUCCEEDED

#: user name -> the base64 public keys that may log in as that user
KeySource = Callable[[str], Iterable[str]]


class _Server(paramiko.ServerInterface):
    def __init__(self, authorized: KeySource) -> None:
        self.authorized = authorized
        self.commands: dict[int, bytes] = {}  # channel id -> its exec request
        self.changed = threading.Condition()

    def get_allowed_auths(self, username: str) -> str:
        return "publickey"

    def check_auth_publickey(self, username: str, key: paramiko.PKey) -> int:
        # paramiko's stubs do not re-export its result codes at the top level: take them from paramiko.common
        if key.get_base64() in set(self.authorized(username)):
            return AUTH_SUCCESSFUL
        return AUTH_FAILED

    def check_channel_request(self, kind: str, chanid: int) -> int:
        return OPEN_SUCCEEDED if kind == "session" else OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED

    def check_channel_exec_request(self, channel: paramiko.Channel, command: bytes) -> bool:
        with self.changed:
            self.commands[channel.get_id()] = command
            self.changed.notify_all()
        return True

    def wait_command(self, channel: paramiko.Channel, timeout_s: float) -> bytes | None:
        with self.changed:
            self.changed.wait_for(lambda: channel.get_id() in self.commands, timeout_s)
            return self.commands.pop(channel.get_id(), None)


def _pump(read: Callable[[int], bytes], send: Callable[[bytes], object]) -> None:
    """Copy a process's output stream to the channel until its end."""
    while block := read(65536):
        try:
            send(block)
        except (OSError, EOFError, paramiko.SSHException):
            return  # the client closed the channel: the rest goes nowhere, as with sshd


def _feed(channel: paramiko.Channel, stdin: IO[bytes]) -> None:
    """Copy what the client sends to the process's standard input; close it at the client's end."""
    try:
        while block := channel.recv(65536):
            stdin.write(block)
            stdin.flush()
    except (OSError, EOFError, paramiko.SSHException):
        pass
    finally:
        with contextlib.suppress(OSError):
            stdin.close()


class LoopbackSshd:
    """Serves SSH on a random loopback port until ``stop()``; ``host_key_line`` is what clients pin
    (the key it was made with; ``use_host_key`` serves another one to new connections)."""

    def __init__(self, directory: Path, authorized: KeySource, path_prepend: Iterable[Path] = ()) -> None:
        key = Ed25519PrivateKey.generate()
        key_file = directory / "sshd_host_ed25519"
        key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                               serialization.NoEncryption()))
        self._own_key = paramiko.Ed25519Key.from_private_key_file(str(key_file))
        self._host_key = self._own_key
        self.host_key_line = f"ssh-ed25519 {self._own_key.get_base64()}"
        self.authorized = authorized
        self.path_prepend = [str(p) for p in path_prepend]
        self.commands: list[str] = []
        #: every connection a client opened, in order (its transport tells whether it is still open)
        self.transports: list[paramiko.Transport] = []
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self.port: int = self._sock.getsockname()[1]
        self._stopping = False
        threading.Thread(target=self._accept, daemon=True, name=f"sshd:{self.port}").start()

    def _accept(self) -> None:
        while not self._stopping:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        transport = paramiko.Transport(conn)
        self.transports.append(transport)
        transport.add_server_key(self._host_key)
        server = _Server(self.authorized)
        try:
            transport.start_server(server=server)
            while transport.is_active():
                channel = transport.accept(timeout=60)
                if channel is None:
                    return
                command = server.wait_command(channel, 10)
                if command is None:
                    channel.close()
                    continue
                threading.Thread(target=self._run, args=(channel, command.decode()), daemon=True).start()
        except (paramiko.SSHException, EOFError, OSError):
            return
        finally:
            transport.close()

    def _run(self, channel: paramiko.Channel, command: str) -> None:
        """Run ``command`` with the channel as its standard streams, as sshd does: what the client
        sends is its input (closed at the client's end of data or close), its output goes back as
        it comes, then its exit status."""
        self.commands.append(command)
        env = dict(os.environ, PATH=os.pathsep.join([*self.path_prepend, os.environ.get("PATH", "")]))
        proc = subprocess.Popen(["/bin/sh", "-c", command], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=env)
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        feeders = [threading.Thread(target=_pump, args=(functools.partial(os.read, proc.stdout.fileno()), channel.sendall), daemon=True),
                   threading.Thread(target=_pump, args=(functools.partial(os.read, proc.stderr.fileno()), channel.sendall_stderr), daemon=True)]
        threading.Thread(target=_feed, args=(channel, proc.stdin), daemon=True).start()
        for t in feeders:
            t.start()
        try:
            status = proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            status = proc.wait()
        for t in feeders:
            t.join(10)
        try:
            if status >= 0:  # killed by a signal: sshd sends the signal's name, no status (paramiko reads -1)
                channel.send_exit_status(status)
            channel.close()
        except (OSError, EOFError, paramiko.SSHException):
            pass  # the client closed the channel, or its connection, first

    def use_host_key(self, private_openssh: str | None) -> None:
        """Present this ed25519 key (OpenSSH private key text) to new connections; None: the server's own."""
        self._host_key = (self._own_key if private_openssh is None
                          else paramiko.Ed25519Key.from_private_key(io.StringIO(private_openssh)))

    @property
    def serving_host_key_line(self) -> str:
        """The host key line new connections see now."""
        return f"ssh-ed25519 {self._host_key.get_base64()}"

    def open_connections(self) -> int:
        """How many client connections are open now (the server sees a client's close at once)."""
        return sum(t.is_active() for t in self.transports)

    def stop(self) -> None:
        self._stopping = True
        self._sock.close()
