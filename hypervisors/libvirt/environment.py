"""The environment a libvirt run records (its fingerprint, model/across/fingerprint.py) and the QEMU
libvirt uses by default; hypervisors/libvirt/machine.py checks ``--emulator`` and ``--machine``."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import libvirt

from hypervisors.libvirt.qmp import qmp
from model.errors import HypervisorError


def default_emulator(conn: libvirt.virConnect, arch: str = "x86_64") -> Path:
    """The emulator libvirt uses for ``arch`` when the domain names none (its capabilities)."""
    caps = ET.fromstring(conn.getCapabilities())
    for guest in caps.findall("guest"):
        a = guest.find("arch")
        if a is not None and a.get("name") == arch and a.findtext("emulator"):
            return Path(a.findtext("emulator") or "")
    raise HypervisorError(f"libvirt offers no {arch} QEMU emulator (virsh capabilities); install qemu-system-x86 "
                          f"or give --emulator")


def _version(n: int) -> str:
    """libvirt's packed version number (1000000 x major + 1000 x minor + micro) as text."""
    return f"{n // 1_000_000}.{n // 1000 % 1000}.{n % 1000}"


def environment(conn: libvirt.virConnect, domain: str, host_kernel: str) -> dict[str, str]:
    """The running domain's fingerprint entries: QEMU's version (asked of the running QEMU), the
    binary, the canonical machine type and accelerator (from the live domain XML), libvirt's library
    and daemon versions, and the libvirt host's kernel (``uname -r`` there)."""
    root = ET.fromstring(conn.lookupByName(domain).XMLDesc(0))
    os_type = root.find("os/type")
    reply = qmp(conn, domain, {"execute": "query-version"}).get("return", {})
    q = reply.get("qemu", {})
    package = str(reply.get("package", "")).strip()
    version = f"{q.get('major', '?')}.{q.get('minor', '?')}.{q.get('micro', '?')}" + (f" {package}" if package else "")
    return {
        "qemu.version": version,
        "qemu.emulator": root.findtext("devices/emulator") or "unknown",
        "qemu.machine": (os_type.get("machine") if os_type is not None else None) or "unknown",
        "qemu.accel": "kvm" if root.get("type") == "kvm" else "tcg",
        "libvirt.version": _version(libvirt.getVersion()),
        "libvirt.daemon_version": _version(conn.getLibVersion()),
        "host.kernel": host_kernel,
    }
