"""Blame on real guests: a failure names the layer at fault from the hypervisor's own answer.

A QEMU build whose virtio-scsi advertises one command per LUN (emulated: a wrapper around the
host's QEMU adds ``-global virtio-scsi-pci.cmd_per_lun=1``, which the suite never sees) fails
limits and queue-depth, blamed on the hypervisor: QMP ``qom-get`` says 1 where 128 was asked.
A guest whose queue depth is lowered after boot (``--guest-setup``) fails queue-depth, blamed on
the guest configuration; limits, which judges what the device advertised, passes."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.suite_run import SuiteRun, run_suite_at
from tests.e2e.conftest import qemu_wrapper

SCSI = "libvirt:virtio-scsi:latency5ms"
HBA = "/machine/peripheral/ua-vioc-virtio-scsi/virtio-backend"


@pytest.fixture
def one_command_per_lun() -> Iterator[Path]:
    """The host's QEMU with virtio-scsi's cmd_per_lun at 1 by a -global (libvirt writes no cmd_per_lun,
    so the global stands), at a path the QEMU user can read (not pytest's root-only tmp_path)."""
    with qemu_wrapper("qemu-cmd-per-lun-1", '-global virtio-scsi-pci.cmd_per_lun=1') as w:
        yield w


def test_a_device_advertising_less_than_asked_is_blamed_on_the_hypervisor(one_command_per_lun: Path,
                                                                           tmp_path: Path) -> None:
    run = run_suite_at(tmp_path / "r", "--controllers", "virtio-scsi", "-k", "limits or queue_depth",
                       "--emulator", str(one_command_per_lun))
    assert run.returncode == 1, run.output[-3000:]
    cases = run.cases()
    limits, depth = cases[f"limits[{SCSI}]"], cases[f"queue-depth[{SCSI}]"]
    assert SuiteRun.props(limits)["blame"] == "hypervisor", SuiteRun.failure_text(limits)
    failure = limits.find("failure")
    assert failure is not None
    assert re.fullmatch(
        rf"FAIL: dut disk sd[a-z]+: queue depth: the suite asked for 128, the device advertises 1 \(cmd_per_lun 1 of "
        rf"{HBA}\), the guest sees 1 \[blame: hypervisor\]", failure.get("message", "")), failure.get("message")
    assert "the hypervisor configured" not in run.output
    props = SuiteRun.props(depth)
    assert props["blame"] == "hypervisor", SuiteRun.failure_text(depth)
    assert props["blame_reason"].endswith(f"the device advertises queue depth 1 (cmd_per_lun 1 of {HBA}) where the "
                                          "suite asked for 128"), props["blame_reason"]
    assert props["device_queue_depth_advertised"] == "1" and float(props["qd32_host_depth"]) < 3, props
    assert "guest's configuration caps" not in SuiteRun.failure_text(depth)
    suite = run.suite_properties()
    assert suite["disk.virtio-scsi.advertised.queue_depth"] == "1", suite
    assert suite["disk.virtio-scsi.device.ua-vioc-virtio-scsi/virtio-backend.cmd_per_lun"] == "1"
    assert suite["disk.virtio-scsi.advertised.source"].startswith("QEMU 7.2")
    assert "blame: hypervisor" in run.output and "hypervisor</td>" in (run.results / "report.html").read_text()
    assert run.left_behind == []


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
