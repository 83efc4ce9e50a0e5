"""A disk's life on vSphere: grown under its running guest (the resize rule), added to it and removed
again (the hotplug rule). Each change is one ``ReconfigVM_Task`` with one ``VirtualDeviceSpec``:

- grow: ``operation=edit`` on the disk's ``VirtualDisk`` with ``capacityInBytes`` (and the older
  ``capacityInKB``) set to the new size. vSphere only grows a disk: a smaller size is refused here,
  before vCenter is asked (``ResizeUnavailable``), and so is a size that is not a whole number of KiB.
  The size returned is the one the VM's device list shows afterwards, read again.
- add: ``operation=add``, ``fileOperation=create``: a new thin ``VirtualDisk`` of
  ``HOTPLUG_SIZE_BYTES`` on the controller of the disk under test, at its first free unit (SCSI unit 7
  is the controller's own), its VMDK on the datastore of that disk.
- remove (the idle removal, the surprise removal and the cleanup alike): ``operation=remove``,
  ``fileOperation=destroy``: the VMDK is deleted with the device.

**The serial.** vSphere cannot give a disk a serial. The guest finds a vSphere disk by its UUID, which
it sees as its WWN (``disk.EnableUUID``, set on every clone: ``device/wwid`` is ``naa.`` and the UUID's
hex), as it finds the disks under test (``GuestDiskId("wwn", ...)``). vCenter chooses the UUID when it
creates the VMDK, so ``serial`` is known once the disk is attached: the UUID as lower-case hex without
dashes, read from the device list. A disk added again gets a new VMDK and so a new serial.

**Failures.** A task fault that says vCenter cannot do the operation at all (``UNSUPPORTED``: not
supported, not hot-pluggable, not on this platform or hardware version, an invalid device operation)
becomes ``ResizeUnavailable`` / ``HotplugUnavailable`` with vCenter's words, and the rule skips; any
other fault a ``HypervisorError`` naming the step. A VM that no longer exists and a session that is no
longer logged in are said as such. Everything ``attach`` creates is removed when it fails, and it is
registered with the backend's cleanup stack from before the task starts, so a run that dies mid-way
leaves no disk behind either.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from pyVmomi import vim, vmodl

from hypervisors.base import HOTPLUG_SIZE_BYTES, HostResize, HotplugUnavailable, ResizeUnavailable
from hypervisors.cleanup import CleanupStack
from hypervisors.vsphere.controllers import (
    KIB,
    VMDK_LIMITS,
    controller_units,
    disk_instances,
    instance_name,
    wwn_of,
)
from hypervisors.vsphere.vcenter import TaskFailed, VCenter, devices, fault_text
from model.device_limits import ConfiguredLimits
from model.errors import HypervisorError
from model.types import AttachedDisk

log = logging.getLogger("vioconform.vsphere")

#: vSphere states a disk's size in ``capacityInKB`` (every API version) and ``capacityInBytes`` (5.5
#: on); the suite sets both, equal, so a size must be a whole number of KiB.
CAPACITY_STEP_BYTES = KIB
#: vCenter's faults that say the operation cannot be done on this VM or disk at all (the rule skips
#: with vCenter's words), as opposed to this attempt failing.
UNSUPPORTED: tuple[type[vmodl.MethodFault], ...] = (
    vmodl.fault.NotSupported, vim.fault.DeviceHotPlugNotSupported, vim.fault.DeviceUnsupportedForVmPlatform,
    vim.fault.DeviceUnsupportedForVmVersion, vim.fault.DeviceNotSupported, vim.fault.InvalidDeviceOperation)


@contextmanager
def vcenter_call(vm_name: str, what: str) -> Iterator[None]:
    """Turns a fault of a call to vCenter (not a task's) into a HypervisorError that says what to check."""
    try:
        yield
    except vmodl.fault.ManagedObjectNotFound as e:
        raise HypervisorError(f"{what}: VM {vm_name} no longer exists in vCenter (was it deleted outside the "
                              f"suite?); start the run again") from e
    except vim.fault.NotAuthenticated as e:
        raise HypervisorError(f"{what}: the vCenter session is no longer logged in (it timed out or was logged "
                              f"out); check the vCenter's session timeout and start the run again") from e
    except vmodl.MethodFault as e:
        raise HypervisorError(f"{what}: vCenter answered {type(e).__name__}: {fault_text(e)}") from e


def _fault_name(fault: vmodl.MethodFault) -> str:
    return type(fault).__name__.rsplit(".", 1)[-1]


def reconfigure(vc: VCenter, vm: vim.VirtualMachine, vm_name: str, change: vim.vm.device.VirtualDeviceSpec,
                what: str, unavailable: type[HypervisorError]) -> float:
    """One ``ReconfigVM_Task`` with ``change``; the seconds it took by vCenter's task times (queued to
    completed), or by the suite's clock where vCenter gives none. A fault in ``UNSUPPORTED`` raises
    ``unavailable``, any other a HypervisorError."""
    began = time.monotonic()
    with vcenter_call(vm_name, what):
        task = vm.ReconfigVM_Task(spec=vim.vm.ConfigSpec(deviceChange=[change]))
        try:
            vc.wait(task, what)
        except TaskFailed as e:
            if isinstance(e.fault, UNSUPPORTED):
                raise unavailable(f"vCenter refused {what}: {fault_text(e.fault)} ({_fault_name(e.fault)})") from e
            raise
        took = time.monotonic() - began
        info = task.info
    return task_seconds(info.queueTime, info.completeTime, took)


def task_seconds(queued: Any, completed: Any, fallback_s: float) -> float:
    """A task's seconds from vCenter's times (datetimes), or ``fallback_s`` where it gives none."""
    if queued is None or completed is None:
        return fallback_s
    return max(0.0, float((completed - queued).total_seconds()))


def capacity_bytes(disk: vim.vm.device.VirtualDisk) -> int:
    """The disk's size as vCenter states it (``capacityInBytes``; ``capacityInKB`` on a server without it)."""
    return int(disk.capacityInBytes or disk.capacityInKB * KIB)


def datastore_of(file_name: str) -> str:
    """The datastore of a datastore path ("[LocalDS_0] vm/vm_1.vmdk" -> "LocalDS_0"), or "" without one."""
    if file_name.startswith("[") and "]" in file_name:
        return file_name[1:file_name.index("]")]
    return ""


class VSphereResizer:
    """Grows the disk at perf instance ``instance`` ("scsi1:0") of a running VM (``DiskResizer``)."""

    def __init__(self, vc: VCenter, vm: vim.VirtualMachine, vm_name: str, instance: str) -> None:
        self.vc = vc
        self.vm = vm
        self.vm_name = vm_name
        self.instance = instance
        self.where = f"disk {instance} of VM {vm_name}"

    def _disk(self) -> vim.vm.device.VirtualDisk:
        with vcenter_call(self.vm_name, f"reading {self.where}"):
            disk = disk_instances(devices(self.vm)).get(self.instance)
        if disk is None:
            raise HypervisorError(f"VM {self.vm_name} has no disk {self.instance} in its device list (was it "
                                  f"removed outside the suite?)")
        return disk

    def size_bytes(self) -> int:
        """The disk's size as vCenter states it now."""
        return capacity_bytes(self._disk())

    def resize(self, size_bytes: int) -> HostResize:
        disk = self._disk()
        current = capacity_bytes(disk)
        if size_bytes < current:
            raise ResizeUnavailable(f"vSphere cannot shrink a virtual disk: {self.where} is {current} bytes and "
                                    f"{size_bytes} were asked; it only grows one")
        if size_bytes % CAPACITY_STEP_BYTES:
            low = size_bytes - size_bytes % CAPACITY_STEP_BYTES
            raise HypervisorError(f"vSphere sizes a disk in whole KiB: {size_bytes} bytes for {self.where} is not a "
                                  f"multiple of {CAPACITY_STEP_BYTES}; ask for {low} or {low + CAPACITY_STEP_BYTES}")
        disk.capacityInBytes = size_bytes  # type: ignore[assignment]  # the stub's type is a class made at run time
        disk.capacityInKB = size_bytes // KIB
        change = vim.vm.device.VirtualDeviceSpec(operation="edit", device=disk)
        seconds = reconfigure(self.vc, self.vm, self.vm_name, change,
                              f"growing {self.where} from {current} to {size_bytes} bytes", ResizeUnavailable)
        return HostResize(self.size_bytes(), seconds)


class VSphereHotplugDisk:
    """The hotplug rule's disk on one controller of a running VM (``HotplugDisk``); see the module's doc."""

    def __init__(self, vc: VCenter, vm: vim.VirtualMachine, vm_name: str,
                 controller: vim.vm.device.VirtualController, datastore: str, cleanup: CleanupStack,
                 size_bytes: int = HOTPLUG_SIZE_BYTES) -> None:
        self.vc = vc
        self.vm = vm
        self.vm_name = vm_name
        self.controller_key = int(controller.key)
        self.units = controller_units(controller)
        self.bus = instance_name(controller, 0).partition(":")[0]  # "scsi1"
        self.datastore = datastore
        self.cleanup = cleanup
        self._size_bytes = size_bytes
        self.unit: int | None = None
        self._file = ""  # the VMDK vCenter created, once attached
        self._others: frozenset[str] = frozenset()  # the VMDKs of the VM's disks before the attach: never ours
        self._serial = ""
        self._forget: Callable[[], None] | None = None

    @property
    def where(self) -> str:
        place = self.bus if self.unit is None else f"{self.bus}:{self.unit}"
        return f"{place} of VM {self.vm_name}"

    @property
    def serial(self) -> str:
        """The disk's UUID as the guest sees it (its WWN: lower-case hex, no dashes), once attached."""
        if not self._serial:
            raise HypervisorError(f"the hot-plugged disk on {self.where} has no serial before it is attached: "
                                  f"vCenter chooses its UUID (the WWN the guest sees) when it creates it")
        return self._serial

    @property
    def size_bytes(self) -> int:
        return self._size_bytes

    @property
    def configured(self) -> ConfiguredLimits:
        return VMDK_LIMITS

    def _devices(self, what: str) -> list[vim.vm.device.VirtualDevice]:
        with vcenter_call(self.vm_name, what):
            return devices(self.vm)

    def free_unit(self, devs: list[vim.vm.device.VirtualDevice]) -> int:
        """The first unit of the controller no device takes; HotplugUnavailable where all are taken."""
        used = {d.unitNumber for d in devs if d.controllerKey == self.controller_key and d.unitNumber is not None}
        free = [u for u in self.units if u not in used]
        if not free:
            raise HotplugUnavailable(f"controller {self.bus} of VM {self.vm_name} has no free unit for another disk "
                                     f"(units {self.units[0]}-{self.units[-1]} taken)")
        return free[0]

    def _find(self) -> vim.vm.device.VirtualDisk | None:
        """The disk this object added: at its unit, with the VMDK vCenter made for it, or, before that is known
        (a failed attach), with a VMDK that was not the VM's before the attach: never another disk, so that
        a unit someone else took meanwhile is left alone."""
        if self.unit is None:
            return None
        for d in self._devices(f"looking for the hot-plugged disk on {self.where}"):
            if not (isinstance(d, vim.vm.device.VirtualDisk) and d.controllerKey == self.controller_key
                    and d.unitNumber == self.unit):
                continue
            file = _file_of(d)
            if file == self._file if self._file else file not in self._others:
                return d
        return None

    def attach(self) -> None:
        devs = self._devices(f"reading the devices of VM {self.vm_name}")
        self.unit = self.free_unit(devs)
        self._others = frozenset(_file_of(d) for d in devs if isinstance(d, vim.vm.device.VirtualDisk))
        self._file = self._serial = ""
        if self._forget is None:  # from before the task: a run that dies during it leaves no disk either
            self._forget = self.cleanup.push(f"hot-plugged disk {self.where} and its VMDK", self._remove_now)
        backing = vim.vm.device.VirtualDisk.FlatVer2BackingInfo(
            diskMode="persistent", thinProvisioned=True, fileName=f"[{self.datastore}]" if self.datastore else "")
        disk = vim.vm.device.VirtualDisk(key=-1, controllerKey=self.controller_key, unitNumber=self.unit,
                                         backing=backing, capacityInKB=self._size_bytes // KIB,
                                         capacityInBytes=self._size_bytes)
        change = vim.vm.device.VirtualDeviceSpec(operation="add", fileOperation="create", device=disk)
        try:
            reconfigure(self.vc, self.vm, self.vm_name, change,
                        f"hot-adding a {self._size_bytes}-byte disk on {self.where}", HotplugUnavailable)
            self._adopt()
        except Exception:
            self.remove()
            raise
        log.info("%s: attached a disk on %s (WWN %s, %s)", self.vm_name, self.where, self._serial, self._file)

    def _adopt(self) -> None:
        """Read back what vCenter made: the VMDK's path (so the cleanup removes that disk only) and its UUID."""
        found = self._find()
        if found is None:
            raise HypervisorError(f"vCenter reported the disk on {self.where} added, but the VM's device list has "
                                  f"no disk there")
        self._file = _file_of(found)
        serial = wwn_of(found)
        if not serial:
            raise HotplugUnavailable(f"vCenter gave the disk on {self.where} no UUID, so the guest cannot tell it "
                                     f"from the others (it has no serial on vSphere)")
        self._serial = serial

    def _remove_spec(self, disk: vim.vm.device.VirtualDisk) -> vim.vm.device.VirtualDeviceSpec:
        return vim.vm.device.VirtualDeviceSpec(operation="remove", fileOperation="destroy", device=disk)

    def detach(self) -> None:
        disk = self._find()
        if disk is None:
            raise HypervisorError(f"no hot-plugged disk is attached on {self.where} to remove")
        reconfigure(self.vc, self.vm, self.vm_name, self._remove_spec(disk),
                    f"removing the hot-plugged disk on {self.where}", HotplugUnavailable)

    def present(self) -> bool:
        """Whether the VM's device list still has the disk."""
        return self._find() is not None

    def _remove_now(self) -> None:
        disk = self._find()
        if disk is not None:
            reconfigure(self.vc, self.vm, self.vm_name, self._remove_spec(disk),
                        f"removing the hot-plugged disk on {self.where}", HypervisorError)
            log.info("%s: removed the hot-plugged disk on %s and its VMDK", self.vm_name, self.where)

    def remove(self) -> None:
        """Remove the disk and its VMDK if they are still there; never raises. Where vCenter refuses, the
        removal stays with the run's cleanup stack, which tries again at the run's end and reports it."""
        forget, self._forget = self._forget, None
        if forget is None:
            return
        try:
            forget()
        except Exception as e:  # noqa: BLE001 the rule's finally calls this: it must not mask the rule's own error
            log.warning("could not remove the hot-plugged disk on %s now (%s); the run's cleanup tries again",
                        self.where, e)
            self._forget = self.cleanup.push(f"hot-plugged disk {self.where} and its VMDK", self._remove_now)


def _file_of(disk: vim.vm.device.VirtualDisk) -> str:
    """The disk's VMDK as a datastore path ("[LocalDS_0] vm/vm_2.vmdk"), or "" for a backing without a file."""
    return str(getattr(disk.backing, "fileName", "") or "")


def hotplug_beside(vc: VCenter, vm: vim.VirtualMachine, vm_name: str, beside: AttachedDisk,
                   cleanup: CleanupStack) -> VSphereHotplugDisk:
    """The rule's disk on the controller of ``beside`` (not yet attached), its VMDK on ``beside``'s datastore;
    HotplugUnavailable where the controller has no free unit."""
    with vcenter_call(vm_name, f"reading the devices of VM {vm_name}"):
        devs = devices(vm)
    disk = disk_instances(devs).get(beside.host_ref)
    if disk is None:
        raise HypervisorError(f"VM {vm_name} has no disk {beside.host_ref} in its device list (was it removed "
                              f"outside the suite?)")
    controller = next(d for d in devs if d.key == disk.controllerKey and isinstance(d, vim.vm.device.VirtualController))
    hot = VSphereHotplugDisk(vc, vm, vm_name, controller, datastore_of(_file_of(disk)),
                             cleanup)
    hot.free_unit(devs)
    return hot
