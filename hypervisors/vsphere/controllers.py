"""The virtual storage controllers the vSphere backend can put a disk under test on.

One class per ``--controllers`` name, with the device spec that adds it; see the vSphere API
reference for ``vim.vm.device.ParaVirtualSCSIController`` and its siblings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyVmomi import vim

from model.advertised import LIMIT_FIELDS, Advertised, DeviceProperty
from model.device_limits import ConfiguredLimits
from model.disk_settings import DISK_MODES, SHARING
from model.errors import HypervisorError
from model.types import DiskSpec

KIB = 1024
#: SCSI target 7 is the controller itself; NVMe controllers take namespaces 0-14.
SCSI_UNITS = tuple(u for u in range(16) if u != 7)
NVME_UNITS = tuple(range(15))
#: vSphere allows four SCSI and four NVMe controllers per VM.
MAX_BUSES = 4


@dataclass(frozen=True)
class ControllerKind:
    """A controller type: its pyVmomi device class, the bus family it counts in, its unit numbers."""

    name: str
    description: str
    device_class: type
    bus_family: str  # "scsi" or "nvme": the perf instance prefix and the bus-number pool
    units: tuple[int, ...]
    #: the Linux module that drives it in the guest (a missing one makes its rules skip, named)
    guest_driver: str = ""


CONTROLLERS: dict[str, ControllerKind] = {k.name: k for k in (
    ControllerKind("pvscsi", "VMware Paravirtual SCSI (vmw_pvscsi)", vim.vm.device.ParaVirtualSCSIController,
                   "scsi", SCSI_UNITS, "vmw_pvscsi"),
    ControllerKind("lsilogic-sas", "LSI Logic SAS (mptsas; the Solaris mpt_sas case)",
                   vim.vm.device.VirtualLsiLogicSASController, "scsi", SCSI_UNITS, "mptsas"),
    ControllerKind("lsilogic", "LSI Logic parallel SCSI (mptspi)", vim.vm.device.VirtualLsiLogicController,
                   "scsi", SCSI_UNITS, "mptspi"),
    ControllerKind("nvme", "virtual NVMe", vim.vm.device.VirtualNVMEController, "nvme", NVME_UNITS, "nvme"),
)}


#: Every VMDK's limits as vSphere configures them (configured_limits says why).
VMDK_LIMITS = ConfiguredLimits(queue_depth=None, physical_block_bytes=512, optimal_io_bytes=0, queues=1)


def configured_limits(spec: DiskSpec) -> ConfiguredLimits:
    """What vSphere configures for a disk, whatever the spec asked for.

    The VM configuration sets no per-disk queue depth or transfer limit: the depth a disk gets
    comes from the guest driver and the ESXi device queue, so it is unknown (None) here and the
    queue-depth rule expects the offered depth. A VMDK cannot be given a physical block size or an
    optimal I/O size, so the spec's values are not applied: the disk is 512-byte sectors with no
    optimal size, and ``queues`` is 1.
    """
    return VMDK_LIMITS


def _controllers(devices: Sequence[vim.vm.device.VirtualDevice]) -> list[vim.vm.device.VirtualController]:
    """The SCSI and NVMe controllers among ``devices``."""
    return [d for d in devices if isinstance(d, vim.vm.device.VirtualController) and _family(d)]


def _family(device: vim.vm.device.VirtualDevice) -> str | None:
    if isinstance(device, vim.vm.device.VirtualSCSIController):
        return "scsi"
    if isinstance(device, vim.vm.device.VirtualNVMEController):
        return "nvme"
    return None


def disk_instances(devices: Sequence[vim.vm.device.VirtualDevice]) -> dict[str, vim.vm.device.VirtualDisk]:
    """The VM's disks by perf instance name ("scsi0:0", "nvme0:1")."""
    buses = {d.key: f"{_family(d)}{d.busNumber}" for d in _controllers(devices)}
    return {f"{buses[d.controllerKey]}:{d.unitNumber}": d for d in devices
            if isinstance(d, vim.vm.device.VirtualDisk) and d.controllerKey in buses}


def controller_units(controller: vim.vm.device.VirtualController) -> tuple[int, ...]:
    """The unit numbers a disk can take on ``controller`` (SCSI: 0-15 but 7; NVMe: 0-14)."""
    return NVME_UNITS if _family(controller) == "nvme" else SCSI_UNITS


def instance_name(controller: vim.vm.device.VirtualController, unit: int) -> str:
    """The perf instance name of unit ``unit`` on ``controller`` ("scsi1:2")."""
    return f"{_family(controller)}{controller.busNumber}:{unit}"


def wwn_of(disk: vim.vm.device.VirtualDisk) -> str:
    """The disk's UUID as lower-case hex without dashes: what the guest sees as its WWN (with
    ``disk.EnableUUID``), the way the guest finds a vSphere disk (vSphere sets no serial). "" without one."""
    uuid = getattr(disk.backing, "uuid", None) or ""
    return str(uuid).replace("-", "").lower()


def _backing(spec: DiskSpec, datastore: str) -> vim.vm.device.VirtualDisk.FlatVer2BackingInfo:
    """A new VMDK's backing: thin and persistent, or as ``spec``'s settings ask (hypervisors/vsphere/disk_settings.py)."""
    s = spec.settings
    multi_writer = s.sharing == "multi_writer"
    backing = vim.vm.device.VirtualDisk.FlatVer2BackingInfo(
        diskMode=DISK_MODES[s.disk_mode or "persistent"], thinProvisioned=not multi_writer,
        fileName=f"[{datastore}]" if datastore else "")
    if multi_writer:  # vSphere takes a multi-writer disk only eagerly zeroed thick
        backing.eagerlyScrub = True
    if s.sharing is not None:
        backing.sharing = SHARING[s.sharing]
    return backing


@dataclass(frozen=True)
class PlannedDisk:
    """Where a requested disk goes: its temporary controller key, and its perf instance ("scsi1:0")."""

    spec: DiskSpec
    controller_key: int
    unit: int
    instance: str


def plan_devices(existing: Sequence[vim.vm.device.VirtualDevice], disks: Sequence[DiskSpec],
                 datastore: str) -> tuple[list[vim.vm.device.VirtualDeviceSpec], list[PlannedDisk]]:
    """Device specs adding one new controller per controller type and the disks on it.

    Disks get their own controller so that the template's boot disk never shares their queue.
    """
    used = {fam: {d.busNumber for d in _controllers(existing) if _family(d) == fam} for fam in ("scsi", "nvme")}
    changes: list[vim.vm.device.VirtualDeviceSpec] = []
    planned: list[PlannedDisk] = []
    controllers: dict[str, tuple[int, int, list[int]]] = {}  # name -> (key, bus, free units)
    next_key = -100
    for spec in disks:
        kind = CONTROLLERS[spec.controller]
        if spec.controller not in controllers:
            free = [b for b in range(MAX_BUSES) if b not in used[kind.bus_family]]
            if not free:
                raise HypervisorError(f"the template already has {MAX_BUSES} {kind.bus_family} controllers: "
                                      f"no bus left for {spec.controller}; use a template with fewer")
            bus = free[0]
            used[kind.bus_family].add(bus)
            ctrl = kind.device_class(key=next_key, busNumber=bus)
            if isinstance(ctrl, vim.vm.device.VirtualSCSIController):
                ctrl.sharedBus = vim.vm.device.VirtualSCSIController.Sharing.noSharing
            changes.append(vim.vm.device.VirtualDeviceSpec(operation="add", device=ctrl))
            controllers[spec.controller] = (next_key, bus, list(kind.units))
            next_key -= 1
        key, bus, units = controllers[spec.controller]
        if not units:
            raise HypervisorError(f"too many disks on one {spec.controller} controller")
        unit = units.pop(0)
        disk = vim.vm.device.VirtualDisk(key=next_key, controllerKey=key, unitNumber=unit,
                                         backing=_backing(spec, datastore), capacityInKB=spec.size_bytes // KIB)
        if spec.settings.iops is not None:
            disk.storageIOAllocation = vim.StorageResourceManager.IOAllocationInfo(limit=spec.settings.iops)
        next_key -= 1
        changes.append(vim.vm.device.VirtualDeviceSpec(operation="add", fileOperation="create", device=disk))
        planned.append(PlannedDisk(spec, key, unit, f"{kind.bus_family}{bus}:{unit}"))
    return changes, planned


#: What vSphere's device config cannot say: a VMDK's queue depth, transfer size, block sizes and
#: cache are not part of it (the guest driver and ESXi's device queue decide them).
VSPHERE_SILENT = ("the VM's device config states no queue depth, maximum transfer, block size or write cache of "
                  "a disk: a limit the guest sees differently cannot be blamed on vSphere or the driver from it")


def advertised_of(devices: Sequence[vim.vm.device.VirtualDevice], instance: str) -> Advertised:
    """What the VM's device config says of the disk at perf instance ``instance`` ("scsi1:0"):
    its controller's type and bus sharing, the disk's mode, write-through flag, provisioning,
    capacity and IOPS limit, as properties; no limit it advertises is said (VSPHERE_SILENT)."""
    disk = disk_instances(devices).get(instance)
    if disk is None:
        return Advertised("vSphere device config", notes=(f"the VM's device config has no disk {instance}",))
    ctl = next((d for d in devices if d.key == disk.controllerKey), None)
    owner = f"disk {instance}"
    backing = disk.backing
    alloc = disk.storageIOAllocation
    props = [DeviceProperty(f"controller of {instance}", "type", type(ctl).__name__.rsplit(".", 1)[-1] if ctl is not None else "none"),
             DeviceProperty(f"controller of {instance}", "sharedBus", str(getattr(ctl, "sharedBus", "") or "none")),
             DeviceProperty(owner, "diskMode", str(getattr(backing, "diskMode", "") or "none")),
             DeviceProperty(owner, "writeThrough", str(getattr(backing, "writeThrough", None)).lower()),
             DeviceProperty(owner, "thinProvisioned", str(getattr(backing, "thinProvisioned", None)).lower()),
             DeviceProperty(owner, "capacityInBytes", str(disk.capacityInBytes or disk.capacityInKB * KIB)),
             DeviceProperty(owner, "iopsLimit", str(alloc.limit if alloc is not None and alloc.limit is not None
                                                    else "none"))]
    return Advertised("vSphere device config", unsaid=dict.fromkeys(LIMIT_FIELDS, VSPHERE_SILENT),
                      properties=tuple(props), notes=(VSPHERE_SILENT,))
