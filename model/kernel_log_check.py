"""The kernel-log check: what the guest's kernel logged during a rule fails that rule.

Every rule's measurement is bracketed by the guest's kernel log (suites/kernel_log_watch.py marks the
log before and reads the lines after the mark; guest/tools/kernel_log_reader.py does both in the guest).
A line the guest's kernel logged in between fails the rule when it reports (:data:`PATTERNS`):

- ``BUG:`` (a NULL pointer dereference, ``BUG: soft lockup``, ``BUG: scheduling while atomic``),
  ``Oops``, a ``WARNING: CPU: N PID: M at file:line`` (the kernel's WARN_ON);
- a task blocked in the kernel (``INFO: task sh:216 blocked for more than 120 seconds.``, the
  hung-task detector's ``hung_task`` lines), a ``soft lockup``;
- a failed block request (``I/O error, dev sdb, sector 800 op 0x0:(READ) ...``; Linux 6.1 names the
  status: ``critical medium error, dev ...``, ``timeout error, dev ...``; before 5.14 the line began
  with ``blk_update_request:``) or any other ``I/O error`` line (``Buffer I/O error on dev sdb,
  logical block 100``, ext4's ``I/O error 10 writing to inode``), unless the rule injects errors
  there itself (:class:`InjectedErrors`).

Only the kernel's own lines count: a program's line written into ``/dev/kmsg`` (the suite's own
mark among them) is never the kernel's (model/parse/dmesg.py).

Example::

    check = check_kernel_log(parse_kernel_log(text, "dmesg"), "dmesg", mark_found=True)
    verdict = with_kernel_log(verdict, check)  # failed, the WARNING quoted, if the kernel warned
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass

from model.blame import Blame
from model.judging.verdict import Number, RuleVerdict
from model.parse.dmesg import KernelLogLine


@dataclass(frozen=True)
class Pattern:
    """A kind of kernel line that fails a rule: its name in the verdict and how it is recognised."""

    kind: str
    regex: re.Pattern[str]


#: A failed block request, as blk_print_req_error (Linux 5.14 to 6.x) prints it: the status's words
#: ("I/O", "critical medium", "critical target", "timeout", "recoverable transport"...), the disk and
#: the request's first 512-byte sector of the whole disk (a partition's requests too);
#: ``blk_update_request: I/O error, dev sdb, sector 2048 ...`` (Linux 4.12 to 5.13) matches as well.
REQUEST_ERROR = re.compile(r"(?P<status>[A-Za-z/]+(?: [a-z]+)*) error, dev (?P<dev>[^\s,]+), sector (?P<sector>\d+)")
#: Any other line about an I/O error: ``Buffer I/O error on dev sdb, logical block 100, async page read``,
#: ``EXT4-fs warning (device sdb1): ext4_end_bio:343: I/O error 10 writing to inode ...``, NVMe's
#: ``nvme0n1: I/O Cmd(0x2) @ LBA 2048, 8 blocks, I/O Error (sct 0x2 / sc 0x81)``.
IO_ERROR = re.compile(r"I/O error|\bblk_update_request\b", re.IGNORECASE)
#: Where an I/O error line names its disk: ``dev sdb,``, ``(device sdb1)``, ``XFS (sdb1)``, ``[sdb]``, ``nvme0n1:``.
_DEVICE = (re.compile(r"\bdev (?P<dev>[A-Za-z][\w.-]*)"), re.compile(r"\(device (?P<dev>[\w.-]+)\)"),
           re.compile(r"\bXFS \((?P<dev>[\w.-]+)\)"), re.compile(r"\[(?P<dev>[a-z]+\d*(?:n\d+)?)\]"),
           re.compile(r"^(?P<dev>nvme\d+n\d+):"))
#: The other kinds, in the order they are tried (a line is reported once, as the first that matches).
PATTERNS: tuple[Pattern, ...] = (
    Pattern("BUG", re.compile(r"\bBUG: ")),
    Pattern("Oops", re.compile(r"\bOops\b")),
    Pattern("WARNING", re.compile(r"\bWARNING: CPU: \d+ PID: \d+")),
    Pattern("blocked task", re.compile(r"\bINFO: task \S.* blocked for more than \d+ seconds")),
    Pattern("hung_task", re.compile(r"\bhung_task")),
    Pattern("soft lockup", re.compile(r"\bsoft lockup\b", re.IGNORECASE)),
)
#: ``blk_print_req_error: 42 callbacks suppressed``: the kernel's rate limit dropped lines (printk_ratelimited:
#: 10 a function per 5 s), which the check then cannot see.
SUPPRESSED = re.compile(r"^(?P<fn>\S+): (?P<n>\d+) callbacks suppressed")
#: The failing lines a verdict quotes; kernel-log-<rule>.txt in the rule's raw directory has every new line.
MAX_QUOTED = 10
_PARTITION = re.compile(r"^(?P<disk>.*\d)p\d+$|^(?P<sd>(?:sd|vd|hd|xvd)[a-z]+)\d+$")


def whole_disk(name: str) -> str:
    """The disk a partition is on (``sdb1`` -> ``sdb``, ``nvme0n1p2`` -> ``nvme0n1``); a disk's own name as it is."""
    m = _PARTITION.match(name)
    if m is None:
        return name
    return m.group("disk") or m.group("sd")


@dataclass(frozen=True)
class InjectedErrors:
    """Where a rule makes a disk fail on purpose: the kernel's I/O errors there are the rule's own,
    not a finding of the kernel-log check (the error-propagation rule judges them itself).

    ``device`` is the guest's name of the whole disk (``sdb``, ``vdb``, ``nvme0n1``); the range is
    in 512-byte sectors of the whole disk, as the kernel's ``sector N`` counts them, ``sectors``
    None for the whole disk. A request that fails because it overlaps the range from below is
    logged with its own first sector: declare the range widened by the largest request the rule
    sends. An I/O error line that names the disk but no sector (``Buffer I/O error on dev sdb,
    logical block 100``) follows a request error on the same disk, which is judged by its sector:
    it is taken as the rule's own wherever the rule declared a range on that disk."""

    device: str
    first_sector: int = 0
    sectors: int | None = None

    def covers(self, device: str | None, sector: int | None) -> bool:
        if device is None or whole_disk(device) != self.device:
            return False
        if sector is None or self.sectors is None:
            return True
        return self.first_sector <= sector < self.first_sector + self.sectors

    def describe(self) -> str:
        if self.sectors is None:
            return f"all of {self.device}"
        return f"{self.device} sectors {self.first_sector}-{self.first_sector + self.sectors - 1}"


@dataclass(frozen=True)
class Finding:
    """A line that fails the rule, and its kind ("WARNING", "I/O error", ...)."""

    kind: str
    line: KernelLogLine


@dataclass(frozen=True)
class KernelLogCheck:
    """What the guest's kernel logged during one rule test, judged.

    ``source``: what read it ("dmesg", "journal"); ``unread``: why the log could not be read (then
    nothing else is known and the rule is not failed for it: a note says so). ``mark_found`` False:
    the kernel's buffer wrapped during the rule and overwrote the suite's mark, so the lines logged
    right after it are lost; every line still in the buffer was checked."""

    source: str
    new_lines: int = 0
    findings: tuple[Finding, ...] = ()
    expected_errors: int = 0
    suppressed: int = 0
    mark_found: bool = True
    unread: str = ""
    injected: tuple[InjectedErrors, ...] = ()

    @property
    def passed(self) -> bool:
        return not self.findings

    def properties(self) -> dict[str, Number]:
        if self.unread:
            return {"kernel_log_source": f"not read: {self.unread}"}
        props: dict[str, Number] = {"kernel_log_source": self.source, "kernel_log_new_lines": self.new_lines,
                                    "kernel_log_bad_lines": len(self.findings)}
        if self.findings:
            props["kernel_log_bad_kinds"] = ", ".join(dict.fromkeys(f.kind for f in self.findings))
        if self.injected:
            props["kernel_log_expected_errors"] = self.expected_errors
        return props

    def line(self) -> str:
        """The check in one line, always shown with the rule's own."""
        if self.unread:
            return f"kernel log: not read ({self.unread})"
        said = (f"kernel log ({self.source}): {self.new_lines} new line(s) during the rule, "
                f"{len(self.findings)} the check fails on")
        if self.injected:
            said += (f", {self.expected_errors} I/O error line(s) in the rule's own injected range "
                     f"({'; '.join(i.describe() for i in self.injected)})")
        return said

    def problems(self, rule: str) -> tuple[str, ...]:
        shown = [f"the guest's kernel logged a {f.kind} line during the rule: {f.line.quoted()}"
                 for f in self.findings[:MAX_QUOTED]]
        rest = self.findings[MAX_QUOTED:]
        if rest:
            kinds = ", ".join(dict.fromkeys(f.kind for f in rest))
            shown.append(f"the guest's kernel logged {len(rest)} more line(s) of these kinds during the rule ({kinds}): "
                         f"every line it logged is in kernel-log-{rule}.txt in the rule's raw data")
        return tuple(shown)

    def notes(self) -> tuple[str, ...]:
        notes = []
        if self.unread:
            notes.append(f"the guest's kernel log was not checked: {self.unread}")
        if not self.mark_found:
            notes.append("the guest's kernel log wrapped during the rule and overwrote the suite's mark: the lines "
                         "logged right after it are lost; every line still in the buffer was checked")
        if self.suppressed:
            notes.append(f"the guest's kernel suppressed {self.suppressed} of its lines during the rule (its rate "
                         "limit): the check saw only the lines it printed")
        return tuple(notes)


def _device(text: str) -> str | None:
    for regex in _DEVICE:
        m = regex.search(text)
        if m:
            return m.group("dev")
    return None


def check_kernel_log(lines: Sequence[KernelLogLine], source: str, mark_found: bool = True,
                     injected: Sequence[InjectedErrors] = ()) -> KernelLogCheck:
    """Judge the lines the guest's kernel logged during a rule (after the suite's mark): each
    kernel line of a kind in :data:`PATTERNS`, or about an I/O error outside ``injected``, is a
    finding that fails the rule."""
    findings: list[Finding] = []
    expected = suppressed = 0
    kernel = [line for line in lines if line.from_kernel]
    for line in kernel:
        s = SUPPRESSED.match(line.text)
        if s:
            suppressed += int(s.group("n"))
            continue
        r = REQUEST_ERROR.search(line.text)
        if r or IO_ERROR.search(line.text):
            device, sector = (r.group("dev"), int(r.group("sector"))) if r else (_device(line.text), None)
            if any(i.covers(device, sector) for i in injected):
                expected += 1
            else:
                findings.append(Finding("I/O error", line))
            continue
        kind = next((p.kind for p in PATTERNS if p.regex.search(line.text)), None)
        if kind is not None:
            findings.append(Finding(kind, line))
    return KernelLogCheck(source, len(kernel), tuple(findings), expected, suppressed, mark_found,
                          injected=tuple(injected))


def unread(source: str, why: str) -> KernelLogCheck:
    """The check where the guest's kernel log could not be read: nothing judged, and a note that says why."""
    return KernelLogCheck(source, unread=why)


#: Where a failure the check found is blamed when the rule's disks' settings single out no layer:
#: the kernel's own lines say which part of it complained (their stack trace, the driver's name).
KERNEL_LOG_BLAME = Blame("unknown", "the guest's kernel reported a problem during the rule (the kernel-log check): "
                         "the quoted lines and their stack traces in kernel-log-<rule>.txt in its raw data say where")


def with_kernel_log(verdict: RuleVerdict, check: KernelLogCheck) -> RuleVerdict:
    """The rule's verdict with the kernel-log check's: its line, its findings as problems (so a
    finding fails the rule whatever the rule's own numbers said), its notes and its properties."""
    hint = verdict.hint if verdict.hint is not None or check.passed else KERNEL_LOG_BLAME
    return dataclasses.replace(verdict, lines=(*verdict.lines, check.line()),
                               problems=(*verdict.problems, *check.problems(verdict.rule)),
                               notes=(*verdict.notes, *check.notes()),
                               properties={**verdict.properties, **check.properties()}, hint=hint)
