"""A disk's settings (--disk, --profile) in the domain XML and the QEMU arguments, parsed back;
what a controller cannot carry is refused with its reason (hypervisors/libvirt/disk_settings.py).
What libvirt and QEMU make of it on a real guest is checked in tests/e2e/test_disk_settings.py."""

from __future__ import annotations

import json
import shutil
import subprocess
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from hypervisors.libvirt.controllers import CONTROLLERS, disk_devices, format_options
from hypervisors.libvirt.disk_settings import DiskSettingsRefused, domain_iothreads_xml
from model.disk_settings import DiskSettings, parse_disk_settings
from model.disks import suite_disks
from model.types import DiskSpec


def _with(settings: DiskSettings, controllers: tuple[str, ...] = ("virtio-scsi",),
          backing: str = "file") -> list[DiskSpec]:
    return [replace(d, settings=settings) for d in suite_disks(controllers, backing)]


def _disks_xml(disks: list[DiskSpec], tmp_path: Path) -> list[ET.Element]:
    xml, _ = disk_devices(disks, tmp_path)
    return [ET.fromstring(x) for x in xml if x.startswith("<disk")]


def _qemu_args(disks: list[DiskSpec], tmp_path: Path) -> list[dict[str, object]]:
    _, args = disk_devices(disks, tmp_path)
    return [json.loads(a) for a in args if a.startswith("{")]


def test_nothing_asked_is_the_xml_the_suite_always_wrote(tmp_path: Path) -> None:
    d = _disks_xml(suite_disks(("virtio-scsi",), "file"), tmp_path)[0]
    driver = d.find("driver")
    assert driver is not None
    assert {k: driver.get(k) for k in ("type", "cache", "io", "discard", "detect_zeroes", "iothread")} == {
        "type": "raw", "cache": "none", "io": "native", "discard": "unmap", "detect_zeroes": None, "iothread": None}
    assert d.find("iotune") is None and d.find("blockio") is None
    assert d.findtext("serial") == "vioc-dut0"


def test_every_setting_reaches_the_libvirt_disk(tmp_path: Path) -> None:
    s = parse_disk_settings("cache=directsync,aio=io_uring,discard=unmap,detect_zeroes=unmap,format=qcow2,"
                            "logical_block_size=4096,serial=VOL-7,wwn=5000c50015ea7100,iops=300,bps=1048576")
    dut, scratch = _disks_xml(_with(s), tmp_path)
    driver = dut.find("driver")
    assert driver is not None
    assert (driver.get("type"), driver.get("cache"), driver.get("io"), driver.get("discard"),
            driver.get("detect_zeroes")) == ("qcow2", "directsync", "io_uring", "unmap", "unmap")
    blockio = dut.find("blockio")
    assert blockio is not None
    assert (blockio.get("logical_block_size"), blockio.get("physical_block_size")) == ("4096", "4096")
    assert dut.findtext("iotune/total_iops_sec") == "300" and dut.findtext("iotune/total_bytes_sec") == "1048576"
    # each disk its own serial and WWN, so that the guest tells them apart
    assert (dut.findtext("serial"), scratch.findtext("serial")) == ("VOL-7-0", "VOL-7-1")
    assert (dut.findtext("wwn"), scratch.findtext("wwn")) == ("5000c50015ea7100", "5000c50015ea7101")


def test_an_iothread_is_the_domains_and_pinned_where_the_controller_runs_in_one(tmp_path: Path) -> None:
    on = DiskSettings(iothread="on")
    xml, _ = disk_devices(_with(on, ("virtio-scsi",)), tmp_path)
    hba = ET.fromstring(next(x for x in xml if x.startswith("<controller")))
    assert hba.find("driver") is not None and hba.find("driver").get("iothread") == "1"  # type: ignore[union-attr]
    vd = _disks_xml(_with(on, ("virtio-blk",)), tmp_path)[0].find("driver")
    assert vd is not None and vd.get("iothread") == "1"
    assert domain_iothreads_xml(_with(on)) == "<iothreads>1</iothreads>"
    assert domain_iothreads_xml(suite_disks(("virtio-blk",))) == ""
    # the latency disk's virtio-blk device is a QEMU argument: pinned to libvirt's iothread1
    dev = [a for a in _qemu_args(_with(on, ("virtio-blk",), "latency"), tmp_path) if a.get("driver") == "virtio-blk-pci"]
    assert dev[0]["iothread"] == "iothread1"


def test_the_latency_disk_takes_what_a_null_co_node_and_its_device_can(tmp_path: Path) -> None:
    s = DiskSettings(cache="writethrough", detect_zeroes="on", discard="ignore", logical_block_size=4096,
                     serial="LAT")
    args = _qemu_args(_with(s, ("virtio-scsi",), "latency"), tmp_path)
    node = next(a for a in args if a.get("driver") == "null-co")
    assert node["cache"] == {"direct": False, "no-flush": False}
    assert (node["detect-zeroes"], node["discard"]) == ("on", "ignore")
    dev = next(a for a in args if a.get("driver") == "scsi-hd")
    assert (dev["logical_block_size"], dev["physical_block_size"], dev["serial"]) == (4096, 4096, "LAT-0")
    assert dev["write-cache"] == "off"  # writethrough: the guest is told of no volatile cache


def test_a_qemu_argument_file_disk_is_opened_as_its_settings_ask(tmp_path: Path) -> None:
    s = DiskSettings(cache="writeback", format="qcow2", detect_zeroes="on")
    args = _qemu_args(_with(s, ("nvme",)), tmp_path)
    node = next(a for a in args if a.get("driver") == "qcow2")
    assert node["cache"] == {"direct": False, "no-flush": False} and node["detect-zeroes"] == "on"
    file = node["file"]
    assert isinstance(file, dict) and file["aio"] == "threads"  # no O_DIRECT: QEMU refuses native
    assert format_options(_with(s, ("nvme",))[0]) == {"driver": "qcow2", "cache": {"direct": False, "no-flush": False},
                                                      "discard": "unmap", "detect-zeroes": "on"}


@pytest.mark.parametrize(("controller", "backing", "settings", "says"), [
    ("ahci", "file", DiskSettings(iothread="on"), ("iothread=on: disk 0 (ahci:file) is on ahci, which QEMU never runs "
                                                  "in an iothread (only virtio-blk and virtio-scsi do)")),
    ("virtio-blk", "file", DiskSettings(wwn="5000c50015ea7100"), "whose device has no WWN"),
    ("nvme", "file", DiskSettings(wwn="5000c50015ea7100"), "whose device has no WWN"),
    ("virtio-blk", "file", DiskSettings(serial="A" * 19), "is 21 bytes, and virtio-blk carries 20"),
    ("ide", "file", DiskSettings(logical_block_size=4096), "an ATA disk, which QEMU gives 512-byte blocks only"),
    ("virtio-scsi", "latency", DiskSettings(format="qcow2"), "the null-co latency disk, which has no image to format"),
    ("virtio-scsi", "latency", DiskSettings(iops=100), "give --disk-backing file"),
    ("nvme", "file", DiskSettings(bps=1000000), "attached with QEMU arguments"),
    ("virtio-scsi", "file", DiskSettings(cache="writeback").merged(DiskSettings(aio="native")),
     "aio=native on disk 0 (virtio-scsi:file) needs cache=none or cache=directsync"),
    ("virtio-scsi", "file", DiskSettings(discard="ignore", detect_zeroes="unmap"), "needs discard=unmap"),
])
def test_what_a_controller_cannot_carry_is_refused_with_its_reason(
        controller: str, backing: str, settings: DiskSettings, says: str, tmp_path: Path) -> None:
    with pytest.raises(DiskSettingsRefused) as e:
        disk_devices(_with(settings, (controller,), backing), tmp_path)
    assert says in str(e.value)


def test_the_configured_limits_follow_the_settings() -> None:
    d = _with(DiskSettings(logical_block_size=4096, cache="writethrough"))[0]
    limits = CONTROLLERS["virtio-scsi"].configured(d)
    assert (limits.logical_block_bytes, limits.physical_block_bytes, limits.write_cache) == (4096, 4096, False)
    assert CONTROLLERS["virtio-scsi"].configured(suite_disks(("virtio-scsi",))[0]).write_cache is True


@pytest.mark.skipif(shutil.which("virt-xml-validate") is None or shutil.which("xmllint") is None,
                    reason="virt-xml-validate (libvirt-clients) and its xmllint (libxml2-utils) are not both installed")
def test_libvirts_schema_takes_the_domain_with_every_setting(tmp_path: Path) -> None:
    backend = pytest.importorskip("hypervisors.libvirt.backend")
    from hypervisors.base import GuestRequest
    s = parse_disk_settings("cache=none,aio=native,iothread=on,discard=unmap,detect_zeroes=unmap,"
                            "logical_block_size=4096,serial=VOL,wwn=5000c50015ea7100,iops=300,bps=1048576")
    disks = _with(s, ("virtio-scsi",)) + [replace(d, index=d.index + 2, settings=replace(s, wwn=None))
                                          for d in suite_disks(("virtio-blk",), "file")]
    request = GuestRequest("vioconform-xmlcheck", tuple(disks), tmp_path, "AAAA")
    cls = backend.LibvirtBackend
    xml = cls.domain_xml(cls.__new__(cls), request.name, "qemu", tmp_path, tmp_path / "vmlinuz", tmp_path / "initrd",
                         "console=ttyS0", request, 2222)
    (tmp_path / "domain.xml").write_text(xml)
    proc = subprocess.run(["virt-xml-validate", str(tmp_path / "domain.xml"), "domain"], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert ET.fromstring(xml).findtext("iothreads") == "1"


def _one_disk_guest(settings: DiskSettings, tmp_path: Path) -> tuple[Any, Any, Any]:
    """The libvirt backend (no connection), and a guest with the scratch disk set up with ``settings``."""
    backend = pytest.importorskip("hypervisors.libvirt.backend")
    from hypervisors.base import Guest
    from model.device_limits import ConfiguredLimits
    from model.types import AttachedDisk, GuestDiskId, SshEndpoint
    spec = _with(settings)[1]
    attached = AttachedDisk(spec, "ua-vioc-dut01", ConfiguredLimits(queue_depth=128), GuestDiskId("serial", spec.serial))
    guest = Guest("g", SshEndpoint("127.0.0.1", 22, "root", tmp_path / "k", ""), (attached,), "tcg")
    cls = backend.LibvirtBackend
    return cls.__new__(cls), guest, attached


def test_a_disk_with_limits_of_its_own_is_not_held_by_the_stall(tmp_path: Path) -> None:
    """The stall's hold is QEMU's throttle, and its release sets every limit to 0: it would take the
    asked limits off, so stall-tolerance skips such a disk with the reason."""
    from hypervisors.base import HoldUnavailable
    backend, guest, attached = _one_disk_guest(DiskSettings(iops=300), tmp_path)
    with pytest.raises(HoldUnavailable) as e:
        backend.disk_hold(guest, attached)
    assert "has I/O limits of its own (iops=300): the stall is held with QEMU's throttle" in str(e.value)


def test_a_disk_whose_discards_the_host_drops_as_asked_is_no_case_for_the_discard_rule(tmp_path: Path) -> None:
    from hypervisors.base import DiscardUnavailable
    backend, guest, attached = _one_disk_guest(DiskSettings(discard="ignore"), tmp_path)
    with pytest.raises(DiscardUnavailable) as e:
        backend.discard_observer(guest, attached)
    assert "set up with discard=ignore (--disk, --profile): QEMU drops the guest's discards" in str(e.value)


def test_a_qcow2_disk_is_no_case_for_the_discard_rule(tmp_path: Path) -> None:
    """qcow2 hands its file the discards of whole allocated clusters, at the file's own offsets: the
    rule's counts and allocation, read at the guest's offsets, would fail a healthy disk (virt-install's
    profile did, on the embedded guest)."""
    from hypervisors.base import DiscardUnavailable
    backend, guest, attached = _one_disk_guest(DiskSettings(format="qcow2"), tmp_path)
    with pytest.raises(DiscardUnavailable) as e:
        backend.discard_observer(guest, attached)
    assert "is a qcow2 image: its file's offsets are not the guest's" in str(e.value)


def test_an_unknown_controller_is_left_to_the_controllers_check() -> None:
    """``--controllers virtio-scsi,floppy`` is the controllers' usage error ("unknown controller(s) floppy"),
    not a KeyError in the disk settings' check, which runs first."""
    from hypervisors.libvirt.controllers import disk_settings_refusal
    assert disk_settings_refusal(suite_disks(["virtio-scsi", "floppy"])) == ""
    iothread = {"floppy": DiskSettings(), "ahci": parse_disk_settings("iothread=on")}
    assert "ahci" in disk_settings_refusal(suite_disks(["floppy", "ahci"], settings=iothread))
