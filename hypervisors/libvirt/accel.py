"""Choose KVM or TCG by booting a real tiny guest, not by looking at /dev/kvm.

On nested machines /dev/kvm can exist while guests fail to boot under it (here: QEMU asserts
in ``kvm_buf_set_msrs``). The probe boots the embedded kernel with ``vioconform.probe=1``
under ``type='kvm'``; the guest prints ``VIOCONFORM-PROBE-OK`` and powers off. The answer,
with QEMU's one-line cause when KVM fails, is cached per host, libvirt and QEMU version, so
only the first run pays for it, and ``--accel kvm`` on a host where KVM cannot boot is a
usage error before any guest starts.
"""

from __future__ import annotations

import json
import logging
import platform
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from images.cache import cache_dir, replace_text, writable_dir
from model.errors import HypervisorError

if TYPE_CHECKING:
    import libvirt  # the SDK only where a connection is used: the cache helpers here are pure

log = logging.getLogger("vioconform.libvirt")

#: A KVM guest reaches the probe marker in about 2 s where KVM works; under TCG the same guest
#: needs about 6.5 s with the bzImage (about 4.5 s of QEMU, SeaBIOS and kernel loading, then
#: init at 1.9 s of the guest's uptime, where the marker is printed: bench.time_to_verdict's
#: timeline), about 2.3 s less as its PVH ELF (images.pvh). Where KVM cannot boot a guest, it
#: often hangs rather than fails (a nested KVM: no marker, no error), so this bound is what a forced
#: ``--accel kvm`` waits before its error. 15 s: 7x KVM's time and 2.5x emulation's, and a KVM
#: guest slower than emulation is not a KVM that works.
PROBE_TIMEOUT_S = 15.0
#: What a probe that ran out of time says in place of a boot's "raise --boot-timeout": its bound is
#: fixed (no option moves it), and a guest past it is a KVM that does not work here.
PROBE_REMEDY = (f"the probe's fixed bound, {PROBE_TIMEOUT_S:.0f} s: a KVM guest reaches it in about 2 s, "
                "so this host's KVM does not run the guest")


class KvmUnusable(HypervisorError):
    """``--accel kvm`` on a host where KVM cannot run this guest; the message names the way out (and,
    when the answer came from the cache, how to probe again)."""

    def __init__(self, cause: str, cached: bool = False) -> None:
        super().__init__(f"--accel kvm: KVM cannot boot a guest on this host ({cause}); "
                         "use --accel auto (falls back to TCG) or --accel tcg" + (f"; {redo_hint()}" if cached else ""))


@dataclass(frozen=True)
class ProbeResult:
    kvm_boots: bool
    cause: str = ""  # why not, on one line (QEMU's own words where it said any)


def cache_file() -> Path:
    return cache_dir() / "accel-probe.json"


def redo_hint() -> str:
    """Where the probe's answer is kept and how to have it asked again (a KVM fixed since, a new kernel
    module)."""
    return f"the probe's answer is cached in {cache_file()}: remove that file to probe again"


def cache_uri(uri: str) -> str:
    """The URI as the cache knows a host: without its port and query (``keyfile=``, ``known_hosts=``),
    which name how it is reached, not what it is (the host's name and versions are in the key too)."""
    u = urlparse(uri)
    who = f"{u.username}@" if u.username else ""
    return f"{u.scheme}://{who}{u.hostname or ''}{u.path}"


def _cache_key(uri: str, conn: libvirt.virConnect) -> str:
    return f"{cache_uri(uri)}|{conn.getHostname()}|{platform.release()}|{conn.getLibVersion()}|{conn.getVersion()}"


def _load(cache: Path) -> dict[str, ProbeResult]:
    """The cached answers: ``{key: bool, ..., "causes": {key: cause}}``. A bare boolean per key
    keeps the file readable by earlier versions; a failure they cached has no cause, so it
    counts as not probed (the next probe records one)."""
    raw = json.loads(cache.read_text()) if cache.exists() else {}
    causes = raw.pop("causes", {})
    return {k: ProbeResult(bool(v), causes.get(k, "")) for k, v in raw.items() if v or k in causes}


def _save(cache: Path, known: dict[str, ProbeResult]) -> None:
    raw: dict[str, object] = {k: r.kvm_boots for k, r in known.items()}
    raw["causes"] = {k: r.cause for k, r in known.items() if not r.kvm_boots}
    replace_text(cache, json.dumps(raw, indent=1))  # another xdist worker may be reading it


def cached_probe(uri: str, conn: libvirt.virConnect) -> ProbeResult | None:
    """What an earlier run's probe found on this host, or None if none ran."""
    return _load(cache_file()).get(_cache_key(uri, conn))


def kvm_refusal(conn: libvirt.virConnect) -> str | None:
    """Why libvirt cannot run ``type='kvm'`` domains on this host at all, or None if it can."""
    import libvirt

    try:
        conn.getDomainCapabilities(None, "x86_64", None, "kvm", 0)
        return None
    except libvirt.libvirtError as e:
        return f"libvirt offers no KVM: {e.get_error_message()}"


def check_forced_kvm(uri: str, conn: libvirt.virConnect) -> None:
    """Before any guest starts: raise KvmUnusable if libvirt or the cached probe says KVM cannot
    boot a guest here. An unprobed host passes; the session's probe decides there."""
    refused = kvm_refusal(conn)
    if refused:
        raise KvmUnusable(refused)
    known = cached_probe(uri, conn)
    if known is not None and not known.kvm_boots:
        raise KvmUnusable(known.cause, cached=True)


def check_cache_writable(uri: str, conn: libvirt.virConnect, mode: str) -> None:
    """Before any guest starts: raise CacheNotWritable if this run must probe and cannot store the answer."""
    if mode != "tcg" and kvm_refusal(conn) is None and cached_probe(uri, conn) is None:
        writable_dir(cache_file().parent, "KVM probe cache")


def choose(uri: str, conn: libvirt.virConnect, mode: str, probe: Callable[[], ProbeResult]) -> str:
    """The libvirt domain type for ``mode`` (``auto``, ``kvm`` or ``tcg``): ``kvm`` or ``qemu``.
    ``probe`` boots a guest under KVM (the backend's ``probe_kvm``), once per host: its answer is cached.
    ``kvm`` where KVM cannot boot a guest raises KvmUnusable, naming QEMU's cause."""
    if mode == "tcg":
        return "qemu"
    refused = kvm_refusal(conn)
    if refused:
        if mode == "kvm":
            raise KvmUnusable(refused)
        log.info("KVM not offered by libvirt on this host: using TCG (software emulation)")
        return "qemu"
    cache = cache_file()
    key = _cache_key(uri, conn)
    known = _load(cache)
    if key not in known:
        writable_dir(cache.parent, "KVM probe cache")
        log.info("probing KVM with a real boot (once per host; cached in %s)", cache)
        known[key] = probe()
        _save(cache, known)
    result = known[key]
    if not result.kvm_boots and mode == "kvm":
        raise KvmUnusable(result.cause)
    log.info("accelerator: %s", "KVM" if result.kvm_boots
             else f"TCG (KVM did not boot a guest here: {result.cause}; {redo_hint()})")
    return "kvm" if result.kvm_boots else "qemu"
