"""hotplug on real guests (libvirt's attachDeviceFlags and detachDeviceAlias on QEMU 7.2, the embedded
Debian 6.1 guest): the healthy guest sees the added disk with its serial and size and lets it go, on
virtio-scsi and virtio-blk; on virtio-scsi fio ends with EIO when the disk is removed under it, on
virtio-blk it reads on with empty reads (the rule's finding there); ``--inject hotplug-off`` fails hotplug
on both at the add and leaves the guest as it was for the rule after it (limits passes), with nothing
left behind on the host."""

from __future__ import annotations

from tests.e2e.conftest import SuiteRun

BOTH = ("--controllers", "virtio-scsi,virtio-blk")
CASES = ("hotplug[libvirt:virtio-scsi:latency5ms]", "hotplug[libvirt:virtio-blk:latency5ms]")
LIMITS = ("limits[libvirt:virtio-scsi:latency5ms]", "limits[libvirt:virtio-blk:latency5ms]")


def test_the_healthy_guest_sees_the_disk_come_and_go(run_suite) -> None:  # type: ignore[no-untyped-def]
    run: SuiteRun = run_suite(*BOTH, "-k", "hotplug", "--surprise-removal")
    assert run.returncode == 1, run.output
    # virtio-blk reads a disk removed under fio as empty (the rule's finding); virtio-scsi mostly ends fio
    # with EIO, and was once seen doing the same as virtio-blk (a race in sd's removal): either way the
    # add and the idle removal pass, and a failure is exactly the surprise removal's empty reads
    assert run.outcomes()[CASES[1]] == "failed", run.output
    for case in CASES:
        if run.outcomes()[case] == "failed":
            text = SuiteRun.failure_text(run.cases()[case])
            assert "FAIL: surprise removal: fio on " in text and "completed with no data" in text, text
            assert text.count("FAIL:") == 1, text  # the add and the idle removal pass there too
        else:
            scsi = SuiteRun.props(run.cases()[case])
            assert scsi["surprise_fio_exit_status"] != "0" and float(scsi["surprise_fio_s"]) < 5, scsi
    for case, prefix in zip(CASES, ("sd", "vd"), strict=True):
        props = SuiteRun.props(run.cases()[case])
        assert props["hotplug_serial"] == "vioc-dut90" and props["hotplug_device"].startswith(prefix), props
        assert props["guest_size_bytes"] == props["configured_size_bytes"] == str(64 << 20), props
        assert float(props["seen_s"]) < float(props["seen_bound_s"]), props
        assert float(props["gone_host_s"]) < float(props["gone_bound_s"]), props
        # the limits rule's comparison on the added disk: the guest sees what the host configured
        assert props["added_physical_block_size_guest"] == props["added_physical_block_size_configured"], props
        assert props["added_logical_block_size_guest"] == "512", props
    assert run.left_behind == []


def healthy_figures(run: SuiteRun) -> None:
    """Without --surprise-removal (the default) the add and the idle removal pass on both, in a run of the
    default suite (tests/e2e/test_rules_guest.py)."""
    assert {c: run.outcomes()[c] for c in CASES} == dict.fromkeys(CASES, "passed"), run.output[-3000:]
    assert "surprise_fio_s" not in SuiteRun.props(run.cases()[CASES[0]])


def test_a_guest_that_neither_binds_nor_scans_fails_it_and_only_it(run_suite) -> None:  # type: ignore[no-untyped-def]
    run: SuiteRun = run_suite(*BOTH, "-k", "hotplug or limits", "--inject", "hotplug-off")
    assert run.returncode == 1, run.output
    assert run.outcomes() == {**dict.fromkeys(CASES, "failed"), **dict.fromkeys(LIMITS, "passed")}, run.output
    for case in CASES:
        text = SuiteRun.failure_text(run.cases()[case])
        assert "FAIL: the guest showed no disk with serial vioc-dut90" in text, text
        assert "blame: guest driver" in text, text
    assert run.left_behind == []
