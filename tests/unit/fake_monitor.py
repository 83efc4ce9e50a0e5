"""A stand-in for QEMU's monitor where QEMU cannot run (the fast lane): a unix socket that greets as
QMP does, then answers each command with the lines ``answer`` gives for it, keeping every command it got."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def fake_monitor(path: Path, answer: Callable[[dict[str, Any]], list[bytes]]) -> Iterator[list[dict[str, Any]]]:
    """Serve one connection at ``path``; yields the commands received so far (a list that grows)."""
    got: list[dict[str, Any]] = []
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)

    def serve() -> None:
        conn, _ = server.accept()
        conn.sendall(b'{"QMP": {"version": {}, "capabilities": []}}\r\n')
        for line in conn.makefile("rb"):
            message = json.loads(line)
            got.append(message)
            conn.sendall(b"".join(a + b"\r\n" for a in answer(message)))
        conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield got
    finally:
        server.close()
        thread.join(5)
