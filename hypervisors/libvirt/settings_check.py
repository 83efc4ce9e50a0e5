"""Did each disk setting asked (``--disk``, ``--profile``) take? Asked of the running domain,
before any rule trusts it: libvirt's live domain XML (what libvirt made of the ``<disk>``) and
QEMU's own answers, QMP ``query-block`` (cache mode, detect-zeroes, format, I/O limits of the
disk's block backend) and ``qom-get`` on its device (block sizes, serial, WWN, iothread).

``check_disk`` is pure: it compares one disk's settings with what was read and returns one
``model.settings_seen.SettingSeen`` per asked setting. ``read_disk_state`` does the reading.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Any

import libvirt

from hypervisors.libvirt.controllers import CONTROLLERS, device_id, hba_alias
from hypervisors.libvirt.qmp import qmp
from model.disk_settings import CACHE_MODES
from model.errors import HypervisorError
from model.settings_seen import SettingSeen
from model.types import DiskSpec

PERIPHERAL = "/machine/peripheral"
#: The device properties read for the settings, where the device has them.
QOM_PROPS = ("logical_block_size", "physical_block_size", "serial", "wwn", "iothread")


@dataclass(frozen=True)
class DiskState:
    """What the host shows of one disk: its live ``<disk>`` (None for a QEMU-argument disk), the
    domain's ``<iothreads>`` count, its ``query-block`` entry's ``inserted`` (None where QEMU
    lists none) and its device's (or its HBA's, for the iothread) QOM properties."""

    live_disk: ET.Element | None
    domain_iothreads: int
    inserted: dict[str, Any] | None
    qom: dict[str, object]


def _driver(state: DiskState, attr: str) -> str | None:
    driver = state.live_disk.find("driver") if state.live_disk is not None else None
    return driver.get(attr) if driver is not None else None


def _seen(key: str, asked: str, value: object, source: str) -> SettingSeen:
    shown = "(not shown)" if value is None else str(value)
    return SettingSeen(key, asked, "took" if shown == asked else "missing", f"{source} {shown}")


def _cache(asked: str, state: DiskState) -> SettingSeen:
    cache = (state.inserted or {}).get("cache")
    if not isinstance(cache, dict):
        return SettingSeen("cache", asked, "missing", "query-block shows no cache mode")
    seen = (bool(cache.get("writeback")), bool(cache.get("direct")), bool(cache.get("no-flush")))
    shown = f"query-block cache writeback={seen[0]} direct={seen[1]} no-flush={seen[2]}".lower()
    return SettingSeen("cache", asked, "took" if seen == CACHE_MODES[asked] else "missing", shown)


def _block_size(key: str, asked: str, state: DiskState) -> SettingSeen:
    return _seen(key, asked, state.qom.get(key), f"qom-get {key}")


def check_disk(disk: DiskSpec, state: DiskState) -> list[SettingSeen]:
    """One SettingSeen per setting ``disk`` asks, in the order of its pairs."""
    out: list[SettingSeen] = []
    inserted = state.inserted or {}
    file_node = disk.backing == "file"
    for key, asked in disk.settings.pairs():
        if key == "cache":
            out.append(_cache(asked, state))
        elif key in ("aio", "discard") and not file_node:
            out.append(SettingSeen(key, asked, "not-applicable", "the null-co latency disk has no file under it"))
        elif key in ("aio", "discard"):
            attr = "io" if key == "aio" else key
            source = "live XML <driver " + attr + ">" if state.live_disk is not None else "QEMU argument"
            value = _driver(state, attr) if state.live_disk is not None else asked
            out.append(_seen(key, asked, value, source))
        elif key == "detect_zeroes":
            out.append(_seen(key, asked, inserted.get("detect_zeroes"), "query-block detect_zeroes"))
        elif key == "format" and not file_node:
            out.append(SettingSeen(key, asked, "not-applicable", "the null-co latency disk is no image"))
        elif key == "format":
            out.append(_seen(key, asked, inserted.get("drv"), "query-block drv"))
        elif key in ("iops", "bps"):
            out.append(_seen(key, asked, inserted.get(key), f"query-block {key}"))
        elif key in ("logical_block_size", "physical_block_size"):
            out.append(_block_size(key, asked, state))
        elif key == "serial":
            out.append(_seen(key, disk.serial, state.qom.get("serial"), "qom-get serial"))
        elif key == "wwn":
            wwn = state.qom.get("wwn")
            out.append(_seen(key, asked, None if wwn is None else f"{int(str(wwn)) - disk.index:016x}",
                             "qom-get wwn (less the disk's index)"))
        elif key == "iothread":
            pinned = bool(state.qom.get("iothread")) and state.domain_iothreads > 0
            out.append(_seen(key, asked, "on" if pinned else "off",
                             f"qom-get iothread {state.qom.get('iothread') or '(none)'!r}, domain iothreads "
                             f"{state.domain_iothreads} ->"))
    return out


def _qom(conn: libvirt.virConnect, domain: str, paths: list[str], prop: str) -> object:
    for path in paths:
        reply = qmp(conn, domain, {"execute": "qom-get", "arguments": {"path": path, "property": prop}})
        if "error" not in reply:
            return reply.get("return")
    return None


def read_disk_state(conn: libvirt.virConnect, domain: str, disk: DiskSpec, live: ET.Element,
                    blocks: list[dict[str, Any]]) -> DiskState:
    """What the running ``domain`` shows of ``disk``: ``live`` is its live domain XML, ``blocks`` QMP
    ``query-block``'s answer (both read once for all disks)."""
    dev = device_id(disk)
    path = f"{PERIPHERAL}/{dev}"
    live_disk = next((d for d in live.iter("disk") if d.find(f"alias[@name='{dev}']") is not None), None)
    inserted = next((b.get("inserted") for b in blocks if b.get("qdev") in (dev, path, f"{path}/virtio-backend")), None)
    ctl = CONTROLLERS[disk.controller]
    device_paths = [f"{path}/virtio-backend", path] if ctl.disk_bus == "virtio" else [path]
    iothread_paths = ([f"{PERIPHERAL}/{hba_alias(ctl.name)}/virtio-backend"] if ctl.name == "virtio-scsi"
                      else device_paths)
    asked = dict(disk.settings.pairs())
    qom: dict[str, object] = {}
    for prop in QOM_PROPS:
        if prop in asked or (prop == "physical_block_size" and "logical_block_size" in asked):
            qom[prop] = _qom(conn, domain, iothread_paths if prop == "iothread" else device_paths, prop)
    count = live.findtext("iothreads")
    return DiskState(live_disk, int(count) if count and count.isdigit() else 0, inserted, qom)


def check_domain(conn: libvirt.virConnect, domain: str, disks: tuple[DiskSpec, ...]) -> dict[DiskSpec, list[SettingSeen]]:
    """Each disk's asked settings, checked on the running ``domain`` (disks that ask nothing: none)."""
    asking = [d for d in disks if d.settings.pairs()]
    if not asking:
        return {}
    try:
        live = ET.fromstring(conn.lookupByName(domain).XMLDesc(0))
    except libvirt.libvirtError as e:
        raise HypervisorError(f"the live XML of {domain} cannot be read: {e.get_error_message()}") from e
    blocks = qmp(conn, domain, {"execute": "query-block"}).get("return", [])
    return {d: check_disk(d, read_disk_state(conn, domain, d, live, blocks)) for d in asking}
