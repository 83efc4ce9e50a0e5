"""The guest's kernel log as ``dmesg -r`` or ``journalctl -k -o short-monotonic`` prints it.

The kernel-log check (model/kernel_log_check.py) reads the lines the guest's kernel logged during a
rule; the guest's kernel-log tool (guest/tools/kernel_log_reader.py) prints them in one of two forms:

- ``dmesg -r`` (util-linux, and busybox's applet, which reads the same buffer with ``syslog(2)``):
  ``<4>[  207.065440] WARNING: CPU: 1 PID: 20 at kernel/sched/core.c:752 update_rq_clock+0xb6/0x190``.
  The number in angle brackets is the record's priority, ``facility * 8 + level``: the kernel's own
  messages have facility 0, a line a program wrote into ``/dev/kmsg`` has a facility of 1 or more
  (the kernel gives every such line at least LOG_USER, so that no program can pass for the kernel);
- ``journalctl -k -o short-monotonic`` (where ``dmesg`` cannot read the buffer): ``[  207.065440]
  host kernel: WARNING: CPU: ...``; a program's line into ``/dev/kmsg`` carries its own name where
  the kernel's carry ``kernel``.

Example::

    lines = parse_kernel_log("<3>[   41.905906] INFO: task sh:216 blocked for more than 1 seconds.\\n", "dmesg")
    lines[0].text, lines[0].from_kernel  # ("INFO: task sh:216 blocked for more than 1 seconds.", True)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from model.errors import ParseError

#: The forms parse_kernel_log reads (guest/tools/kernel_log_reader.py names the one it printed).
SOURCES = ("dmesg", "journal")

_DMESG = re.compile(r"^(?:<(?P<pri>\d+)>)?(?:\[\s*(?P<time>\d+\.\d+)\]\s?)?(?P<text>.*)$")
_JOURNAL = re.compile(r"^\[\s*(?P<time>\d+\.\d+)\]\s+\S+\s+(?P<ident>[^\s:\[]+)(?:\[\d+\])?:\s?(?P<text>.*)$")
#: The kernel's facility (LOG_KERN); a priority's facility is its value divided by 8.
KERNEL_FACILITY = 0


@dataclass(frozen=True)
class KernelLogLine:
    """One line of the guest's kernel log: its text without the priority and time prefixes, the
    kernel's time stamp (seconds since boot; None where the line had none), its level (0 emergency
    to 7 debug; None where the form does not say it) and whether the kernel itself logged it (a
    program's line written into ``/dev/kmsg`` is not the kernel's)."""

    text: str
    time_s: float | None
    level: int | None
    from_kernel: bool

    def quoted(self) -> str:
        """The line as dmesg shows it: ``[  207.065440] WARNING: CPU: 1 PID: 20 at ...``."""
        return f"[{self.time_s:12.6f}] {self.text}" if self.time_s is not None else self.text


def parse_kernel_log(text: str, source: str) -> list[KernelLogLine]:
    """The lines of ``text`` as the guest printed them from ``source`` ("dmesg" or "journal");
    empty lines are left out. ParseError for a source this module does not read."""
    if source not in SOURCES:
        raise ParseError(f"kernel log from {source!r}: not a form the kernel-log parser reads ({', '.join(SOURCES)})")
    out: list[KernelLogLine] = []
    for raw in text.splitlines():
        if not raw.strip():
            continue
        if source == "journal":
            j = _JOURNAL.match(raw)
            if j:
                out.append(KernelLogLine(j.group("text"), float(j.group("time")), None, j.group("ident") == "kernel"))
            else:  # a line of a record that spans several (journalctl indents them): the kernel's
                out.append(KernelLogLine(raw.strip(), None, None, True))
            continue
        m = _DMESG.match(raw)
        assert m is not None  # every part of the pattern is optional
        pri = int(m.group("pri")) if m.group("pri") is not None else None
        out.append(KernelLogLine(m.group("text"), float(m.group("time")) if m.group("time") else None,
                                 pri % 8 if pri is not None else None,
                                 pri is None or pri // 8 == KERNEL_FACILITY))
    return out
