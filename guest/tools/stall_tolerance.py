"""What the stall-tolerance rule asks the guest: a disk's command timeout, its requests in flight
(the probe sent while the host holds the disk: that it answers shows the guest's vCPUs run on),
a mark in the kernel log and the lines after it, and the disk's filesystems mounted read-only.

Each is one guest command at most (the mark can ride with the next one, the log and the mounts are
read together after the stall); POSIX shell, busybox's applets and ``/sys``, ``/proc`` only. The parsing
is model/parse/stall_evidence.py's.
"""

from __future__ import annotations

import re
import secrets
import shlex

from guest.tools.sysfs import valid_disk
from guest.tools.tool import GuestTool
from model.errors import ParseError
from model.parse.stall_evidence import TIMEOUT_SCRIPT, CommandTimeout, lines_after_mark, parse_command_timeout
from transport.ride_along import Rider, RidingShell
from transport.ssh import GuestCommandError

#: The mark's line in the kernel log: ``<5>`` (notice, below the console's level under ``quiet``).
MARK_LINE = "<5>vioconform: stall-tolerance mark {token}"
#: What one probe may take: the guest answers in 20-80 ms under TCG while the disk is held (measured
#: here); the hold's own bound decides what a slow answer means, this only ends a lost one.
PROBE_TIMEOUT_S = 60.0


class Stall(GuestTool):
    name = "stall"

    def command_timeout(self, disk: str, driver: str = "") -> CommandTimeout:
        """The disk's command timeout now (model.parse.stall_evidence.parse_command_timeout)."""
        return parse_command_timeout(self._run(TIMEOUT_SCRIPT.replace("{disk}", valid_disk(disk))).stdout, disk, driver)

    def inflight(self, disk: str) -> int:
        """The disk's requests in flight at its device now (reads + writes of ``/sys/block/X/inflight``)."""
        out = self._run(f"cat /sys/block/{valid_disk(disk)}/inflight", timeout_s=PROBE_TIMEOUT_S).stdout.split()
        try:
            return sum(int(x) for x in out[:2])
        except ValueError:
            raise ParseError(f"/sys/block/{disk}/inflight: {' '.join(out)!r} is not two counts") from None

    def mark(self) -> str:
        """Write a mark into the kernel log; its token, for :meth:`since`."""
        token = secrets.token_hex(8)
        self._run(_mark_command(token))
        return token

    def mark_with_next(self) -> tuple[str, Rider | None]:
        """:meth:`mark`, ahead of the guest's next command where the shell can carry it (no round trip of its
        own: transport/ride_along.py; the Rider, for ``guest.tools.tool.rode_ok`` once that command ran), else now."""
        if not isinstance(self.shell, RidingShell):
            return self.mark(), None
        token = secrets.token_hex(8)
        return token, self.shell.ride_along(_mark_command(token))

    def since(self, token: str) -> list[str]:
        """The kernel log's lines after the mark ``token`` (all of them where the buffer wrapped)."""
        return self.after_run(token)[0]

    def after_run(self, token: str, disk: str | None = None) -> tuple[list[str], list[str]]:
        """:meth:`since` and, for ``disk``, :meth:`readonly_mounts`, in one guest command."""
        if not re.fullmatch(r"[0-9a-f]+", token):
            raise ValueError(f"not a mark's token: {token!r}")
        mounts = "" if disk is None else f"; echo {_MOUNTS}; {_readonly_command(disk)}"
        ran = self._run(f"{{ {_LOG_COMMAND}; }}; s=$?{mounts}; exit $s", check=False)
        log, _, mounts_said = ran.stdout.partition(f"{_MOUNTS}\n")
        if not ran.ok:
            raise GuestCommandError(ran, "reading the guest's kernel log (dmesg, else journalctl -k)")
        return lines_after_mark(log, token)[0], _readonly(mounts_said)

    def readonly_mounts(self, disk: str) -> list[str]:
        """The mounts of the disk or its partitions that are read-only now (``/proc/mounts``)."""
        return _readonly(self._run(_readonly_command(disk)).stdout)


_LOG_COMMAND = "dmesg 2>/dev/null || journalctl -k -b -q --no-pager"
#: The line between the kernel log and the mounts in ``after_run``'s output.
_MOUNTS = "vioconform-stall-mounts"


def _mark_command(token: str) -> str:
    return f"echo {shlex.quote(MARK_LINE.format(token=token))} > /dev/kmsg"


def _readonly_command(disk: str) -> str:
    return f"grep -E '^/dev/{valid_disk(disk)}(p?[0-9]+)? ' /proc/mounts; true"


def _readonly(out: str) -> list[str]:
    return [line for line in out.splitlines() if "ro" in line.split()[3].split(",")] if out else []
