"""What a disk's QEMU device really advertises, asked of the running QEMU (QMP through libvirt).

``qom-list`` says which properties each device has (an older QEMU lacks some: a note, never an
error), ``qom-get`` reads each (``model.advertised.qom_reads`` says which), and ``query-block``
gives the disk's block backend's write cache, which a ``write-cache=auto`` device advertises. The
mapping to limits is model/advertised.py's. Measured on QEMU 7.2: the values in force, whether
libvirt wrote them, a ``-global`` set them or QEMU's default stands.
"""

from __future__ import annotations

from typing import Any

import libvirt

from hypervisors.libvirt.controllers import CONTROLLERS, device_id, hba_alias
from hypervisors.libvirt.qmp import qmp
from model.advertised import Advertised, DeviceFamily, QomRead, QomValue, advertised_from_qom, qom_reads
from model.host_cache import HostCache, host_cache_of
from model.types import DiskSpec

PERIPHERAL = "/machine/peripheral"


def family(controller: str) -> DeviceFamily:
    """What kind of device carries a disk of ``controller`` (model.advertised.DeviceFamily)."""
    ctl = CONTROLLERS[controller]
    if ctl.disk_bus == "virtio":
        return "virtio-blk"
    if ctl.disk_bus == "nvme":
        return "nvme"
    if ctl.disk_bus in ("sata", "ide"):
        return "ata"
    return "virtio-scsi" if ctl.scsi_model == "virtio-scsi" else "scsi"


def _error(reply: dict[str, Any]) -> str:
    err = reply.get("error")
    return str(err.get("desc", err)) if isinstance(err, dict) else str(err) if err else ""


def qemu_version(conn: libvirt.virConnect, domain: str) -> str:
    q = qmp(conn, domain, {"execute": "query-version"}).get("return", {}).get("qemu", {})
    return f"{q.get('major', '?')}.{q.get('minor', '?')}.{q.get('micro', '?')}"


def host_cache(conn: libvirt.virConnect, domain: str, device: str) -> HostCache | None:
    """The cache of the block backend of QEMU device ``device`` as QEMU has it now (query-block's
    ``inserted.cache``: writeback, direct, no-flush); None where QEMU does not list it."""
    blocks = qmp(conn, domain, {"execute": "query-block"}).get("return", [])
    return host_cache_of(blocks, device, f"QEMU {qemu_version(conn, domain)}, QMP query-block")


def block_writeback(conn: libvirt.virConnect, domain: str, device: str) -> bool | None:
    """The write cache of the block backend of QEMU device ``device`` (query-block's
    ``inserted.cache.writeback``); None where QEMU does not list it."""
    cache = host_cache(conn, domain, device)
    return None if cache is None else cache.writeback


def disk_reads(spec: DiskSpec) -> list[QomRead]:
    """The QOM properties that say what the device of disk ``spec`` advertises (model.advertised.qom_reads)."""
    ctl = CONTROLLERS[spec.controller]
    disk_path = f"{PERIPHERAL}/{device_id(spec)}"
    hba_path = f"{PERIPHERAL}/{hba_alias(ctl.name)}" if ctl.has_hba else None
    return qom_reads(family(spec.controller), disk_path, hba_path)


def read_advertised(conn: libvirt.virConnect, domain: str, spec: DiskSpec) -> Advertised:
    """What the device of disk ``spec`` advertises, as the running QEMU of ``domain`` answers.
    HypervisorError where the monitor cannot be reached at all."""
    reads = disk_reads(spec)
    notes = []
    listed: dict[str, set[str] | None] = {}
    for path in dict.fromkeys(r.path for r in reads):
        reply = qmp(conn, domain, {"execute": "qom-list", "arguments": {"path": path}})
        if _error(reply):
            listed[path] = None
            notes.append(f"QEMU has no device at {path} ({_error(reply)}): nothing read there")
        else:
            listed[path] = {str(p.get("name")) for p in reply.get("return", [])}
    answers: dict[tuple[str, str], QomValue] = {}
    unknown = []
    for r in reads:
        names = listed[r.path]
        if names is None:
            continue
        if r.prop not in names:
            unknown.append((r.path, r.prop))
            continue
        reply = qmp(conn, domain, {"execute": "qom-get", "arguments": {"path": r.path, "property": r.prop}})
        if _error(reply):
            notes.append(f"qom-get {r.prop} of {r.path} failed: {_error(reply)}")
        else:
            answers[(r.path, r.prop)] = reply.get("return")
    writeback = block_writeback(conn, domain, device_id(spec))
    return advertised_from_qom(reads, answers, f"QEMU {qemu_version(conn, domain)}, QMP qom-get", unknown,
                               writeback, notes)
