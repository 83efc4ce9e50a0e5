"""The storage controllers QEMU emulates, and how to attach a disk under test to each.

Each controller says how its disk appears in the domain XML (file backing, where libvirt
has XML for it) or on the QEMU command line (the latency disk, null-co, which libvirt has
no XML for), and what the device offers the guest (``ConfiguredLimits``).

Device ids: the disk's QEMU device is ``ua-vioc-dut<i>`` in both cases (``ua-`` is libvirt's
user-alias prefix), so host counters are found the same way for either backing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hypervisors.base import DiskSpec
from model.limits import ConfiguredLimits

#: First PCI slot used for the suite's own devices; libvirt fills slots from 0x02 upward,
#: so explicit high addresses avoid collisions (DESIGN.md: net at 0x11 without an
#: explicit address collided with libvirt's devices).
NET_PCI_SLOT = 0x11
FIRST_DISK_PCI_SLOT = 0x12

KIB = 1024


@dataclass(frozen=True)
class Controller:
    """One emulated storage controller.

    ``scsi_model``: libvirt's ``<controller type='scsi' model=...>`` for SCSI HBAs, else None.
    ``queue_depth``: commands the device accepts per disk, from QEMU's device model
    (measured in the Debian 6.1 guest here, see the README's controller table).
    """

    name: str
    description: str
    scsi_model: str | None
    queue_depth: int
    max_transfer_bytes: int | None
    multiqueue: bool = False
    #: which QEMU trace events carry this controller's requests: "virtio-blk", "scsi", "nvme"
    #: (see model/qemutrace.py); None where QEMU has no usable per-request events
    trace_family: str | None = None

    def configured(self, disk: DiskSpec) -> ConfiguredLimits:
        return ConfiguredLimits(
            queue_depth=self.queue_depth,
            max_transfer_bytes=self.max_transfer_bytes,
            logical_block_bytes=512,
            physical_block_bytes=disk.physical_block_bytes,
            optimal_io_bytes=disk.optimal_io_bytes,
            write_cache=True,
            discard=False,
            queues=disk.queues if self.multiqueue else 1,
        )


CONTROLLERS: dict[str, Controller] = {c.name: c for c in (
    # virtio-blk: virtqueue of 256 descriptors; the guest's nr_requests is 256.
    Controller("virtio-blk", "virtio-blk-pci, one PCI device per disk", None, 256, None, multiqueue=True,
               trace_family="virtio-blk"),
    # virtio-scsi: QEMU's cmd_per_lun default is 128 (guest queue_depth 128, can_queue 256).
    Controller("virtio-scsi", "virtio-scsi-pci HBA with a scsi-hd", "virtio-scsi", 128, None, multiqueue=True,
               trace_family="scsi"),
)}


def pci_addr(slot: int) -> str:
    return f"bus=pci.0,addr={slot:#x}"


def device_id(disk: DiskSpec) -> str:
    return f"ua-vioc-dut{disk.index}"


def controller_alias(disk: DiskSpec) -> str:
    return f"ua-vioc-ctl{disk.index}"


def latency_disk_args(disk: DiskSpec) -> list[str]:
    """QEMU arguments for a null-co disk with a fixed service time on the disk's controller."""
    ctl = CONTROLLERS[disk.controller]
    node = f"vioc-node{disk.index}"
    blockdev = {"driver": "null-co", "node-name": node, "size": disk.size_bytes,
                "latency-ns": int(disk.latency_ms * 1_000_000), "read-zeroes": True}
    device: dict[str, object] = {"drive": node, "id": device_id(disk), "serial": disk.serial,
                                 "physical_block_size": disk.physical_block_bytes,
                                 "opt_io_size": disk.optimal_io_bytes}
    if ctl.name == "virtio-blk":
        device.update({"driver": "virtio-blk-pci", "num-queues": disk.queues, "bus": "pci.0",
                       "addr": f"{FIRST_DISK_PCI_SLOT + disk.index:#x}"})
    else:
        # A non-zero WWN: Linux's mptsas skips SAS phys whose address is 0 (DESIGN.md).
        device.update({"driver": "scsi-hd", "bus": f"{controller_alias(disk)}.0",
                       "wwn": 0x5000C50015EA7100 + disk.index})
    # JSON form: QEMU 7.2 creates all key=value -device options before the JSON ones
    # libvirt emits, so a key=value scsi-hd would not find libvirt's controller bus.
    return ["-blockdev", json.dumps(blockdev), "-device", json.dumps(device)]


def controller_xml(disk: DiskSpec, index: int) -> str:
    """The libvirt ``<controller>`` for the disk's HBA (empty for virtio-blk).

    ``index`` counts the guest's SCSI controllers from 0: libvirt fills any gap in the
    indexes with default (LSI) controllers."""
    ctl = CONTROLLERS[disk.controller]
    if ctl.scsi_model is None:
        return ""
    queues = f"<driver queues='{disk.queues}'/>" if ctl.multiqueue and disk.queues > 1 else ""
    return (f"<controller type='scsi' index='{index}' model='{ctl.scsi_model}'>{queues}"
            f"<alias name='{controller_alias(disk)}'/>"
            f"<address type='pci' domain='0' bus='0' slot='{FIRST_DISK_PCI_SLOT + disk.index:#x}' function='0'/>"
            f"</controller>")


def file_disk_xml(disk: DiskSpec, path: str, index: int) -> str:
    """The libvirt ``<disk>`` for a file-backed disk under test."""
    ctl = CONTROLLERS[disk.controller]
    blockio = (f"<blockio logical_block_size='512' physical_block_size='{disk.physical_block_bytes}'/>"
               if disk.physical_block_bytes != 512 else "")
    if ctl.name == "virtio-blk":
        target = f"<target dev='vd{chr(ord('b') + disk.index)}' bus='virtio'/>"
        queues = f" queues='{disk.queues}'" if disk.queues > 1 else ""
        addr = f"<address type='pci' domain='0' bus='0' slot='{FIRST_DISK_PCI_SLOT + disk.index:#x}' function='0'/>"
        wwn = ""  # libvirt accepts <wwn> only on SCSI and IDE disks
    else:
        target = f"<target dev='sd{chr(ord('b') + disk.index)}' bus='scsi'/>"
        queues = ""
        wwn = f"<wwn>{0x5000c50015ea7100 + disk.index:016x}</wwn>"
        addr = f"<address type='drive' controller='{index}' bus='0' target='0' unit='0'/>"
    return (f"<disk type='file' device='disk'><driver name='qemu' type='raw' cache='none' io='native'{queues}/>"
            f"<source file='{path}'/>{target}{blockio}<serial>{disk.serial}</serial>"
            f"{wwn}<alias name='{device_id(disk)}'/>{addr}</disk>")


def disk_file(run_dir: Path, disk: DiskSpec) -> Path:
    """Where a file-backed disk's image lives (created sparse by the backend)."""
    return run_dir / f"dut{disk.index}.img"


def disk_devices(disks: Sequence[DiskSpec], run_dir: Path) -> tuple[list[str], list[str]]:
    """Domain XML elements and extra QEMU arguments that attach ``disks`` to their controllers."""
    xml: list[str] = []
    args: list[str] = []
    scsi_index = 0
    for disk in disks:
        xml.append(controller_xml(disk, scsi_index))
        if disk.backing == "latency":
            args += latency_disk_args(disk)
        else:
            xml.append(file_disk_xml(disk, str(disk_file(run_dir, disk)), scsi_index))
        scsi_index += CONTROLLERS[disk.controller].scsi_model is not None
    return xml, args
