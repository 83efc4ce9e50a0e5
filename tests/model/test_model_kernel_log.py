"""The kernel-log check on real kernel lines: Debian's 6.1 kernel (6.1.0-56-amd64) in the embedded guest
under QEMU 7.2 TCG (tests/data/README.md, guest/: how each file was made): a healthy boot, a task
blocked behind a frozen filesystem (the hung-task detector, timeout lowered to 1 s), the scheduler's
WARNING the kernel-warning fault provokes, and I/O errors of a SCSI disk taken offline."""

from __future__ import annotations

from pathlib import Path

import pytest

from model.judging.verdict import RuleVerdict
from model.kernel_log_check import (
    KERNEL_LOG_BLAME,
    MAX_QUOTED,
    InjectedErrors,
    check_kernel_log,
    unread,
    whole_disk,
    with_kernel_log,
)
from model.parse.dmesg import KernelLogLine, parse_kernel_log

DATA = Path(__file__).resolve().parents[1] / "data" / "guest"
WARNING = "WARNING: CPU: 1 PID: 20 at kernel/sched/core.c:752 update_rq_clock+0xb6/0x190"


def _lines(name: str) -> list[KernelLogLine]:
    return parse_kernel_log((DATA / name).read_text(), "dmesg")


def _passed() -> RuleVerdict:
    return RuleVerdict("limits", ("dut disk: as asked",), (), (), {"dut_queue_depth": 128})


def test_a_healthy_boot_passes() -> None:
    lines = _lines("dmesg-6.1-boot.txt")
    assert len(lines) == 382 and lines[0].text.startswith("Command line: console=ttyS0 quiet")
    check = check_kernel_log(lines, "dmesg")
    assert check.passed and check.new_lines == 382 and check.findings == ()
    assert check.properties() == {"kernel_log_source": "dmesg", "kernel_log_new_lines": 382, "kernel_log_bad_lines": 0}


def test_the_parser_keeps_level_time_and_whose_line() -> None:
    line = _lines("dmesg-6.1-hung-task-warning.txt")[6]
    assert line == KernelLogLine("INFO: task sh:216 blocked for more than 1 seconds.", 41.905906, 3, True)
    assert line.quoted() == "[   41.905906] INFO: task sh:216 blocked for more than 1 seconds."
    mark = parse_kernel_log("<13>[   47.383698] vioconform: kernel-log mark feedc0ffee01 io-error-test\n", "dmesg")[0]
    assert mark.level == 5 and not mark.from_kernel  # LOG_USER (1) * 8 + notice: a program's line


def test_a_blocked_task_and_a_warning_fail_with_the_lines_quoted() -> None:
    check = check_kernel_log(_lines("dmesg-6.1-hung-task-warning.txt"), "dmesg")
    kinds = [f.kind for f in check.findings]
    # three reports of the same task (1, 2, 3 s), each with the detector's hint line, then the WARNING
    assert kinds == ["blocked task", "hung_task"] * 3 + ["WARNING"], kinds
    assert check.findings[-1].line.quoted() == f"[   50.969375] {WARNING}"
    assert check.properties()["kernel_log_bad_kinds"] == "blocked task, hung_task, WARNING"
    verdict = with_kernel_log(_passed(), check)
    assert not verdict.passed and verdict.hint == KERNEL_LOG_BLAME
    assert verdict.problems[0] == ("the guest's kernel logged a blocked task line during the rule: "
                                   "[   41.905906] INFO: task sh:216 blocked for more than 1 seconds.")
    assert verdict.problems[-1] == f"the guest's kernel logged a WARNING line during the rule: [   50.969375] {WARNING}"
    assert verdict.properties["dut_queue_depth"] == 128 and verdict.properties["kernel_log_bad_lines"] == 7
    assert verdict.lines[-1] == "kernel log (dmesg): 137 new line(s) during the rule, 7 the check fails on"


def test_the_kernel_warning_faults_window_as_the_guest_tool_read_it() -> None:
    """What guest/tools/kernel_log_reader.py's script printed after a mark, in the fault's window (virtio-scsi guest)."""
    text = (DATA / "kernel-log-since-warning.txt").read_text()
    head, state, body = text.split("\n", 2)
    assert (head, state) == ("VIOCONFORM-KLOG source=dmesg", "VIOCONFORM-KLOG mark=found")
    check = check_kernel_log(parse_kernel_log(body, "dmesg"), "dmesg")
    assert [f.line.text for f in check.findings] == [WARNING]
    assert check.new_lines == 34


def test_util_linux_dmesg_in_the_test_image() -> None:
    """The same fault in the cloud-init test image (Debian 12, 6.1.0-50-cloud-amd64, util-linux dmesg through
    sudo): kernel-log-limits.txt of its limits rule on virtio-blk."""
    check = check_kernel_log(_lines("kernel-log-warning-cloud-6.1.txt"), "dmesg")
    assert [f.line.quoted() for f in check.findings] == [
        "[   83.511999] WARNING: CPU: 1 PID: 20 at kernel/sched/core.c:741 update_rq_clock+0xb6/0x190"]
    assert check.new_lines == 33


def test_a_programs_line_is_not_the_kernels() -> None:
    fake = parse_kernel_log(f"<12>[   60.000000] logger: {WARNING}\n<13>[   61.0] I/O error, dev sdb, sector 8\n",
                            "dmesg")
    assert check_kernel_log(fake, "dmesg").passed


IO_ERRORS = "dmesg-6.1-io-errors.txt"


def test_io_errors_fail_the_rule() -> None:
    check = check_kernel_log(_lines(IO_ERRORS), "dmesg")
    assert [f.line.text for f in check.findings] == [
        "I/O error, dev sdb, sector 800 op 0x0:(READ) flags 0x80700 phys_seg 1 prio class 2",
        "I/O error, dev sdb, sector 800 op 0x0:(READ) flags 0x0 phys_seg 1 prio class 2",
        "Buffer I/O error on dev sdb, logical block 100, async page read",
        "I/O error, dev sdb, sector 32768 op 0x1:(WRITE) flags 0x0 phys_seg 1 prio class 2",
        "Buffer I/O error on dev sdb, logical block 4096, lost async page write",
    ]  # "rejecting I/O to offline device" is the SCSI layer's, about no request's error
    assert {f.kind for f in check.findings} == {"I/O error"}


def test_io_errors_in_the_rules_injected_range_are_its_own() -> None:
    # the reads at sector 800 are in the declared range, the write at 32768 is not; the buffer
    # lines name the disk but no sector: the disk's request lines are judged by their sectors
    check = check_kernel_log(_lines(IO_ERRORS), "dmesg", injected=[InjectedErrors("sdb", 800, 8)])
    assert [f.line.text for f in check.findings] == [
        "I/O error, dev sdb, sector 32768 op 0x1:(WRITE) flags 0x0 phys_seg 1 prio class 2"]
    assert check.expected_errors == 4 and check.properties()["kernel_log_expected_errors"] == 4
    assert check.line().endswith("4 I/O error line(s) in the rule's own injected range (sdb sectors 800-807)")
    whole = check_kernel_log(_lines(IO_ERRORS), "dmesg", injected=[InjectedErrors("sdb")])
    assert whole.passed and whole.expected_errors == 5
    other = check_kernel_log(_lines(IO_ERRORS), "dmesg", injected=[InjectedErrors("sda")])
    assert len(other.findings) == 5 and other.expected_errors == 0


@pytest.mark.parametrize(("line", "device", "sector"), [
    # Linux 6.1's other statuses, and the line before 5.14 (blk_update_request:)
    ("critical medium error, dev sdb, sector 2048 op 0x0:(READ) flags 0x0 phys_seg 1 prio class 2", "sdb", 2048),
    ("blk_update_request: I/O error, dev vdb, sector 4096 op 0x1:(WRITE) flags 0x800 phys_seg 1 prio class 0",
     "vdb", 4096),
    ("EXT4-fs warning (device sdb1): ext4_end_bio:343: I/O error 10 writing to inode 12 starting block 513)",
     "sdb1", None),
    ("nvme0n1: I/O Cmd(0x2) @ LBA 2048, 8 blocks, I/O Error (sct 0x2 / sc 0x81)", "nvme0n1", None),
])
def test_other_forms_of_an_io_error(line: str, device: str, sector: int | None) -> None:
    lines = [KernelLogLine(line, 1.0, 3, True)]
    assert [f.kind for f in check_kernel_log(lines, "dmesg").findings] == ["I/O error"]
    inside = InjectedErrors(whole_disk(device), sector or 0, 8)
    assert check_kernel_log(lines, "dmesg", injected=[inside]).passed
    if sector is not None:
        assert not check_kernel_log(lines, "dmesg", injected=[InjectedErrors(device, sector + 8, 8)]).passed


@pytest.mark.parametrize("text", [
    "BUG: kernel NULL pointer dereference, address: 0000000000000008",
    "Oops: 0000 [#1] PREEMPT SMP NOPTI",
    "watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [fio:312]",
    "rcu: INFO: rcu_preempt detected stalls on CPUs/tasks: soft lockup",
])
def test_the_other_kinds(text: str) -> None:
    assert not check_kernel_log([KernelLogLine(text, 1.0, 0, True)], "dmesg").passed


@pytest.mark.parametrize(("name", "disk"), [("sdb1", "sdb"), ("vdc2", "vdc"), ("nvme0n1p3", "nvme0n1"),
                                            ("nvme0n1", "nvme0n1"), ("sdb", "sdb"), ("mmcblk0p1", "mmcblk0")])
def test_whole_disk(name: str, disk: str) -> None:
    assert whole_disk(name) == disk


def test_many_findings_quote_the_first_and_count_the_rest() -> None:
    lines = [KernelLogLine(f"I/O error, dev sdb, sector {8 * i} op 0x0:(READ)", float(i), 3, True) for i in range(13)]
    problems = with_kernel_log(_passed(), check_kernel_log(lines, "dmesg")).problems
    assert len(problems) == MAX_QUOTED + 1
    assert problems[-1].startswith("the guest's kernel logged 3 more line(s) of these kinds during the rule (I/O error)")


def test_what_the_check_cannot_see_is_noted() -> None:
    lines = [KernelLogLine("blk_print_req_error: 42 callbacks suppressed", 1.0, 4, True)]
    check = check_kernel_log(lines, "dmesg", mark_found=False)
    assert check.passed
    verdict = with_kernel_log(_passed(), check)
    assert verdict.passed and len(verdict.notes) == 2
    assert "overwrote the suite's mark" in verdict.notes[0] and "suppressed 42 of its lines" in verdict.notes[1]
    gone = with_kernel_log(_passed(), unread("none", "cannot write a mark into /dev/kmsg (exit 1: Permission denied)"))
    assert gone.passed and str(gone.properties["kernel_log_source"]).startswith("not read: cannot write a mark")
    assert gone.notes == (("the guest's kernel log was not checked: cannot write a mark into /dev/kmsg (exit 1: "
                          "Permission denied)"),)


def test_a_failing_rule_keeps_its_own_blame_hint_and_problems() -> None:
    failed = RuleVerdict("io-size", ("m",), ("split",), hint=None)
    verdict = with_kernel_log(failed, check_kernel_log(_lines("dmesg-6.1-boot.txt"), "dmesg"))
    assert verdict.problems == ("split",) and verdict.hint is None


def test_the_journal_form() -> None:
    """journalctl -k -o short-monotonic, where dmesg is refused (synthetic: the real 6.1 lines above in the
    journal's form; the suite's mark is a program's line, named by its identifier)."""
    text = ("[   41.905906] vioconform-7 kernel: INFO: task sh:216 blocked for more than 1 seconds.\n"
            "[   47.383698] vioconform-7 vioconform: kernel-log mark feedc0ffee01 limits\n"
            "[   51.716881] vioconform-7 kernel: I/O error, dev sdb, sector 800 op 0x0:(READ) flags 0x80700\n")
    lines = parse_kernel_log(text, "journal")
    assert [(x.from_kernel, x.time_s) for x in lines] == [(True, 41.905906), (False, 47.383698), (True, 51.716881)]
    assert [f.kind for f in check_kernel_log(lines, "journal").findings] == ["blocked task", "I/O error"]
