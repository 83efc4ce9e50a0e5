"""A disk's settings (``--disk``; model/disk_settings.py) on vSphere: what a VM's config has for them,
and a sentence for each it has not. Pure (no pyVmomi): the options are checked before any SDK loads.

Mapped, on the disk's ``VirtualDisk`` as the clone is reconfigured (hypervisors/vsphere/controllers.py):

- ``disk_mode`` to its backing's ``diskMode`` (``persistent``, ``independent_persistent``,
  ``independent_nonpersistent``);
- ``sharing`` to its backing's ``sharing`` (``sharingNone``, ``sharingMultiWriter``); a multi-writer
  disk is eagerly zeroed thick, which vSphere requires of it;
- ``iops`` to its ``storageIOAllocation.limit`` (IOPS; vSphere has no byte-rate limit per disk).

Each is read back from the VM's device config before any rule runs (``seen``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from model.disk_settings import DISK_MODES, SHARING
from model.settings_seen import SettingSeen
from model.types import DiskSpec

#: The settings a VM's config carries.
MAPPED: Final = ("disk_mode", "sharing", "iops")
#: Why each other setting cannot be made on vSphere.
NOT_ON_VSPHERE: Final = {
    "cache": "ESXi decides a VMDK's caching itself: a VM's config has no cache mode",
    "aio": "ESXi's I/O path has no per-disk aio mode",
    "iothread": "a VM's config has no iothread: ESXi schedules a disk's I/O itself",
    "discard": "a VM's config has no discard setting: ESXi passes a guest's UNMAP to a thin VMDK itself",
    "detect_zeroes": "a VM's config has no zero detection",
    "logical_block_size": "a VMDK's block sizes are ESXi's, not a setting of the VM's config",
    "physical_block_size": "a VMDK's block sizes are ESXi's, not a setting of the VM's config",
    "format": "vSphere's disks are VMDKs: no raw or qcow2 image",
    "serial": "vSphere cannot set a disk's serial (with disk.EnableUUID the guest sees the disk's UUID as its WWN)",
    "wwn": "vSphere derives a disk's WWN from its UUID: a VM's config cannot choose it",
    "bps": "a vSphere disk's limit (storageIOAllocation.limit) is in IOPS only: give iops",
}


def refusal(disk: DiskSpec) -> str:
    """Why vSphere cannot carry ``disk``'s settings, or ""."""
    refused = [f"{k}={v}: {NOT_ON_VSPHERE[k]}" for k, v in disk.settings.pairs() if k not in MAPPED]
    if not refused:
        return ""
    return (f"on vSphere {'; '.join(refused)} (the vSphere disk settings are {', '.join(MAPPED)})")


def disks_refusal(disks: Sequence[DiskSpec]) -> str:
    """Why vSphere cannot carry the first of ``disks`` that it cannot, or "": asked before any clone."""
    refused = next((r for r in map(refusal, disks) if r), "")
    return f"--disk: {refused}" if refused else ""


def seen(spec: DiskSpec, device: Any) -> list[SettingSeen]:
    """``spec``'s asked settings against its ``VirtualDisk`` as the VM's device config holds it."""
    backing = getattr(device, "backing", None)
    alloc = getattr(device, "storageIOAllocation", None)
    shown: dict[str, tuple[str, object]] = {
        "disk_mode": (DISK_MODES.get(spec.settings.disk_mode or "", ""), getattr(backing, "diskMode", None)),
        "sharing": (SHARING.get(spec.settings.sharing or "", ""), getattr(backing, "sharing", None)),
        "iops": (str(spec.settings.iops), getattr(alloc, "limit", None)),
    }
    out = []
    for key, asked in spec.settings.pairs():
        want, value = shown[key]
        took = value is not None and str(value) == want
        out.append(SettingSeen(key, asked, "took" if took else "missing", f"the VM's device config {_NAMES[key]} {value}"))
    return out


_NAMES: Final = {"disk_mode": "backing.diskMode", "sharing": "backing.sharing", "iops": "storageIOAllocation.limit"}
