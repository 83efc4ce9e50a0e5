"""throttle on real guests (QEMU 7.2's throttle under TCG, the embedded guest): the rule's own limit
(200 IOPS set at run time on the null-co latency disk) holds, lifts and holds again on virtio-scsi and
virtio-blk, the host reading back what was set; ``--inject throttle-burst`` (the limit set with a burst of
100 times it for 60 s) fails it on both, blamed on the hypervisor; a limit libvirt sets from
``--disk iops=`` on a file-backed disk is the one the rule judges and sets back."""

from __future__ import annotations

from tests.e2e.conftest import SuiteRun

BOTH = ("--controllers", "virtio-scsi,virtio-blk", "-k", "throttle", "--with-rules", "throttle")
SCSI, BLK = "throttle[libvirt:virtio-scsi:latency5ms]", "throttle[libvirt:virtio-blk:latency5ms]"


def healthy_figures(healthy: SuiteRun) -> None:
    """The limit holds, lifts and holds again on the healthy guest: checked on the one healthy run of the
    rules outside the default suite (tests/e2e/test_opt_in_healthy.py)."""
    assert {c: o for c, o in healthy.outcomes().items() if c in (SCSI, BLK)} == {SCSI: "passed", BLK: "passed"}, \
        healthy.output[-3000:]
    for case in (SCSI, BLK):
        props = SuiteRun.props(healthy.cases()[case])
        assert props["limit_set_by"] == "the rule" and props["limit_iops"] == "200", props
        assert props["throttled_held"] == props["again_held"] == "iops=200, bps=0", props
        assert props["lifted_held"] == "no limit", props


def test_a_burst_at_the_host_fails(run_suite) -> None:  # type: ignore[no-untyped-def]
    fault: SuiteRun = run_suite(*BOTH, "--inject", "throttle-burst")
    assert fault.returncode == 1, fault.output[-3000:]
    assert fault.outcomes() == {SCSI: "failed", BLK: "failed"}, fault.output[-3000:]
    for case in (SCSI, BLK):
        props, text = SuiteRun.props(fault.cases()[case]), SuiteRun.failure_text(fault.cases()[case])
        assert props["blame"] == "hypervisor", (props, text)
        assert props["throttled_held"] == "iops=200, bps=0, iops_max=20000, iops_max_length=60", props
        assert "throttled: the suite set iops=200, bps=0 with no burst, and the host holds" in text, text
        assert "its throttle let them through [blame: hypervisor]" in text, text
    assert fault.left_behind == []


def test_a_limit_libvirt_sets_from_the_disk_option_is_judged_and_kept(run_suite) -> None:  # type: ignore[no-untyped-def]
    run: SuiteRun = run_suite("--controllers", "virtio-blk", "-k", "throttle", "--with-rules", "throttle",
                              "--disk-backing", "file", "--disk", "iops=300")
    assert run.returncode == 0, run.output[-3000:]
    (case,) = run.cases().values()
    props = SuiteRun.props(case)
    assert props["limit_set_by"] == "--disk iops=300" and props["throttled_held"] == "iops=300, bps=0", props
    assert props["lifted_held"] == "no limit" and props["again_held"] == "iops=300, bps=0", props
    assert run.left_behind == []
