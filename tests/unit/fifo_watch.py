"""Tests of "a FIFO is refused at once": a watcher that notices (and ends) any read of a FIFO.

Opening a FIFO's write end without blocking succeeds only while a reader has it open: the watcher
tries that every few milliseconds, so a read that would wait for a writer for ever is recorded and
released (it sees end-of-file) instead of hanging the test. The suite's checks only stat a FIFO,
so with them nothing is ever recorded; without them every read is.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
from collections.abc import Iterator
from pathlib import Path

#: How often the watcher looks for a reader.
POLL_S = 0.02


@contextlib.contextmanager
def fifo_readers(fifos: list[Path], grace_s: float = 0.0) -> Iterator[list[Path]]:
    """Yields the list of ``fifos`` someone opened for reading while the block ran. ``grace_s``:
    look only after that long, for code that may open a FIFO for an instant (without blocking) to
    see what it is: then only a read that waited that long is recorded and released."""
    opened: list[Path] = []
    stop = threading.Event()

    def watch() -> None:
        if stop.wait(grace_s):
            return
        while not stop.wait(POLL_S):
            for f in fifos:
                try:
                    fd = os.open(f, os.O_WRONLY | os.O_NONBLOCK)
                except OSError as e:
                    if e.errno != errno.ENXIO:  # ENXIO: no reader, as it should be
                        raise
                    continue
                os.close(fd)  # the reader sees end-of-file and goes on
                opened.append(f)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield opened
    finally:
        stop.set()
        watcher.join()
