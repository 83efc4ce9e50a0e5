"""QEMU's monitor (QMP) of a libvirt domain, through libvirt's monitor passthrough.

``DomainQmp`` is one domain's monitor and one of its disks' counters: the ``QmpChannel`` that
``QemuTracer`` switches trace events and reads counters through. Counters come from
``query-blockstats``: it covers the null-co latency disk too, which libvirt's ``domstats`` does not show.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import libvirt
import libvirt_qemu

from model.errors import HypervisorError
from model.parse.blockstats import HostBlockCounters, parse_qmp_blockstats


def qmp(conn: libvirt.virConnect, domain: str, command: dict[str, object]) -> dict[str, Any]:
    """Send one QMP command to the running domain ``domain``; its reply, decoded."""
    dom = conn.lookupByName(domain)
    try:
        reply = libvirt_qemu.qemuMonitorCommand(dom, json.dumps(command), 0)
    except libvirt.libvirtError as e:
        raise HypervisorError(f"QMP {command.get('execute')} on {domain} failed: {e.get_error_message()}") from e
    decoded: dict[str, Any] = json.loads(reply)
    return decoded


@dataclass(frozen=True)
class DomainQmp:
    """The monitor of domain ``domain`` and the counters of its disk whose QEMU device id is ``device``."""

    conn: libvirt.virConnect
    domain: str
    device: str

    def execute(self, command: dict[str, object]) -> dict[str, Any]:
        return qmp(self.conn, self.domain, command)

    def counters(self) -> HostBlockCounters:
        """The disk's cumulative counters, stamped with this host's monotonic clock."""
        return parse_qmp_blockstats(self.execute({"execute": "query-blockstats"}), self.device, time.monotonic_ns())
