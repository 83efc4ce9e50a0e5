"""The kernel-log check on a real guest: the kernel-warning fault makes Debian's 6.1 kernel print a
WARNING inside the limits rule's window, which fails limits on virtio-scsi and virtio-blk with the
line quoted, and leaves the rule that runs next (multi-queue, on the same guest) passing; the
healthy guest passes every rule's check (tests/e2e/test_rules_guest.py)."""

from __future__ import annotations

from tests.e2e.conftest import RunSuite, SuiteRun

CONFIGS = ("libvirt:virtio-scsi:latency5ms", "libvirt:virtio-blk:latency5ms")
WARNING = "WARNING: CPU: 1 PID: 20 at kernel/sched/core.c:752 update_rq_clock+0xb6/0x190"


def test_a_kernel_warning_fails_the_rule_it_runs_under_and_no_other(run_suite: RunSuite) -> None:
    run: SuiteRun = run_suite("--controllers", "virtio-scsi,virtio-blk", "--inject", "kernel-warning",
                              "-k", "limits or multiqueue")
    assert run.returncode == 1, run.output
    cases = run.cases()
    assert set(run.outcomes().values()) == {"failed", "passed"}, run.outcomes()
    for c in CONFIGS:
        limits = cases[f"limits[{c}]"]
        text = SuiteRun.failure_text(limits)
        assert "FAIL: the guest's kernel logged a WARNING line during the rule: [" in text and WARNING in text, text
        assert text.count("FAIL:") == 1, text  # the limits themselves are as asked: the warning alone fails it
        props = SuiteRun.props(limits)
        assert props["kernel_log_bad_lines"] == "1" and props["kernel_log_bad_kinds"] == "WARNING", props
        assert props["kernel_log_source"] == "dmesg" and int(props["kernel_log_new_lines"]) > 20, props
        kept = (run.results / "raw" / c.replace(":", "_") / "kernel-log-limits.txt").read_text()
        assert WARNING in kept and "__balance_push_cpu_stop" in kept
        mq = SuiteRun.props(cases[f"multi-queue[{c}]"])
        assert run.outcomes()[f"multi-queue[{c}]"] == "passed" and mq["kernel_log_bad_lines"] == "0", mq
    assert run.left_behind == []
