"""The block layer's error lines in a guest's kernel log, and the part of the log a window added.

Linux prints one line per request that ends in an error (block/blk-mq.c ``blk_print_req_error``,
Linux 5.x-6.x; ``blk_update_request:`` or ``end_request:`` before it on older kernels)::

    [  155.198423] I/O error, dev sdb, sector 2128 op 0x1:(WRITE) flags 0x8800 phys_seg 1 prio class 2
    [   12.000000] critical medium error, dev nvme0n1, sector 2112 op 0x0:(READ) flags 0x0 ...

The word before ``error`` is the block status (``I/O`` for BLK_STS_IOERR, ``critical medium`` for
BLK_STS_MEDIUM, ...); the sector is the request's first, in 512-byte sectors. Those lines are rate
limited: at most ``RATELIMIT_BURST`` in ``RATELIMIT_INTERVAL_S`` (``printk_ratelimited``, the kernel's
DEFAULT_RATELIMIT_BURST and DEFAULT_RATELIMIT_INTERVAL), for all disks together.

Example::

    w = window_after(dmesg_text, mark="[  150.000000] sd 0:0:1:0: [sdb] Attached SCSI disk")
    [(e.device, e.sector, e.op) for e in w.errors]  # [("sdb", 2128, "WRITE")]
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: printk_ratelimited's burst and interval (include/linux/ratelimit_types.h: DEFAULT_RATELIMIT_BURST 10,
#: DEFAULT_RATELIMIT_INTERVAL 5 * HZ): more error lines than this in one interval are dropped.
RATELIMIT_BURST = 10
RATELIMIT_INTERVAL_S = 5.0

_TIMESTAMP = re.compile(r"^\[\s*(\d+\.\d+)\]")
_ERROR = re.compile(r"(?:^|[\]:]\s*)(?P<status>[A-Za-z/ ]+?) error, dev (?P<dev>[^\s,]+), sector (?P<sector>\d+)"
                    r"(?: op 0x[0-9a-f]+:\((?P<op>[A-Z_]+)\))?")


@dataclass(frozen=True)
class KernelIoError:
    """One request the guest's block layer ended with an error, as its kernel logged it."""

    device: str  # sdb, vda, nvme0n1
    sector: int  # the request's first 512-byte sector
    op: str  # "READ", "WRITE", ... ("" where the kernel does not say)
    status: str  # "I/O", "critical medium", ...
    seconds: float | None  # the line's timestamp (None without one)
    line: str


@dataclass(frozen=True)
class KernelWindow:
    """What the kernel logged after a mark: its lines, the error lines among them, and how many error
    lines it had printed in the rate-limit interval before the window opened (the first of its error
    lines, or the mark where the limit dropped them all), which the limit counts."""

    lines: tuple[str, ...]
    errors: tuple[KernelIoError, ...]
    printed_before: int

    def errors_of(self, device: str, op: str) -> tuple[KernelIoError, ...]:
        return tuple(e for e in self.errors if e.device == device and e.op in (op.upper(), ""))


def timestamp(line: str) -> float | None:
    m = _TIMESTAMP.match(line)
    return float(m.group(1)) if m else None


def io_error(line: str) -> KernelIoError | None:
    """The block-layer error a kernel log line reports, or None."""
    m = _ERROR.search(line)
    if m is None:
        return None
    return KernelIoError(m.group("dev"), int(m.group("sector")), m.group("op") or "",
                         m.group("status").strip(), timestamp(line), line)


def window_after(text: str, mark: str) -> KernelWindow:
    """The lines of the kernel log ``text`` after the line ``mark`` (the log's last line when the window
    opened; "" for a log that was empty). Where the mark is gone (the log wrapped), the lines
    stamped later than it."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not mark:
        start = 0
    elif mark in lines:
        start = len(lines) - lines[::-1].index(mark)
    else:
        since = timestamp(mark)
        start = next((i for i, ln in enumerate(lines) if since is None or (timestamp(ln) or 0.0) > since), len(lines))
    window = lines[start:]
    errors = tuple(e for e in (io_error(ln) for ln in window) if e is not None)
    # When the window opened: its first error line, else (the limit dropped them all) the mark's time,
    # which is no earlier than the last line before the window.
    opened = next((e.seconds for e in errors if e.seconds is not None), None)
    if opened is None:
        opened = timestamp(mark) if mark else None
    printed_before = 0
    if opened is not None:
        for ln in lines[:start]:
            e = io_error(ln)
            if e is not None and e.seconds is not None and opened - RATELIMIT_INTERVAL_S <= e.seconds <= opened:
                printed_before += 1
    return KernelWindow(tuple(window), errors, printed_before)


def room_then(command: str, room_for: int = 0) -> str:
    """The guest's shell command that runs ``command`` once the kernel's rate limit of block-layer error
    lines has room for ``room_for`` more (it waits at most the limit's interval): it counts the lines
    ``dmesg`` stamped within the last interval (at most RATELIMIT_BURST in RATELIMIT_INTERVAL_S, for
    all disks together). ``command`` alone for ``room_for`` 0."""
    if room_for <= 0:
        return command
    allowed = RATELIMIT_BURST - room_for
    # printk's clock and /proc/uptime agree within milliseconds in a VM; half a second more for that
    window = RATELIMIT_INTERVAL_S + 0.5
    count = ("dmesg | awk -v now=\"$(cut -d' ' -f1 /proc/uptime)\" "
             f"'match($0, /^\\[ *[0-9]+\\.[0-9]+\\]/) && index($0, \" error, dev \") "
             f"{{ if (substr($0, 2, RLENGTH - 2) + 0 > now - {window:g}) n++ }} END {{ print n + 0 }}'")
    tries = int(window / 0.5) + 1
    return (f"i=0; while [ $i -lt {tries} ] && [ \"$({count})\" -gt {allowed} ]; do sleep 0.5 2>/dev/null || usleep 500000; "
            f"i=$((i + 1)); done; {command}")
