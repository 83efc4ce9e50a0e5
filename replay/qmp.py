"""QEMU's monitor (QMP) over a unix socket, with the standard library alone: the replay reads the
disk's counters (``query-blockstats``) around a counted job, as the run read them through libvirt.

Example::

    q = Qmp(Path("/tmp/x/qmp.sock"))
    reply = q.execute("query-blockstats")   # {"return": [...]}: connects on first use
    q.close()
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

#: Seconds to wait for QEMU's socket to accept a connection, and for each reply.
TIMEOUT_S = 30.0


class QmpError(Exception):
    """QEMU's monitor did not answer, or refused a command; the message says which."""


class Qmp:
    """One QMP session: the greeting read and capabilities negotiated on connect."""

    def __init__(self, path: Path, timeout_s: float = TIMEOUT_S) -> None:
        self.path = path
        self.timeout_s = timeout_s
        self.sock: socket.socket | None = None
        self.buffer = b""
        #: QEMU's events read so far (``{"event": "DEVICE_DELETED", "data": ..., "timestamp": ...}``)
        self.events: list[dict[str, Any]] = []

    def connect(self) -> None:
        deadline = time.monotonic() + self.timeout_s
        while True:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(self.timeout_s)
            try:
                sock.connect(str(self.path))
                break
            except OSError as e:
                sock.close()
                if time.monotonic() > deadline:
                    raise QmpError(f"QEMU's monitor {self.path} did not answer: {e.strerror or e}") from e
                time.sleep(0.1)
        self.sock = sock
        self._reply("the greeting", key="QMP")
        self.execute("qmp_capabilities")

    def execute(self, command: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """``command``'s reply (``{"return": ...}``); QmpError for an error or no answer."""
        if self.sock is None:
            self.connect()
        assert self.sock is not None
        message: dict[str, Any] = {"execute": command, **({"arguments": arguments} if arguments else {})}
        try:
            self.sock.sendall(json.dumps(message).encode() + b"\n")
        except OSError as e:
            raise QmpError(f"QEMU's monitor: {command} could not be sent: {e.strerror or e}") from e
        reply = self._reply(command)
        if "error" in reply:
            raise QmpError(f"QEMU's monitor refused {command}: {reply['error']}")
        return reply

    def _reply(self, what: str, key: str = "") -> dict[str, Any]:
        """The next message that is not an event (or that holds ``key``)."""
        assert self.sock is not None
        while True:
            while b"\n" not in self.buffer:
                try:
                    chunk = self.sock.recv(65536)
                except OSError as e:
                    raise QmpError(f"QEMU's monitor did not answer {what}: {e.strerror or e}") from e
                if not chunk:
                    raise QmpError(f"QEMU's monitor closed before it answered {what}")
                self.buffer += chunk
            line, _, self.buffer = self.buffer.partition(b"\n")
            try:
                message = json.loads(line)
            except ValueError as e:
                raise QmpError(f"QEMU's monitor answered {what} with no JSON: {line[:200]!r}") from e
            if isinstance(message, dict) and "event" in message and not key:
                self.events.append(message)
            elif isinstance(message, dict) and (key in message if key else True):
                return message

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None
