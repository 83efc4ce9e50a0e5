"""What the host really does with a disk's writes, as its block layer says at the moment it is asked:
whether it holds them in a volatile write cache the guest must flush (QEMU's ``cache.writeback``),
whether it bypasses the host's page cache (``cache.direct``, O_DIRECT) and whether it drops the
guest's flushes (``cache.no-flush``). QEMU answers in QMP ``query-block``'s ``inserted.cache`` of the
disk's block backend, whose ``writeback`` follows the guest too: a guest that turns its write cache off
through the device (SCSI MODE SELECT, virtio-blk's ``writeback`` config field) turns it off at the host.

Example::

    cache = host_cache_of(reply["return"], "ua-vioc-dut00", "QEMU 7.2.22, QMP query-block")
    cache.mode  # "none": writeback=True, direct=True, no-flush=False
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from model.disk_settings import CACHE_MODES
from model.errors import ParseError

PERIPHERAL = "/machine/peripheral"


@dataclass(frozen=True)
class HostCache:
    """One disk's block backend's cache as the host said it, and where it said it (``said_by``)."""

    writeback: bool
    direct: bool
    no_flush: bool
    said_by: str = ""

    @property
    def mode(self) -> str:
        """QEMU's cache mode of these three flags (model/disk_settings.py's CACHE_MODES); "other" for
        a combination no mode names (``cache.direct`` and ``cache.no-flush`` given apart)."""
        flags = (self.writeback, self.direct, self.no_flush)
        return next((m for m, f in CACHE_MODES.items() if f == flags), "other")

    def text(self) -> str:
        return (f"cache={self.mode} (writeback={str(self.writeback).lower()} direct={str(self.direct).lower()} "
                f"no-flush={str(self.no_flush).lower()})")


def block_entry(blocks: Sequence[dict[str, Any]], device: str) -> dict[str, Any] | None:
    """``query-block``'s entry of QEMU device ``device`` (its id; QEMU names a virtio device's block
    backend by the id, the QOM path or the path's ``virtio-backend``), or None where it lists none."""
    path = f"{PERIPHERAL}/{device}"
    return next((b for b in blocks if b.get("qdev") in (device, path, f"{path}/virtio-backend")), None)


def host_cache_of(blocks: Sequence[dict[str, Any]], device: str, source: str) -> HostCache | None:
    """The cache of device ``device``'s block backend from ``query-block``'s answer ``blocks``; None where
    QEMU lists no such device or no medium in it. ParseError where the entry has a cache without its flags."""
    entry = block_entry(blocks, device)
    cache = (entry or {}).get("inserted", {}).get("cache")
    if cache is None:
        return None
    flags = {k: cache.get(k) for k in ("writeback", "direct", "no-flush")} if isinstance(cache, dict) else {}
    if not flags or not all(isinstance(v, bool) for v in flags.values()):
        raise ParseError(f"{source}: query-block's inserted.cache of {device} is {cache!r}, not the three booleans "
                         "writeback, direct and no-flush")
    return HostCache(bool(flags["writeback"]), bool(flags["direct"]), bool(flags["no-flush"]),
                     f"inserted.cache of {device}, {source}")
