"""What a libvirt/QEMU disk is told to be (the identity rule's reference): the serial the suite
gives its device (``DiskSpec.serial``), its WWN (``controllers.disk_wwn``), its size and how many
bytes of a serial its bus carries (``disk_settings.SERIAL_BYTES``)."""

from __future__ import annotations

import dataclasses

from hypervisors.libvirt.controllers import CONTROLLERS, disk_wwn
from hypervisors.libvirt.disk_settings import SERIAL_BYTES
from hypervisors.libvirt.qom import disk_reads
from model.rules.identity import ConfiguredIdentity
from model.types import DiskSpec


def configured_identity(disk: DiskSpec) -> ConfiguredIdentity:
    wwn = disk_wwn(disk)
    return ConfiguredIdentity(disk.serial, None if wwn is None else f"{wwn:016x}", disk.size_bytes,
                              SERIAL_BYTES[CONTROLLERS[disk.controller].disk_bus], disk.controller)


def replay_device(disk: DiskSpec) -> dict[str, object]:
    """What a reproducer bundle's replay asks its QEMU of the disk's device (``qom_reads``: the QOM
    properties the run read) and the identity the disk was given (``identity``)."""
    return {"qom_reads": [dataclasses.asdict(r) for r in disk_reads(disk)],
            "identity": dataclasses.asdict(configured_identity(disk))}
