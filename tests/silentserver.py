"""A TCP server on loopback that accepts every connection and never says a word: a database, SSH
or any other server that hangs after accepting (an overloaded host, a wrong port on a proxy)."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass
class SilentServer:
    port: int
    #: The connections it accepted (and holds open, silent), in order
    accepted: list[socket.socket] = field(default_factory=list)


@contextlib.contextmanager
def silent_server() -> Iterator[SilentServer]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.2)
    server = SilentServer(int(listener.getsockname()[1]))
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                server.accepted.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, name="silent-server", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        stop.set()
        thread.join(5)
        for conn in server.accepted:
            conn.close()
        listener.close()
