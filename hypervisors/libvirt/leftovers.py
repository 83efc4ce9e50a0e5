"""What killed runs leave on a libvirt host, and its removal (``LibvirtBackend.sweep_leftovers``).

Every domain the suite starts is named ``vioconform-...`` and carries its owner's pid and the
name of the machine that runs the suite in its metadata; run directories carry an ``owner.pid``
file and QEMU logs the pid in their name. Only what belongs to a process of this machine that is
gone is removed: a running suite's, another machine's (a libvirt host shared by several
controllers), or anyone else's, is left alone. The suite's session sweeps before it starts its guest; nothing else does.
"""

from __future__ import annotations

import logging
import re
import socket

import libvirt

from hypervisors.cleanup import owner_alive

log = logging.getLogger("vioconform.libvirt")

#: Every domain the suite starts has this name prefix and carries its owner's pid in its
#: metadata, so leftovers of a killed run can be found (``virsh list | grep vioconform-``).
DOMAIN_PREFIX = "vioconform-"
METADATA_NS = "https://vioconform.invalid/run/1"


def destroy(dom: libvirt.virDomain) -> None:
    """Destroy a domain; one that is gone already (or not running) is no error."""
    try:
        dom.destroy()
    except libvirt.libvirtError as e:
        if e.get_error_code() not in (libvirt.VIR_ERR_NO_DOMAIN, libvirt.VIR_ERR_OPERATION_INVALID):
            raise


def owner_here(dom: libvirt.virDomain) -> int | None:
    """The pid of the process of this machine that made ``dom`` (its metadata), or None: another
    machine's domain, one without an owner, or one gone since it was listed. (Domains of earlier
    versions name no machine: this machine's.)"""
    try:
        meta = dom.metadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT, METADATA_NS)
    except libvirt.libvirtError:
        return None
    m = re.search(r"pid=['\"](\d+)['\"]", meta)
    host = re.search(r"host=['\"]([^'\"]*)['\"]", meta)
    if m is None or (host is not None and host.group(1) != socket.gethostname()):
        return None
    return int(m.group(1))


def sweep_domains(conn: libvirt.virConnect) -> set[str]:
    """Destroy ``vioconform-*`` domains whose owning process (on this machine) is gone; the names
    of those left running (live runs', other machines'), whose QEMU logs must stay."""
    running = set()
    for dom in conn.listAllDomains(libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE):
        if not dom.name().startswith(DOMAIN_PREFIX):
            continue
        running.add(dom.name())
        pid = owner_here(dom)
        if pid is not None and not owner_alive(pid):
            log.warning("destroying leftover domain %s of dead process %d", dom.name(), pid)
            destroy(dom)
            running.discard(dom.name())
    return running
