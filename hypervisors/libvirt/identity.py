"""What a libvirt/QEMU disk is told to be (the identity rule's reference): the serial the suite
gives its device (``DiskSpec.serial``), its WWN (``controllers.disk_wwn``), its size and how many
bytes of a serial its bus carries (``disk_settings.SERIAL_BYTES``)."""

from __future__ import annotations

from hypervisors.libvirt.controllers import CONTROLLERS, disk_wwn
from hypervisors.libvirt.disk_settings import SERIAL_BYTES
from model.rules.identity import ConfiguredIdentity
from model.types import DiskSpec


def configured_identity(disk: DiskSpec) -> ConfiguredIdentity:
    wwn = disk_wwn(disk)
    return ConfiguredIdentity(disk.serial, None if wwn is None else f"{wwn:016x}", disk.size_bytes,
                              SERIAL_BYTES[CONTROLLERS[disk.controller].disk_bus], disk.controller)
