"""Scripts that ride along with the next guest command: one round trip where there were two.

A guest command costs a round trip (about 0.1 s on the embedded guest, 0.3 s on a systemd image under
TCG, seconds on a loaded host). A script that only has to run before or after whatever the suite runs
next (the kernel-log check's mark before a rule, its read-back after it) is sent with that command
instead of on its own: :meth:`Taken.script` makes of the command and its riders one script,

    ( eval 'BEFORE' ) </dev/null 2>&1; printf '\\n%s %d\\n' vioconform-ride-NONCE-0 $?
    ( eval 'COMMAND' ); s=$?; printf '\\n%s %d\\n' vioconform-ride-NONCE-1 $s
    ( eval 'AFTER' ) </dev/null 2>&1; printf '\\n%s %d\\n' vioconform-ride-NONCE-2 $?
    exit $s

and :meth:`Taken.settle` gives back the command's own output and exit status, as if it had run alone,
and gives each rider its script's output (standard output and error together) and exit status. The
command runs in its own subshell as the root shell runs every command (transport/root_shell.py):
``exit``, variables, traps and ``set`` options stay in it, and a syntax error in it ends only it. The
nonce is fresh for every command, so no output can end a segment early.

Example::

    mark = transport.ride_along("echo mark > /dev/kmsg")      # nothing sent yet
    transport.run("blkdiscard /dev/vdb")                      # one command: the mark, then blkdiscard
    mark.status, mark.output                                  # 0, ""
"""

from __future__ import annotations

import re
import secrets
import shlex
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable


@dataclass(eq=False)
class Rider:
    """A script that runs in the guest with the next command, before it or (``after``) after it.
    ``status`` is None until that command ran; ``lost`` then says why it has none (the command
    never returned, or its output ended before the rider's)."""

    script: str
    after: bool = False
    status: int | None = None
    output: str = ""
    lost: str = ""

    @property
    def ran(self) -> bool:
        return self.status is not None

    @property
    def pending(self) -> bool:
        """Not sent yet: no command ran since it was queued."""
        return self.status is None and not self.lost


@runtime_checkable
class RidingShell(Protocol):
    """A guest shell that can send scripts along with its next command (``SshTransport`` is one)."""

    def ride_along(self, script: str, after: bool = False) -> Rider: ...

    def drop_rider(self, rider: Rider) -> None: ...


@dataclass(frozen=True)
class Taken:
    """The riders one command carries, in the order they run, and the nonce of its segments' ends."""

    riders: tuple[Rider, ...]
    nonce: str = field(default_factory=lambda: secrets.token_hex(8))

    def _order(self) -> list[Rider | None]:
        """The segments in the order they run; None is the command's own."""
        return [*(r for r in self.riders if not r.after), None, *(r for r in self.riders if r.after)]

    def _end(self, i: int) -> str:
        return f"vioconform-ride-{self.nonce}-{i}"

    def script(self, command: str) -> str:
        """The one script the guest is sent: each rider and the command, each segment's end printed."""
        lines = []
        for i, r in enumerate(self._order()):
            if r is None:
                lines.append(f"( eval {shlex.quote(command)} ); s=$?; printf '\\n%s %d\\n' {self._end(i)} $s")
            else:
                lines.append(f"( eval {shlex.quote(r.script)} ) </dev/null 2>&1; printf '\\n%s %d\\n' {self._end(i)} $?")
        return "\n".join([*lines, "exit $s"])

    def settle(self, exit_status: int, stdout: str) -> tuple[int, str]:
        """The command's own exit status and output from the wrapped script's; each rider given its output
        and status, or ``lost`` where its segment is not in the output (the script was killed)."""
        at = 0
        own: tuple[int, str] | None = None
        order = self._order()
        for i, r in enumerate(order):
            end = re.compile(r"\n" + re.escape(self._end(i)) + r" (\d+)\n").search(stdout, at)
            if end is None:  # the script ended here (killed): this segment and those after it never ended
                for later in order[i:]:
                    if later is not None:
                        later.lost = f"the command it rode with ended before it (exit {exit_status})"
                break
            segment, at = stdout[at:end.start()], end.end()
            if r is None:
                own = (int(end.group(1)), segment)
            else:
                r.status, r.output = int(end.group(1)), segment
        # a command that never reached its end: what it printed, the status the shell ended with
        return own if own is not None else (exit_status, stdout[at:])

    def never_returned(self, why: str) -> None:
        for r in self.riders:
            r.lost = f"the command it rode with never returned: {why}"


class Riders:
    """The riders queued on one transport for its next command (any thread's)."""

    def __init__(self) -> None:
        self._queued: list[Rider] = []
        self._lock = threading.Lock()

    def add(self, script: str, after: bool = False) -> Rider:
        rider = Rider(script, after)
        with self._lock:
            self._queued.append(rider)
        return rider

    def drop(self, rider: Rider) -> None:
        """Unqueue ``rider`` (nothing happens where it was sent already)."""
        with self._lock:
            self._queued = [r for r in self._queued if r is not rider]

    def take(self) -> Taken | None:
        """The queued riders, for the command about to be sent (None: none queued)."""
        with self._lock:
            riders, self._queued = tuple(self._queued), []
        return Taken(riders) if riders else None


def wrapped(command: str, riders: Sequence[Rider]) -> tuple[str, Taken]:
    """``command`` with ``riders`` in one script, and what reads its result apart (tests run it on the host)."""
    taken = Taken(tuple(riders))
    return taken.script(command), taken
