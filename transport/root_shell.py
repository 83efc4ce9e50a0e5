"""One root shell per SSH connection: ``sudo -n sh`` for a login that is not root (``sh`` for a
guest's root login) on one channel, fed the commands on its standard input, each framed so its
output, error output and exit status come back apart from the next command's.

Why: a ``sudo`` is the largest part of a guest command's cost on a systemd image under emulation
(it loads its plugins and PAM modules and logs, each time), then the exec channel's session and
login shell; one shell per connection leaves the SSH round trip and a ``fork`` (docs/benchmarks.md,
"The per-command cost").

Each command runs as ``( eval 'COMMAND' ) </dev/null`` in that shell, so it behaves as
``sudo -n sh -c 'COMMAND'`` did: its own subshell (``exit``, ``cd``, variables, traps and
``set`` options stay in it; a syntax error ends only the subshell, with status 2), standard input
empty, the exit status its own. Around it the shell prints a start line on both streams (output a
background job of an earlier command wrote after that command ended comes before it and is
dropped) and an end line on both, the one on standard output with the status; each line carries a
fresh random nonce, so no command's output can end its frame.
"""

from __future__ import annotations

import re
import secrets
import shlex
from dataclasses import dataclass, field

#: What the channel runs: a root shell that reads its commands from standard input.
SHELL_COMMAND = "sudo -n sh"
#: The same for a root login (the embedded guest's): no sudo, and still no channel, login shell and
#: ``sh`` start per command.
ROOT_SHELL_COMMAND = "sh"


@dataclass(frozen=True)
class Framed:
    """What one framed command gave: its exit status and both streams, as the command wrote them."""

    exit_status: int
    stdout: bytes
    stderr: bytes


@dataclass(frozen=True)
class Frame:
    """One command's frame: the script the shell is sent and the reading of its answer."""

    command: str
    nonce: str = field(default_factory=lambda: secrets.token_hex(8))

    @property
    def _start(self) -> str:
        return f"vioconform-start-{self.nonce}"

    @property
    def _end(self) -> str:
        return f"vioconform-end-{self.nonce}"

    def script(self) -> bytes:
        """The line(s) the shell reads: start lines, the command in its subshell, end lines."""
        s, e = self._start, self._end
        return (f"printf '%s\\n' {s}; printf '%s\\n' {s} >&2; ( eval {shlex.quote(self.command)} ) </dev/null; "
                f"printf '\\n%s %d\\n' {e} $?; printf '\\n%s\\n' {e} >&2\n").encode()

    def started(self, out: bytes) -> bool:
        """Whether the shell began this command (its start line is in ``out``)."""
        return f"{self._start}\n".encode() in out

    def read(self, out: bytes, err: bytes) -> Framed | None:
        """The command's result once both end lines are in; None before that."""
        end = re.search(rb"\n" + re.escape(self._end.encode()) + rb" (\d+)\n", out)
        err_end = err.find(f"\n{self._end}\n".encode())
        if end is None or err_end < 0:
            return None
        return Framed(int(end.group(1)), self._body(out[:end.start()]), self._body(err[:err_end]))

    def after_start(self, data: bytes) -> bytes:
        """What follows the start line in ``data`` (all of ``data`` where there is none)."""
        return self._body(data)

    def _body(self, data: bytes) -> bytes:
        line = f"{self._start}\n".encode()
        at = data.find(line)
        return data[at + len(line):] if at >= 0 else data
