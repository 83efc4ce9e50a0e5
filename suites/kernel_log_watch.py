"""Every rule's measurement bracketed by the guest's kernel log (the kernel-log check).

``suites.assertions.judge_repeated`` marks the guest's kernel log before a rule's first repeat
(:func:`watch`: the mark rides with the rule's first guest command, ahead of it, in the same round trip:
transport/ride_along.py) and ``conclude_against`` reads the lines logged since and judges them
(:func:`fold`; model/kernel_log_check.py) before it concludes; ``judge_repeated`` has that read ride
after the command that follows the rule's own last one, its disks' kept settings read back
(:func:`read_with_next`, measure/kept.py), else it is a command of its own. Either way the check brackets
everything the rule ran in the guest, and under ``judge_repeated`` it costs no round trip of its own. A
``WARNING``, ``BUG``, ``Oops``, blocked task or I/O error in between fails the rule with the lines
quoted, in the rule's verdict, so JUnit, the report and the store carry it; every line logged is
kept in ``kernel-log-<rule>.txt`` in the rule's raw directory. A rule that measures before it concludes
without ``judge_repeated`` calls :func:`watch` itself, before it measures.

A rule that makes a disk fail on purpose declares where (:func:`expect_io_errors`): the kernel's
I/O errors there are the rule's own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from guest.tools.kernel_log_reader import KernelLog, KernelLogUnreadable, KernelWarning, KernelWarningUnavailable, Mark
from measure.phase_times import phase
from model.kernel_log_check import InjectedErrors, check_kernel_log, unread, with_kernel_log
from model.parse.dmesg import parse_kernel_log
from transport.ride_along import Rider, RidingShell

if TYPE_CHECKING:
    from measure.disk import GuestDisk
    from model.judging.verdict import RuleVerdict
    from reports.records import Record

def raw_file(rule: str) -> str:
    """The file in a rule's raw directory that keeps every line the guest's kernel logged during it (rules of
    one configuration may share a raw directory)."""
    return f"kernel-log-{rule}.txt"


@dataclass
class _Watch:
    """One rule test's mark in its guest's kernel log (``mark`` None: not marked, ``unread`` says why) and,
    where the read-back rides with a command (:func:`read_with_next`), its Rider."""

    log: KernelLog | None
    mark: Mark | None
    unread: str = ""
    injected: list[InjectedErrors] = field(default_factory=list)
    rode: Rider | None = None

    def drop(self) -> None:
        """Send neither the mark nor the read-back where they still wait for a command to ride with."""
        if self.log is not None and isinstance(self.log.shell, RidingShell):
            for r in (self.mark.rider if self.mark else None, self.rode):
                if r is not None:
                    self.log.shell.drop_rider(r)


#: The watch of the rule test running in this process, by its node id (one test runs at a time).
_WATCHES: dict[str, _Watch] = {}


def watch(record: Record, disks: Sequence[GuestDisk]) -> None:
    """Mark the kernel log of the guest of ``disks`` before the rule's measurement: the mark is written by
    the rule's first guest command, ahead of it (guest/tools/kernel_log_reader.py, ``mark_with_next``); a
    test that is watched already keeps its first mark (its measurement started there)."""
    if record.nodeid in _WATCHES:
        return
    for stale in _WATCHES.values():  # a watch a test left when it ended before its verdict (an error, a skip)
        stale.drop()
    _WATCHES.clear()
    if not disks:
        _WATCHES[record.nodeid] = _Watch(None, None, "the rule named no disk, so no guest to read")
        return
    log = disks[0].tool(KernelLog)
    try:
        with phase("kernel-log"):
            _WATCHES[record.nodeid] = _Watch(log, log.mark_with_next(f"{record.rule} {record.config}"))
    except KernelLogUnreadable as e:
        _WATCHES[record.nodeid] = _Watch(log, None, str(e))


def read_with_next(record: Record) -> None:
    """Have the guest's next command (``judge_repeated``'s: the disks' kept settings read back after the rule's
    own last command, measure/kept.py) read the kernel log after it, in the same round trip; :func:`fold`
    judges what it read."""
    w = _WATCHES.get(record.nodeid)
    if w is not None and w.log is not None and w.mark is not None and w.rode is None:
        w.rode = w.log.since_with_next(w.mark)


def expect_io_errors(record: Record, *injected: InjectedErrors) -> None:
    """Declare where the rule makes a disk fail on purpose (model.kernel_log_check.InjectedErrors): the
    kernel's I/O errors there do not fail the rule's kernel-log check. Call it after :func:`watch`
    (``judge_repeated`` watches before the first repeat), before the errors happen or after."""
    w = _WATCHES.get(record.nodeid)
    if w is None:
        raise RuntimeError(f"{record.nodeid}: the kernel log is not watched yet; expect_io_errors needs "
                           "suites.kernel_log_watch.watch first")
    w.injected.extend(injected)


def fold(record: Record, verdict: RuleVerdict, raw_dir: Path) -> RuleVerdict:
    """Read what the guest's kernel logged since the test's mark and add the check to ``verdict``
    (model.kernel_log_check.with_kernel_log); keep the lines in ``raw_dir/kernel-log-<rule>.txt``."""
    w = _WATCHES.pop(record.nodeid, None)
    if w is None:  # no guest behind the verdict (a verdict judged from records); every rule test watches
        return verdict  # (tests/unit/test_kernel_log_watch.py)
    if w.log is None or w.mark is None:
        return with_kernel_log(verdict, unread("none", w.unread))
    try:
        w.log.written(w.mark)
        with phase("kernel-log"):  # no command of its own where it rode with the rule's last
            read = w.log.since(w.mark.token, w.rode)
        w.log.written(w.mark)  # a mark that waited for a command rode with the read itself
    except KernelLogUnreadable as e:
        w.drop()
        return with_kernel_log(verdict, unread("none", str(e)))
    if read.text.strip():
        raw_dir.mkdir(parents=True, exist_ok=True)
        (raw_dir / raw_file(record.rule)).write_text(f"# {record.rule} on {record.config}: the guest's kernel log after the "
                                        f"suite's mark, read with {read.source}"
                                        f"{'' if read.mark_found else ' (the mark was overwritten)'}\n{read.text}")
    check = check_kernel_log(parse_kernel_log(read.text, read.source), read.source, read.mark_found, w.injected)
    return with_kernel_log(verdict, check)


def provoke_kernel_warning(disk: GuestDisk) -> None:
    """The ``kernel-warning`` fault (model/faults.py): make the guest's kernel print a real WARNING
    now (guest/tools/kernel_log_reader.py's KernelWarning); the rule skips, with the reason, on a guest
    that cannot carry it or whose kernel did not warn."""
    try:
        disk.tool(KernelWarning).provoke()
    except KernelWarningUnavailable as e:
        pytest.skip(f"--inject kernel-warning: {e}")
