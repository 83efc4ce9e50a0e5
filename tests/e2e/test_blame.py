"""Blame on real guests: a failure names the layer at fault from the hypervisor's own answer.

A guest whose queue depth is lowered after boot (``--guest-setup``) fails queue-depth, blamed on
the guest configuration; limits, which judges what the device advertised, passes. (A QEMU build whose
virtio-scsi advertises one command per LUN, blamed on the hypervisor, is tests/e2e/test_qemu_build.py's:
its run of that build is also a nightly series' and a reproducer bundle's.)"""

from __future__ import annotations

from pathlib import Path

from bench.suite_run import SuiteRun, run_suite_at

SCSI = "libvirt:virtio-scsi:latency5ms"


def test_a_queue_depth_lowered_after_boot_is_blamed_on_the_guest_configuration(tmp_path: Path) -> None:
    run = run_suite_at(tmp_path / "r", "--controllers", "virtio-scsi", "-k", "limits or queue_depth",
                       "--guest-setup", "echo 1 > /sys/block/{disk}/device/queue_depth")
    assert run.returncode == 1, run.output[-3000:]
    assert run.outcomes() == {f"limits[{SCSI}]": "passed", f"queue-depth[{SCSI}]": "failed"}, run.output[-3000:]
    props = SuiteRun.props(run.cases()[f"queue-depth[{SCSI}]"])
    assert props["blame"] == "guest configuration", SuiteRun.failure_text(run.cases()[f"queue-depth[{SCSI}]"])
    assert "queue depth was 128 when the guest probed the disk and is 1 now" in props["blame_reason"], props
    assert props["device_queue_depth_advertised"] == "128", props
    assert run.suite_properties()["disk.virtio-scsi.advertised.queue_depth"] == "128"
    assert run.left_behind == []
