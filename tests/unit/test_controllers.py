"""How disks are attached to each controller: slots, buses, ids and QEMU arguments, without a guest.

What libvirt and QEMU make of it is checked in tests/e2e/test_controllers.py.
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from hypervisors.libvirt.controllers import (
    CONTROLLERS,
    FIRST_DISK_PCI_SLOT,
    LAST_PCI_SLOT,
    NET_PCI_SLOT,
    device_id,
    disk_devices,
    guest_drivers,
    hba_alias,
    layout,
)
from hypervisors.libvirt.trace import qemu_user
from images.build import MODULES
from model.disks import suite_disks
from model.errors import HypervisorError
from model.types import DiskSpec

KIB = 1024
#: The issue's table (issue 5), as measured in the Debian 6.1 guest here.
MEASURED = {
    "virtio-blk": (256, None), "virtio-scsi": (128, None), "mptsas1068": (64, 4096 * KIB),
    "lsi53c895a": (16, 32767 * KIB), "megasas": (256, 128 * KIB), "megasas-gen2": (256, 128 * KIB),
    "nvme": (1023, 512 * KIB), "ahci": (32, 128 * KIB), "ide": (1, 32767 * KIB),
}


def two_disks_each(names: list[str] | None = None, backing: str = "latency") -> list[DiskSpec]:
    """What the suite asks for: a disk under test and a 4K scratch disk on each controller (all by default)."""
    return suite_disks(names or list(CONTROLLERS), backing)


def qemu_devices(args: list[str]) -> list[dict[str, object]]:
    """The decoded ``-device`` arguments, in order; fails on any key=value form."""
    out = []
    for flag, value in zip(args[::2], args[1::2], strict=False):
        assert flag in ("-device", "-blockdev"), args
        # QEMU 7.2 creates key=value -device options before libvirt's JSON ones: all must be JSON.
        decoded = json.loads(value)
        if flag == "-device":
            out.append(decoded)
    return out


def test_every_controller_of_the_issue_with_its_measured_limits() -> None:
    assert {n: (c.queue_depth, c.max_transfer_bytes) for n, c in CONTROLLERS.items()} == MEASURED
    families = {n: c.trace_family for n, c in CONTROLLERS.items()}
    assert families == {"virtio-blk": "virtio-blk", "virtio-scsi": "scsi", "mptsas1068": "scsi",
                        "lsi53c895a": "scsi", "megasas": "scsi", "megasas-gen2": "scsi", "nvme": "nvme",
                        "ahci": "ahci", "ide": None}
    # IDE is the controller without command queuing; the queue-depth rule reads this.
    assert not CONTROLLERS["ide"].configured(DiskSpec("ide")).command_queuing
    assert all(c.configured(DiskSpec(n)).command_queuing for n, c in CONTROLLERS.items() if n != "ide")


def test_the_whole_matrix_fits_one_guest() -> None:
    places = layout(two_disks_each())
    slots = [p.slot for p in places if p.slot is not None]
    assert all(FIRST_DISK_PCI_SLOT <= s <= LAST_PCI_SLOT for s in slots)
    assert NET_PCI_SLOT not in slots
    # one slot per HBA, shared by its two disks; one per virtio-blk and NVMe disk
    per_controller = {n: {p.slot for p in places if p.disk.controller == n} for n in CONTROLLERS}
    assert per_controller["ide"] == {None}
    for name in ("virtio-blk", "nvme"):
        assert len(per_controller[name]) == 2, name
    for name in ("virtio-scsi", "mptsas1068", "lsi53c895a", "megasas", "megasas-gen2", "ahci"):
        assert len(per_controller[name]) == 1, name
    distinct = set().union(*(s for s in per_controller.values())) - {None}
    assert len(distinct) == 10 <= LAST_PCI_SLOT - FIRST_DISK_PCI_SLOT + 1


def test_too_many_disks_is_an_error_that_says_what_to_do() -> None:
    specs = [DiskSpec("virtio-blk", i) for i in range(LAST_PCI_SLOT - FIRST_DISK_PCI_SLOT + 2)]
    with pytest.raises(HypervisorError, match="test fewer controllers per run"):
        layout(specs)


def test_no_device_id_is_part_of_another() -> None:
    # query-blockstats entries are matched by substring (model/blockstats.parse_qmp_blockstats)
    ids = [device_id(DiskSpec("virtio-blk", i)) for i in range(40)]
    assert len(set(ids)) == len(ids)
    assert not [(a, b) for a in ids for b in ids if a != b and a in b]


def test_disks_sit_on_their_own_controller_and_apart(tmp_path: Path) -> None:
    specs = two_disks_each()
    xml, args = disk_devices(specs, tmp_path)
    devices = qemu_devices(args)
    by_id = {d["id"]: d for d in devices}
    # the latency disks (null-co) are QEMU arguments on every controller, bus named after the HBA
    dut = {s.controller: by_id[device_id(s)] for s in specs if s.role == "dut"}
    for name in ("virtio-scsi", "mptsas1068", "lsi53c895a", "megasas", "megasas-gen2"):
        assert dut[name]["driver"] == "scsi-hd" and dut[name]["bus"] == f"{hba_alias(name)}.0", dut[name]
        assert dut[name]["wwn"], "mptsas needs a non-zero WWN"
    assert dut["ahci"]["driver"] == "ide-hd" and dut["ahci"]["bus"] == f"{hba_alias('ahci')}.0"
    assert (dut["ide"]["driver"], dut["ide"]["bus"], dut["ide"]["unit"]) == ("ide-hd", "ide.0", 0)
    assert dut["nvme"]["driver"] == "nvme" and dut["nvme"]["serial"] == "vioc-dut12"
    assert dut["virtio-blk"]["driver"] == "virtio-blk-pci"
    # megasas-gen2 has no libvirt model: its HBA is a JSON -device ahead of its disks
    ids = [d["id"] for d in devices]
    assert ids.index(hba_alias("megasas-gen2")) < ids.index(device_id(specs[10]))
    # the scratch disk of the IDE is on the other channel, so the two never share one
    scratch = ET.fromstring(next(x for x in xml if "vioc-dut17" in x))
    addr = scratch.find("address")
    assert addr is not None and (addr.get("bus"), addr.get("unit")) == ("1", "0")


def test_file_disks_libvirt_can_describe_are_libvirt_disks(tmp_path: Path) -> None:
    xml, _ = disk_devices(two_disks_each(), tmp_path)
    disks = [ET.fromstring(x) for x in xml if x.startswith("<disk")]
    buses = {d.findtext("serial"): (d.find("target").get("bus"), d.find("address")) for d in disks}  # type: ignore[union-attr]
    assert {s: b for s, (b, _) in buses.items()} == {
        "vioc-dut1": "virtio", "vioc-dut3": "scsi", "vioc-dut5": "scsi", "vioc-dut7": "scsi",
        "vioc-dut9": "scsi", "vioc-dut15": "sata", "vioc-dut17": "ide"}
    # libvirt 9.0 maps lsilogic's unit to scsi-id and the other HBAs' target: both give scsi-id 1
    lsi, sas = buses["vioc-dut7"][1], buses["vioc-dut5"][1]
    assert lsi is not None and (lsi.get("target"), lsi.get("unit")) == ("0", "1")
    assert sas is not None and (sas.get("target"), sas.get("unit")) == ("1", "0")
    controllers = [ET.fromstring(x) for x in xml if x.startswith("<controller")]
    scsi = [c for c in controllers if c.get("type") == "scsi"]
    assert [c.get("index") for c in scsi] == ["0", "1", "2", "3"], "libvirt fills index gaps with LSI HBAs"
    assert [c.get("model") for c in scsi] == ["virtio-scsi", "lsisas1068", "lsilogic", "lsisas1078"]
    assert [c.get("type") for c in controllers if c.get("type") != "scsi"] == ["sata"]


def test_file_disks_only_qemu_can_attach_are_given_to_the_qemu_user(tmp_path: Path) -> None:
    specs = two_disks_each(["megasas-gen2", "nvme"], backing="file")
    for s in specs:
        (tmp_path / f"dut{s.index}.img").write_bytes(b"")
    xml, args = disk_devices(specs, tmp_path)
    assert not [x for x in xml if x.startswith("<disk")]
    blockdevs = [json.loads(v) for f, v in zip(args[::2], args[1::2], strict=False) if f == "-blockdev"]
    assert [b["driver"] for b in blockdevs] == ["raw"] * 4
    assert {b["file"]["filename"] for b in blockdevs} == {str(tmp_path / f"dut{i}.img") for i in range(4)}
    assert all(b["file"]["aio"] == "native" and b["cache"]["direct"] for b in blockdevs)
    uid, gid = qemu_user()
    for i in range(4):
        st = os.stat(tmp_path / f"dut{i}.img")
        assert (st.st_uid, st.st_gid) == (uid, gid)


def test_the_guest_loads_the_drivers_of_its_controllers_and_no_other() -> None:
    """The embedded guest's ``vioconform.drivers=``: each controller's driver once, and the SCSI
    disk driver only where a disk is a SCSI disk to the guest (not virtio-blk, not NVMe)."""
    def of(*controllers: str) -> list[str]:
        return guest_drivers([DiskSpec(c, i) for i, c in enumerate(controllers)])

    assert of("virtio-blk") == ["virtio_blk"]
    assert of("virtio-blk", "virtio-scsi") == ["virtio_blk", "virtio_scsi", "sd_mod"]
    assert of("nvme", "ide", "ahci") == ["nvme", "ata_piix", "sd_mod", "ahci"]
    assert of("megasas", "megasas-gen2") == ["megaraid_sas", "sd_mod"]
    assert of() == []
    # every controller names the driver that binds it, and the image carries each (images/build.py)
    assert set(of(*CONTROLLERS)) <= set(MODULES)
