"""Where a benchmark's seconds go: named steps and guest commands stamped with the seconds since the
process started (``bench.time_to_verdict --stamps``). Each step is a function wrapped in place for
the process's life: a line as it starts, one as it ends with its own time; each guest command one
line with its time and its first characters.

    stamps = Stamps(since_start_s=process_age_s(), out=sys.stderr)
    stamps.wrap(LibvirtBackend, "boot")
    stamps.wrap_commands(SshTransport)
"""

from __future__ import annotations

import functools
import time
from typing import Any, TextIO

#: How much of a guest command its line shows.
COMMAND_CHARS = 70


class Stamps:
    """Prints ``[  7.04] > prepare_disk`` and ``[  7.55] < prepare_disk 0.516 s`` lines to ``out``,
    the seconds counted from the process's start (``since_start_s``: its age when this was made)."""

    def __init__(self, since_start_s: float, out: TextIO) -> None:
        self.start = time.monotonic() - since_start_s
        self.out = out

    def line(self, what: str) -> None:
        print(f"[{time.monotonic() - self.start:6.2f}] {what}", file=self.out, flush=True)

    def wrap(self, owner: Any, name: str) -> None:
        """Stamp each call of ``owner.name`` (a module's function or a class's method)."""
        inner = getattr(owner, name)

        @functools.wraps(inner)
        def stamped(*args: Any, **kwargs: Any) -> Any:
            t0 = time.monotonic()
            self.line(f"> {name}")
            try:
                return inner(*args, **kwargs)
            finally:
                self.line(f"< {name} {time.monotonic() - t0:.3f} s")

        setattr(owner, name, stamped)

    def wrap_commands(self, transport: Any) -> None:
        """Stamp each guest command ``transport.run`` runs (its first argument), with its time."""
        inner = transport.run

        @functools.wraps(inner)
        def run(this: Any, command: str, *args: Any, **kwargs: Any) -> Any:
            t0 = time.monotonic()
            try:
                return inner(this, command, *args, **kwargs)
            finally:
                self.line(f"  command {time.monotonic() - t0:.3f} s {command.strip()[:COMMAND_CHARS]!r}")

        transport.run = run
