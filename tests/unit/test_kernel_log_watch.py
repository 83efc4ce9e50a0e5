"""The kernel-log check around every rule: the guest tool's two commands (a mark, the lines after it),
the bracket in suites/assertions.py that turns a kernel WARNING during a passing rule into its failure,
the ranges a rule injects errors into, and the kernel-warning fault's action; on a scripted guest
whose answers are the real guest's (tests/data/guest/kernel-log-since-warning.txt)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from fixtures.outcomes import RuleFailure
from guest.tools.kernel_log_reader import KernelLog, KernelLogUnreadable, KernelWarning
from model.judging.verdict import RuleVerdict
from model.kernel_log_check import InjectedErrors
from reports.records import Record
from suites import kernel_log_watch
from suites.assertions import judge_repeated
from tests.unit.fake_shell import FakeShell, Reply, RidingFakeShell, fake_disk
from transport.ssh import GuestCommandError

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "guest"
SINCE_WARNING = (DATA / "kernel-log-since-warning.txt").read_text()
WARNING = "WARNING: CPU: 1 PID: 20 at kernel/sched/core.c:752 update_rq_clock+0xb6/0x190"
QUIET = "VIOCONFORM-KLOG source=dmesg\nVIOCONFORM-KLOG mark=found\n<6>[  311.000000] smpboot: CPU 1 is now offline\n"


def _shell(since: str, mark: Reply = "") -> FakeShell:
    return FakeShell(handlers=[(r"> /dev/kmsg$", lambda _c: mark), (r"VIOCONFORM-KLOG", lambda _c: since)])


def _passing(_raw: Path) -> RuleVerdict:
    return RuleVerdict("limits", ("dut disk: as asked",), ())


def test_the_mark_and_the_lines_after_it_are_one_guest_command_each() -> None:
    shell = _shell(SINCE_WARNING)
    log = fake_disk(shell).tool(KernelLog)
    token = log.mark("limits libvirt:virtio-blk:latency5ms")
    read = log.since(token)
    assert len(shell.commands) == 2
    assert re.fullmatch(rf"echo '<5>vioconform: kernel-log mark {token} limits_libvirt:virtio-blk:latency5ms' "
                        "> /dev/kmsg", shell.commands[0])
    assert f"t={token}\n" in shell.commands[1]
    assert read.source == "dmesg" and read.mark_found and WARNING in read.text
    assert not read.text.startswith("VIOCONFORM-KLOG")


@pytest.mark.parametrize(("mark", "since", "said"), [
    ((1, "", "sh: can't create /dev/kmsg: Permission denied"), QUIET,
     "cannot write a mark into /dev/kmsg (exit 1: sh: can't create /dev/kmsg: Permission denied)"),
    ("", "VIOCONFORM-KLOG source=none\nVIOCONFORM-KLOG mark=lost\n",
     "neither `dmesg -r` nor `journalctl -k` could read it in the guest"),
    ("", (127, "", "sh: awk: not found"), "the kernel-log script printed no answer (exit 127: sh: awk: not found)"),
])
def test_a_log_that_cannot_be_read_says_why(mark: Reply, since: Reply, said: str) -> None:
    log = fake_disk(FakeShell(handlers=[(r"> /dev/kmsg$", lambda _c: mark),
                                        (r"VIOCONFORM-KLOG", lambda _c: since)])).tool(KernelLog)
    with pytest.raises(KernelLogUnreadable) as e:
        log.since(log.mark("limits x"))
    assert str(e.value) == said


def test_a_kernel_warning_during_a_passing_rule_fails_it(tmp_path: Path) -> None:
    """Without the bracket in judge_repeated the rule's own verdict (passed) would be the test's."""
    disk = fake_disk(_shell(SINCE_WARNING))
    record = Record("suites/test_limits.py::test_limits[x]", "limits", "fake:virtio-blk")
    with pytest.raises(RuleFailure) as e:
        judge_repeated(record, "fake:virtio-blk", tmp_path, 1, _passing, exact=True, disks=(disk,))
    assert f"FAIL: the guest's kernel logged a WARNING line during the rule: [  310.590766] {WARNING}" in str(e.value)
    assert record.verdict is not None and not record.verdict.passed
    assert record.verdict.properties["kernel_log_bad_lines"] == 1
    assert record.verdict.properties["kernel_log_new_lines"] == 34
    assert record.blame == "unknown" and "kernel-log check" in record.blame_reason
    kept = (tmp_path / kernel_log_watch.raw_file("limits")).read_text()
    assert kept.startswith("# limits on fake:virtio-blk: the guest's kernel log after the suite's mark, read with "
                           "dmesg\n") and WARNING in kept


def test_a_quiet_log_leaves_a_passing_rule_passed(tmp_path: Path) -> None:
    disk = fake_disk(_shell(QUIET))
    record = Record("n", "limits", "fake:virtio-blk")
    judge_repeated(record, "fake:virtio-blk", tmp_path, 3, _passing, exact=True, disks=(disk,))
    assert record.verdict is not None and record.verdict.passed
    assert record.verdict.properties["kernel_log_new_lines"] == 1
    assert record.verdict.lines[-1] == "kernel log (dmesg): 1 new line(s) during the rule, 0 the check fails on"
    # one mark before the first of the three repeats, one read after the last
    assert sum("/dev/kmsg" in c for c in disk.tools.shell.commands) == 1  # type: ignore[attr-defined]
    assert sum("VIOCONFORM-KLOG" in c for c in disk.tools.shell.commands) == 1  # type: ignore[attr-defined]


def test_errors_a_rule_injects_are_its_own(tmp_path: Path) -> None:
    io_errors = ("VIOCONFORM-KLOG source=dmesg\nVIOCONFORM-KLOG mark=found\n"
                 + (DATA / "dmesg-6.1-io-errors.txt").read_text().split("\n", 1)[1])
    disk = fake_disk(_shell(io_errors))
    record = Record("n", "error-propagation", "fake:virtio-scsi")
    with pytest.raises(RuntimeError, match=r"needs suites\.kernel_log_watch\.watch first"):
        kernel_log_watch.expect_io_errors(record, InjectedErrors("sdb"))

    def once(_raw: Path) -> RuleVerdict:
        kernel_log_watch.expect_io_errors(record, InjectedErrors("sdb"))
        return RuleVerdict("error-propagation", ("errors as injected",), ())

    judge_repeated(record, "fake:virtio-scsi", tmp_path, 1, once, exact=True, disks=(disk,))
    assert record.verdict is not None and record.verdict.passed
    assert record.verdict.properties["kernel_log_expected_errors"] == 5


@pytest.mark.parametrize("riding", [False, True], ids=["own command", "riding"])
def test_a_log_that_cannot_be_read_is_noted_not_failed(tmp_path: Path, riding: bool) -> None:
    """The same note whether the mark had a command of its own or rode ahead of the rule's first."""
    refused: Reply = (1, "", "sh: can't create /dev/kmsg: Read-only file system")
    disk = fake_disk(_riding(QUIET, mark=refused) if riding else _shell(QUIET, mark=refused))
    record = Record("n", "limits", "fake:virtio-blk")
    judge_repeated(record, "fake:virtio-blk", tmp_path, 1, _passing, exact=True, disks=(disk,))
    assert record.verdict is not None and record.verdict.passed
    assert record.verdict.notes == (("the guest's kernel log was not checked: cannot write a mark into /dev/kmsg "
                                    "(exit 1: sh: can't create /dev/kmsg: Read-only file system)"),)


@pytest.mark.parametrize(("reply", "skipped"), [
    ((3, "the guest has no second online CPU (cpu1) to take offline\n", ""),
     "--inject kernel-warning: the guest has no second online CPU (cpu1) to take offline"),
    ((4, "the kernel printed no WARNING when CPU 1 went offline\n", ""),
     "--inject kernel-warning: the kernel printed no WARNING when CPU 1 went offline"),
    ("warned\n", None),
])
def test_the_kernel_warning_faults_action(reply: Reply, skipped: str | None) -> None:
    disk = fake_disk(FakeShell(handlers=[(r"WARN_DOUBLE_CLOCK", lambda _c: reply)]))
    if skipped is None:
        kernel_log_watch.provoke_kernel_warning(disk)
        return
    with pytest.raises(pytest.skip.Exception) as e:
        kernel_log_watch.provoke_kernel_warning(disk)
    assert str(e.value) == skipped


def test_the_faults_action_failing_otherwise_is_an_error() -> None:
    disk = fake_disk(FakeShell(handlers=[(r"WARN_DOUBLE_CLOCK", lambda _c: (1, "", "sh: can't create: I/O error"))]))
    with pytest.raises(GuestCommandError, match="the kernel-warning fault"):
        disk.tool(KernelWarning).provoke()


def _calls(tree: ast.AST) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call)]


def _name(call: ast.Call) -> str:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


@pytest.mark.parametrize("path", sorted((ROOT / "suites").glob("test_*.py")), ids=lambda p: p.stem)
def test_every_rule_test_marks_the_kernel_log(path: Path) -> None:
    """A rule's test reaches its verdict through judge_rule or judge_repeated with its disks (which marks
    the kernel log) or calls suites.kernel_log_watch.watch itself before it measures: the check applies to every rule."""
    calls = _calls(ast.parse(path.read_text()))
    judged = [c for c in calls if _name(c) in ("judge_rule", "judge_repeated")]
    assert judged or any(_name(c) == "watch" for c in calls), f"{path.name} never marks the guest's kernel log"
    assert all(any(k.arg == "disks" for k in c.keywords) for c in judged), \
        f"{path.name}: {', '.join(_name(c) for c in judged)} without disks= cannot mark the guest's kernel log"


def _riding(since: Reply, mark: Reply = "") -> RidingFakeShell:
    return RidingFakeShell(handlers=[(r"> /dev/kmsg$", lambda _c: mark), (r"VIOCONFORM-KLOG", lambda _c: since),
                                     (r"WARN_DOUBLE_CLOCK", lambda _c: "warned\n"), (r"^rule step", lambda _c: "")])


def _kept_read(command: str) -> bool:
    return command.startswith("for f in queue/scheduler ")


def test_the_check_rides_with_the_rules_own_commands_and_still_fails_on_a_warning(tmp_path: Path) -> None:
    """The mark goes ahead of the first guest command of the rule (its disk's kept settings read, on
    the disk's first rule), the read-back after the last (the kept settings read back): no round trip
    of the check's own, the same bracket, the same failure. The kernel-warning fault's command runs
    inside it."""
    shell = _riding(SINCE_WARNING)
    disk = fake_disk(shell)
    record = Record("suites/test_limits.py::test_limits[x]", "limits", "fake:virtio-blk")

    def once(_raw: Path) -> RuleVerdict:
        disk.tools.shell.run("rule step 1")
        kernel_log_watch.provoke_kernel_warning(disk)
        disk.tools.shell.run("rule step 2")
        return _passing(_raw)

    with pytest.raises(RuleFailure) as e:
        judge_repeated(record, "fake:virtio-blk", tmp_path, 1, once, exact=True, disks=(disk,))
    assert f"FAIL: the guest's kernel logged a WARNING line during the rule: [  310.590766] {WARNING}" in str(e.value)
    assert record.verdict is not None and record.verdict.properties["kernel_log_new_lines"] == 34
    commands = shell.commands
    assert len(commands) == 5 and _kept_read(commands[0]) and _kept_read(commands[-1])
    assert not any("/dev/kmsg" in c or "VIOCONFORM-KLOG" in c for c in commands)
    sent = [("mark" if "/dev/kmsg" in c else "read" if "VIOCONFORM-KLOG" in c else "kept" if _kept_read(c)
             else "fault" if "WARN_DOUBLE_CLOCK" in c else c) for c in shell.sent]
    assert sent == ["mark", "kept", "rule step 1", "fault", "rule step 2", "kept", "read"]


def test_a_later_rule_with_no_command_of_its_own_is_bracketed_by_one_command(tmp_path: Path) -> None:
    """After a disk's first rule its settings are known: a rule that runs nothing in the guest (limits
    judges what the disk's set-up read) costs one command, the kept settings read back with the mark
    ahead of it and the read-back after it."""
    shell = _riding(QUIET)
    disk = fake_disk(shell)
    judge_repeated(Record("a", "limits", "fake:virtio-blk"), "fake:virtio-blk", tmp_path, 1, _passing, exact=True,
                   disks=(disk,))
    shell.commands.clear()
    shell.sent.clear()
    record = Record("b", "limits", "fake:virtio-blk")
    judge_repeated(record, "fake:virtio-blk", tmp_path, 1, _passing, exact=True, disks=(disk,))
    assert record.verdict is not None and record.verdict.passed
    assert record.verdict.lines[-1] == "kernel log (dmesg): 1 new line(s) during the rule, 0 the check fails on"
    assert len(shell.commands) == 1 and _kept_read(shell.commands[0])
    assert ["/dev/kmsg" in c for c in shell.sent] == [True, False, False]
    assert "VIOCONFORM-KLOG" in shell.sent[2]


def test_a_rule_that_watches_itself_has_its_mark_ride_and_reads_the_log_in_one_command(tmp_path: Path) -> None:
    """A rule that calls watch itself (buffered-direct) and concludes without judge_repeated: the mark
    rides with its first command, the read is a command of its own."""
    shell = _riding(QUIET)
    disk = fake_disk(shell)
    record = Record("n", "buffered-direct", "fake:virtio-blk")
    kernel_log_watch.watch(record, (disk,))
    disk.tools.shell.run("rule step 1")
    verdict = kernel_log_watch.fold(record, RuleVerdict("buffered-direct", ("as before",), ()), tmp_path)
    assert verdict.passed and verdict.properties["kernel_log_new_lines"] == 1
    assert len(shell.commands) == 2 and ["/dev/kmsg" in c for c in shell.sent] == [True, False, False]
