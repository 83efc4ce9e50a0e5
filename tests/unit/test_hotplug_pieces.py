"""The hotplug rule's pieces that need no guest: where the host puts the added disk (and where it
refuses to), how the guest's waits are read, and which guest setting ``hotplug-off`` writes."""

from __future__ import annotations

from pathlib import PurePosixPath

import pytest

from tests.libvirt_python import REASON

pytest.importorskip("libvirt", reason=REASON)

from guest.tools.hotplug import HotplugWatch, Sighting
from guest.tools.tool import GuestTools
from hypervisors.base import HOTPLUG_SIZE_BYTES, HotplugUnavailable
from hypervisors.libvirt.hotplug import hotplug_spec, hotplug_xml
from model.errors import ParseError
from model.rules.hotplug import SCSI_SCAN, VIRTIO_AUTOPROBE, off_setting
from model.types import DiskSpec
from tests.unit.fake_shell import FakeShell

PATH = PurePosixPath("/run/x/hotplug90.img")


def _guest(controller: str) -> list[DiskSpec]:
    return [DiskSpec(controller, 0), DiskSpec(controller, 1, backing="file", role="scratch")]


def test_the_added_scsi_disk_takes_the_next_target_with_its_own_serial() -> None:
    disks = _guest("virtio-scsi")
    xml = hotplug_xml(disks, hotplug_spec(disks[0]), PATH)
    assert "target='2' unit='0'" in xml and "<serial>vioc-dut90</serial>" in xml
    assert "<alias name='ua-vioc-dut90'/>" in xml and f"<source file='{PATH}'/>" in xml


def test_the_added_virtio_blk_disk_takes_the_next_free_slot() -> None:
    disks = _guest("virtio-blk")  # slots 0x12 and 0x13
    assert "slot='0x14'" in hotplug_xml(disks, hotplug_spec(disks[0]), PATH)
    assert hotplug_spec(disks[0]).size_bytes == HOTPLUG_SIZE_BYTES
    # the added disk shares a virtio-scsi HBA's queues: the guest shows them (a 1 here failed the limits
    # comparison on a healthy guest: "hardware queues: the host configured 1, the guest sees 2")
    assert hotplug_spec(DiskSpec("virtio-scsi", 0, queues=2)).queues == 2


@pytest.mark.parametrize(("controller", "why"), [("nvme", "no <disk> XML"), ("megasas-gen2", "no <disk> XML"),
                                                 ("mptsas1068", "sends the guest no event"),
                                                 ("lsi53c895a", "sends the guest no event"),
                                                 ("megasas", "sends the guest no event")])
def test_a_controller_without_a_hotplug_path_is_unavailable_with_the_reason(controller: str, why: str) -> None:
    disks = _guest(controller)
    with pytest.raises(HotplugUnavailable, match=why):
        hotplug_xml(disks, hotplug_spec(disks[0]), PATH)


def _watch(reply: str) -> tuple[HotplugWatch, FakeShell]:
    shell = FakeShell(handlers=[(r"/proc/uptime|printf|cat ", lambda _c: reply)])
    return GuestTools(shell, "vioconform-7").get(HotplugWatch), shell


def test_the_guests_waits_are_read() -> None:
    assert _watch("found sdc 131072 0.23\n")[0].wait_for("vioc-dut90", 5) == Sighting("sdc", 64 << 20, 0.23)
    assert _watch("timeout 5.01\n")[0].wait_for("vioc-dut90", 5) is None
    assert _watch("gone 0.01\n")[0].wait_gone("sdc", 5) == 0.01
    assert _watch("timeout\n")[0].wait_gone("sdc", 5) is None
    with pytest.raises(ParseError, match="printed 'found sdc'"):
        _watch("found sdc\n")[0].wait_for("vioc-dut90", 5)


def test_scsi_scan_is_written_without_a_newline() -> None:
    # scsi_mod's scan is a 7-byte string parameter: "manual\n" does not fit (ENOSPC in the guest)
    watch, shell = _watch("")
    watch.write(SCSI_SCAN, "manual")
    assert shell.commands[-1] == f"printf %s manual > {SCSI_SCAN}"


def test_hotplug_off_writes_the_bus_that_probes_the_disk() -> None:
    assert off_setting("sd") == (SCSI_SCAN, "manual")
    # the PCI core binds a hot-added function whatever the PCI bus's drivers_autoprobe says
    assert off_setting("virtio_blk") == (VIRTIO_AUTOPROBE, "0")
