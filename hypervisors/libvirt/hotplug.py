"""A disk the host adds to a running libvirt guest and removes again (the hotplug rule).

The disk is a sparse raw file in the run's staging directory, described with the same ``<disk>`` XML as
the disks under test (controllers.py's ``file_disk_xml``: its serial, its alias, its place on the
controller after the guest's own disks) and attached live with ``attachDeviceFlags``. It is removed
with ``detachDeviceAlias``: libvirt asks the guest to release a PCI device (virtio-blk: an ACPI eject)
and returns, so ``present`` reads the live domain XML, which drops the disk once QEMU has deleted it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from pathlib import PurePath

import libvirt

from hypervisors.base import HOTPLUG_SIZE_BYTES, HotplugUnavailable
from hypervisors.libvirt.controllers import CONTROLLERS, device_id, file_disk_xml, layout
from hypervisors.libvirt.hostfiles import HostFiles
from model.device_limits import ConfiguredLimits
from model.errors import HypervisorError
from model.types import DiskSpec

log = logging.getLogger("vioconform.hotplug")

#: The hot-plugged disk's index among the guest's disks: its serial is ``vioc-dut90`` and its QEMU id
#: ``ua-vioc-dut90``, far from the suite's own disks (two per controller, nine controllers at most).
HOTPLUG_INDEX = 90


def hotplug_spec(beside: DiskSpec) -> DiskSpec:
    """The disk the rule adds on the controller of ``beside``, with its block sizes and queues: on
    virtio-scsi the queues are the HBA's, which the added disk shares (a guest shows a disk added to a
    2-queue HBA with 2 hardware queues), and on virtio-blk the disk's own, set alike."""
    return DiskSpec(beside.controller, index=HOTPLUG_INDEX, backing="file", size_bytes=HOTPLUG_SIZE_BYTES,
                    physical_block_bytes=beside.physical_block_bytes, queues=beside.queues, role="hotplug")


def hotplug_xml(guest_disks: Sequence[DiskSpec], spec: DiskSpec, path: PurePath) -> str:
    """The ``<disk>`` XML of ``spec`` placed after the guest's own disks (the next free SCSI target or
    PCI slot); HotplugUnavailable where libvirt has no ``<disk>`` for the controller or no slot is free."""
    ctl = CONTROLLERS[spec.controller]
    if not ctl.libvirt_disks:
        raise HotplugUnavailable(f"libvirt has no <disk> XML for a disk on {spec.controller} (the suite attaches "
                                 "its disks with QEMU arguments), so it cannot hot-plug one")
    if ctl.hotplug_unnoticed:
        raise HotplugUnavailable(f"on {spec.controller}: {ctl.hotplug_unnoticed} (docs/rules/hotplug.md)")
    try:
        placement = layout([*guest_disks, spec])[-1]
    except HypervisorError as e:
        raise HotplugUnavailable(f"no room for another disk on {spec.controller}: {e}") from e
    return file_disk_xml(placement, str(path))


class LibvirtHotplugDisk:
    """The rule's disk on one libvirt guest (``HotplugDisk``)."""

    def __init__(self, conn: libvirt.virConnect, domain: str, files: HostFiles, path: PurePath, xml: str,
                 spec: DiskSpec) -> None:
        self.conn = conn
        self.domain = domain
        self.files = files
        self.path = path
        self.xml = xml
        self.spec = spec
        self.alias = device_id(spec)
        self._created = False

    @property
    def serial(self) -> str:
        return self.spec.serial

    @property
    def size_bytes(self) -> int:
        return self.spec.size_bytes

    @property
    def configured(self) -> ConfiguredLimits:
        return CONTROLLERS[self.spec.controller].configured(self.spec)

    def attach(self) -> None:
        self.files.create_disk(self.path, self.spec.size_bytes)
        self._created = True
        try:
            self.conn.lookupByName(self.domain).attachDeviceFlags(self.xml, libvirt.VIR_DOMAIN_AFFECT_LIVE)
        except libvirt.libvirtError as e:
            raise HotplugUnavailable(f"libvirt refused to hot-plug a disk on {self.spec.controller}: "
                                     f"{e.get_error_message()}") from e
        log.info("%s: attached %s (%s) on %s", self.domain, self.alias, self.serial, self.spec.controller)

    def detach(self) -> None:
        try:
            self.conn.lookupByName(self.domain).detachDeviceAlias(self.alias, libvirt.VIR_DOMAIN_AFFECT_LIVE)
        except libvirt.libvirtError as e:
            raise HypervisorError(f"libvirt could not detach {self.alias} from {self.domain}: "
                                  f"{e.get_error_message()}") from e

    def present(self) -> bool:
        return f"'{self.alias}'" in self.conn.lookupByName(self.domain).XMLDesc(0)

    def remove(self) -> None:
        with contextlib.suppress(libvirt.libvirtError, HypervisorError):
            if self.present():
                self.detach()
        if self._created:
            with contextlib.suppress(OSError):
                self.files.remove(self.path)
