"""A disk's settings (``--disk``, ``--profile``; model/disk_settings.py) in libvirt's domain XML and
in the QEMU arguments of the disks libvirt has no XML for.

On a libvirt ``<disk>``: ``<driver cache= io= discard= detect_zeroes= iothread= type=>``,
``<blockio>``, ``<serial>``, ``<wwn>``, ``<iotune>``; on the virtio-scsi ``<controller>``: its
``<driver iothread=>``; on the domain: ``<iothreads>``. On a QEMU-argument disk (the null-co latency
disk, NVMe, megasas-gen2): the block node's ``cache``, ``discard``, ``detect-zeroes`` (and ``aio`` of
its file node) and the device's block sizes, serial, WWN and iothread.

What a disk's controller cannot carry, or QEMU refuses, is refused before the guest starts with a
sentence that names the setting, the disk and why (``refusal``): nothing is dropped silently.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from model.disk_settings import CACHE_MODES, NATIVE_NEEDS_DIRECT, VSPHERE_ONLY, DiskSettings
from model.errors import HypervisorError
from model.types import DiskSpec

#: libvirt's id of the one iothread the domain gets when a disk asks for one (QEMU's ``iothread1``).
IOTHREAD_ID: Final = 1
QEMU_IOTHREAD: Final = f"iothread{IOTHREAD_ID}"
#: The controllers whose disks QEMU runs in an iothread: virtio-blk per disk, virtio-scsi per HBA.
IOTHREAD_CONTROLLERS: Final = ("virtio-blk", "virtio-scsi")
#: Serial bytes each bus carries (QEMU 7.2): virtio-blk's ``VIRTIO_BLK_ID_BYTES``, ATA IDENTIFY's
#: serial field, NVMe's ``SN`` field are 20; scsi-hd refuses more than 36.
SERIAL_BYTES: Final = {"virtio": 20, "sata": 20, "ide": 20, "nvme": 20, "scsi": 36}
#: Buses whose QEMU device has a ``wwn`` (scsi-hd, ide-hd; libvirt's ``<wwn>`` on SCSI and IDE disks).
WWN_BUSES: Final = ("scsi", "sata", "ide")
#: The suite's own set-up of a file-backed disk where nothing is asked.
SUITE_CACHE: Final = "none"
SUITE_DISCARD: Final = "unmap"


class DiskSettingsRefused(HypervisorError):
    """A disk's settings its controller cannot carry, or that QEMU refuses together."""


def effective_cache(s: DiskSettings) -> str:
    return s.cache or SUITE_CACHE


def effective_aio(s: DiskSettings) -> str:
    """The suite's own aio is native where the cache mode opens the file with O_DIRECT, else threads."""
    if s.aio:
        return s.aio
    return "native" if effective_cache(s) in NATIVE_NEEDS_DIRECT else "threads"


def effective_discard(s: DiskSettings) -> str:
    return s.discard or SUITE_DISCARD


def refusal(disk: DiskSpec, bus: str, controller: str, libvirt_disk: bool) -> str:
    """Why ``disk`` cannot carry its settings on ``controller`` (whose disks hang on ``bus``), or "".
    ``libvirt_disk``: libvirt's ``<disk>`` attaches it (else QEMU arguments)."""
    s, where = disk.settings, f"disk {disk.index} ({disk.label})"
    vsphere = [f"{k}={v}" for k, v in s.pairs() if k in VSPHERE_ONLY]
    if vsphere:
        return (f"{', '.join(vsphere)}: vSphere's disk settings; libvirt's disks have no disk mode or multi-writer "
                "sharing of that kind (use them with --hypervisor vsphere)")
    if s.iothread == "on" and controller not in IOTHREAD_CONTROLLERS:
        return (f"iothread=on: {where} is on {controller}, which QEMU never runs in an iothread "
                f"(only {' and '.join(IOTHREAD_CONTROLLERS)} do)")
    if s.wwn is not None and bus not in WWN_BUSES:
        return f"wwn={s.wwn}: {where} is a {controller} disk, whose device has no WWN (only SCSI and ATA disks have one)"
    limit = SERIAL_BYTES[bus]
    if s.serial is not None and len(disk.serial) > limit:
        return (f"serial={s.serial}: {where}'s serial {disk.serial!r} is {len(disk.serial)} bytes, and {controller} "
                f"carries {limit}: the guest would see it cut and could not tell the disks apart")
    if bus in ("sata", "ide") and disk.logical_block_bytes != 512:
        return f"logical_block_size={disk.logical_block_bytes}: {where} is an ATA disk, which QEMU gives 512-byte blocks only"
    if disk.backing == "latency":
        return _latency_refusal(s, where)
    if effective_aio(s) == "native" and effective_cache(s) not in NATIVE_NEEDS_DIRECT:
        return f"aio=native on {where} needs cache=none or cache=directsync: QEMU refuses it with cache={effective_cache(s)}"
    if s.detect_zeroes == "unmap" and effective_discard(s) != "unmap":
        return f"detect_zeroes=unmap on {where} needs discard=unmap: QEMU refuses it with discard={effective_discard(s)}"
    if not libvirt_disk and (s.iops or s.bps):
        return (f"iops/bps on {where}: a {controller} disk is attached with QEMU arguments, and the suite sets "
                "I/O limits through libvirt's <iotune> only")
    return ""


def _latency_refusal(s: DiskSettings, where: str) -> str:
    if s.format == "qcow2":
        return (f"format=qcow2: {where} is the null-co latency disk, which has no image to format (QEMU's null-co "
                "driver answers every request itself); give --disk-backing file for a qcow2 disk under test")
    if s.iops or s.bps:
        return (f"iops/bps on {where}: the null-co latency disk is attached with QEMU arguments, and the suite sets I/O "
                "limits through libvirt's <iotune> only; give --disk-backing file")
    if s.detect_zeroes == "unmap" and effective_discard(s) != "unmap":
        return f"detect_zeroes=unmap on {where} needs discard=unmap: QEMU refuses it with discard={effective_discard(s)}"
    return ""


def check(disks: Sequence[DiskSpec], buses: dict[str, tuple[str, bool]]) -> None:
    """Raise DiskSettingsRefused for the first disk that cannot carry its settings; ``buses``: per
    controller, its disks' bus and whether libvirt's ``<disk>`` attaches its file-backed disks; a disk on a
    controller ``buses`` lacks is left to the check of the controllers."""
    for disk in disks:
        if disk.controller not in buses:
            continue  # not a controller of this backend: the backend's own check names it (a usage error)
        bus, libvirt_disks = buses[disk.controller]
        reason = refusal(disk, bus, disk.controller, libvirt_disks and disk.backing == "file")
        if reason:
            raise DiskSettingsRefused(f"--disk: {reason}")


def driver_attrs(disk: DiskSpec, bus: str) -> str:
    """The ``<driver>`` attributes of a file-backed libvirt disk (error policies and queues aside)."""
    s = disk.settings
    attrs = [f"type='{s.format or 'raw'}'", f"cache='{effective_cache(s)}'", f"io='{effective_aio(s)}'"]
    attrs.append(f"discard='{effective_discard(s)}'")
    if s.detect_zeroes is not None:
        attrs.append(f"detect_zeroes='{s.detect_zeroes}'")
    if s.iothread == "on" and bus == "virtio":
        attrs.append(f"iothread='{IOTHREAD_ID}'")
    return " ".join(attrs)


def blockio_xml(disk: DiskSpec) -> str:
    if disk.logical_block_bytes == 512 and disk.physical_bytes == 512:
        return ""
    return (f"<blockio logical_block_size='{disk.logical_block_bytes}' "
            f"physical_block_size='{disk.physical_bytes}'/>")


def iotune_xml(disk: DiskSpec) -> str:
    """libvirt's ``<iotune>`` of the disk's limits (QEMU's throttling of its BlockBackend), or ""."""
    s = disk.settings
    limits = ([f"<total_bytes_sec>{s.bps}</total_bytes_sec>"] if s.bps else []) + (
        [f"<total_iops_sec>{s.iops}</total_iops_sec>"] if s.iops else [])
    return f"<iotune>{''.join(limits)}</iotune>" if limits else ""


def wwn_value(disk: DiskSpec, suite_wwn: int) -> int:
    """The disk's WWN: the asked one plus the disk's index (each disk its own), else the suite's."""
    return int(disk.settings.wwn, 16) + disk.index if disk.settings.wwn is not None else suite_wwn


def domain_iothreads_xml(disks: Sequence[DiskSpec]) -> str:
    """The domain's ``<iothreads>``: one where any disk asks for an iothread."""
    return f"<iothreads>{IOTHREAD_ID}</iothreads>" if any(d.settings.iothread == "on" for d in disks) else ""


def node_options(disk: DiskSpec) -> dict[str, object]:
    """What a QEMU-argument disk's top block node (null-co, or the raw or qcow2 format node of a
    file) takes of the settings: its cache mode, discard and detect-zeroes."""
    s = disk.settings
    out: dict[str, object] = {}
    if s.cache is not None:
        _, direct, no_flush = CACHE_MODES[s.cache]
        out["cache"] = {"direct": direct, "no-flush": no_flush}
    if s.discard is not None:
        out["discard"] = s.discard
    if s.detect_zeroes is not None:
        out["detect-zeroes"] = s.detect_zeroes
    return out


def device_options(disk: DiskSpec, bus: str) -> dict[str, object]:
    """What a QEMU-argument disk's device takes of the settings: the write cache it tells the guest
    of (a cache mode's ``cache.writeback``, which is the device's ``write-cache``, not a block node
    option), its logical block size and, on virtio-blk, its iothread (the virtio-scsi HBA's is in its
    libvirt ``<controller>``)."""
    out: dict[str, object] = {}
    if disk.settings.cache is not None:
        out["write-cache"] = "on" if CACHE_MODES[disk.settings.cache][0] else "off"
    if disk.settings.logical_block_size is not None:
        out["logical_block_size"] = disk.logical_block_bytes
    if disk.settings.iothread == "on" and bus == "virtio":
        out["iothread"] = QEMU_IOTHREAD
    return out
