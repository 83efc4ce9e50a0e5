"""Choose KVM or TCG by booting a real tiny guest, not by looking at /dev/kvm.

On nested machines /dev/kvm can exist while guests fail to boot under it. The probe boots
the embedded kernel with ``vioconform.probe=1`` under ``type='kvm'``; the guest prints
``VIOCONFORM-PROBE-OK`` and powers off. The answer is cached per host, libvirt and QEMU
version, so only the first run pays for it.
"""

from __future__ import annotations

import json
import logging
import os
import platform
from pathlib import Path
from typing import TYPE_CHECKING

import libvirt

from hypervisors.base import HypervisorError
from hypervisors.cleanup import signals_deferred

if TYPE_CHECKING:
    from hypervisors.libvirt.backend import LibvirtBackend

log = logging.getLogger("vioconform.libvirt")

#: A KVM guest reaches the probe marker in about 2 s where KVM works; under TCG the same
#: kernel needs 6-8 s here. 30 s tells "broken KVM" from "slow host" with margin.
PROBE_TIMEOUT_S = 30.0


def _cache_file() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "vioconform" / "accel-probe.json"


def _cache_key(backend: "LibvirtBackend") -> str:
    conn = backend.conn
    return f"{backend.uri}|{conn.getHostname()}|{platform.release()}|{conn.getLibVersion()}|{conn.getVersion()}"


def kvm_offered(conn: libvirt.virConnect) -> bool:
    """Whether libvirt says this host can run ``type='kvm'`` domains at all."""
    try:
        conn.getDomainCapabilities(None, "x86_64", None, "kvm", 0)
        return True
    except libvirt.libvirtError:
        return False


def probe_kvm(backend: "LibvirtBackend", run_dir: Path) -> bool:
    """Boot the embedded kernel under KVM; True if it reached the probe marker."""
    kernel, initrd = backend.stage_boot_files(run_dir)
    name = f"vioconform-kvmprobe-{os.getpid()}"
    xml = backend.domain_xml(name, "kvm", run_dir, kernel, initrd, "console=ttyS0 quiet vioconform.probe=1",
                             None, None)
    undo = backend.cleanup.push(f"domain {name}", lambda: backend.destroy_by_name(name))
    try:
        with signals_deferred():
            dom = backend.conn.createXML(xml, 0)
    except libvirt.libvirtError as e:
        undo()
        log.info("KVM probe: libvirt refused a kvm domain: %s", e.get_error_message())
        return False
    try:
        backend.wait_for_console(dom, run_dir / "console.log", "VIOCONFORM-PROBE-OK", PROBE_TIMEOUT_S)
        return True
    except HypervisorError as e:
        log.info("KVM probe: guest did not boot under KVM: %s", str(e).splitlines()[0])
        return False
    finally:
        undo()
        (run_dir / "console.log").unlink(missing_ok=True)


def choose(backend: "LibvirtBackend", run_dir: Path, mode: str) -> str:
    """The libvirt domain type for ``mode`` (``auto``, ``kvm`` or ``tcg``): ``kvm`` or ``qemu``."""
    if mode == "tcg":
        return "qemu"
    if mode == "kvm":
        return "kvm"
    if not kvm_offered(backend.conn):
        log.info("KVM not offered by libvirt on this host: using TCG (software emulation)")
        return "qemu"
    cache = _cache_file()
    key = _cache_key(backend)
    known: dict[str, bool] = json.loads(cache.read_text()) if cache.exists() else {}
    if key not in known:
        log.info("probing KVM with a real boot (once per host; cached in %s)", cache)
        known[key] = probe_kvm(backend, run_dir)
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(known, indent=1))
    result = "kvm" if known[key] else "qemu"
    log.info("accelerator: %s", "KVM" if result == "kvm" else "TCG (KVM did not boot a guest here)")
    return result
