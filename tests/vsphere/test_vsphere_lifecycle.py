"""A disk's life on vSphere against a real vCenter API server (vcsim): the resize rule's grow and the
hotplug rule's add and removes, each a ``ReconfigVM_Task``. Every size, unit, UUID and file is read back
from vcsim through a session of the test's own and from the datastore's directory, never from the backend."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from pyVmomi import vim

from hypervisors.base import HOTPLUG_SIZE_BYTES, Guest, GuestRequest, HotplugUnavailable, ResizeUnavailable
from hypervisors.cleanup import CleanupStack
from hypervisors.vsphere.backend import VSphereBackend
from hypervisors.vsphere.lifecycle import VSphereHotplugDisk, VSphereResizer
from model.errors import HypervisorError
from model.secret import Secret
from model.types import AttachedDisk, DiskSpec
from tests.vsphere.vsphere_sim import Sim, SimGuestSshd, sim_config

MIB = 1 << 20
GROW_BYTES = 64 * MIB


@dataclass(frozen=True)
class SimDisk:
    """A disk as vcsim lists it for the VM: its controller's bus and key, its unit, size and VMDK."""

    controller_key: int
    bus: int
    unit: int
    capacity_bytes: int
    capacity_kib: int
    file: str
    uuid: str
    thin: bool


def sim_disks(sim: Sim, vm_name: str) -> list[SimDisk]:
    with sim.session() as content:
        view = content.viewManager.CreateContainerView(content.rootFolder, [vim.VirtualMachine], True)
        vm = next(v for v in view.view if v.name == vm_name)
        devs: list[Any] = list(vm.config.hardware.device)  # untyped: read as vcsim answers, not narrowed
        buses = {d.key: d.busNumber for d in devs if isinstance(d, vim.vm.device.VirtualController)}
        return [SimDisk(d.controllerKey, buses[d.controllerKey], d.unitNumber, d.capacityInBytes, d.capacityInKB,
                        d.backing.fileName, d.backing.uuid, bool(d.backing.thinProvisioned))
                for d in devs if type(d).__name__ == "vim.vm.device.VirtualDisk"]


def sim_disk(sim: Sim, vm_name: str, instance: str) -> SimDisk:
    """The disk at perf instance ``instance`` ("scsi1:0") as vcsim lists it."""
    bus, unit = instance.removeprefix("scsi").split(":")
    found = [d for d in sim_disks(sim, vm_name) if (d.bus, d.unit) == (int(bus), int(unit))]
    assert len(found) == 1, (instance, sim_disks(sim, vm_name))
    return found[0]


def vmdk_path(sim: Sim, datastore_path: str) -> Path:
    """The file on this machine behind a vcsim datastore path ("[LocalDS_0] vm/vm_2.vmdk")."""
    ds_name, _, rel = datastore_path.partition("] ")
    with sim.session() as content:
        view = content.viewManager.CreateContainerView(content.rootFolder, [vim.Datastore], True)
        ds = next(d for d in view.view if d.name == ds_name.lstrip("["))
        return Path(ds.info.url) / rel


def test_resize_grows_the_disk_as_vcenter_reports_it(backend: VSphereBackend, vcsim: Sim,
                                                     one_disk_guest: Guest) -> None:
    guest, disk = one_disk_guest, one_disk_guest.disks[0]
    name = backend.vm_name(guest)
    resizer = backend.resizer(guest, disk)
    before = sim_disk(vcsim, name, disk.host_ref)
    assert resizer.size_bytes() == before.capacity_bytes == disk.spec.size_bytes
    t0 = time.monotonic()
    host = resizer.resize(before.capacity_bytes + GROW_BYTES)
    wall = time.monotonic() - t0
    after = sim_disk(vcsim, name, disk.host_ref)
    assert (after.capacity_bytes, after.capacity_kib * 1024) == (before.capacity_bytes + GROW_BYTES,) * 2, after
    assert host.size_bytes == after.capacity_bytes
    assert 0 <= host.seconds <= wall, (host.seconds, wall)
    # the same disk, edited in place: its VMDK and UUID are the ones it had
    assert (after.file, after.uuid, after.unit) == (before.file, before.uuid, before.unit)
    # a step that is not 64 MiB (a whole number of KiB): vcsim shows exactly what was asked
    odd = after.capacity_bytes + 3 * 1024
    assert resizer.resize(odd).size_bytes == odd == sim_disk(vcsim, name, disk.host_ref).capacity_bytes
    # the same size again changes nothing
    assert resizer.resize(odd).size_bytes == odd


def test_shrinking_and_a_size_vsphere_cannot_state_are_refused_before_vcenter_is_asked(
        backend: VSphereBackend, vcsim: Sim, one_disk_guest: Guest) -> None:
    guest, disk = one_disk_guest, one_disk_guest.disks[0]
    name = backend.vm_name(guest)
    resizer = backend.resizer(guest, disk)
    size = sim_disk(vcsim, name, disk.host_ref).capacity_bytes
    with pytest.raises(ResizeUnavailable, match=rf"vSphere cannot shrink a virtual disk: disk {disk.host_ref} of VM "
                                                rf"{name} is {size} bytes and {size - MIB} were asked"):
        resizer.resize(size - MIB)
    with pytest.raises(HypervisorError, match=rf"whole KiB: {size + 512} bytes .* ask for {size} or {size + 1024}") as e:
        resizer.resize(size + 512)
    assert not isinstance(e.value, ResizeUnavailable)  # a wrong size is the caller's error, not a skip
    assert sim_disk(vcsim, name, disk.host_ref).capacity_bytes == size


class StaleResizer(VSphereResizer):
    """Believes the disk 2 MiB smaller than it is, so that vCenter, not the suite, refuses a shrink."""

    def _disk(self) -> vim.vm.device.VirtualDisk:
        disk = super()._disk()
        edited: Any = disk
        edited.capacityInBytes -= 2 * MIB
        edited.capacityInKB -= 2 * MIB // 1024
        return disk


def test_vcenters_own_refusal_becomes_resize_unavailable_with_its_fault(backend: VSphereBackend, vcsim: Sim,
                                                                        one_disk_guest: Guest) -> None:
    guest, disk = one_disk_guest, one_disk_guest.disks[0]
    name = backend.vm_name(guest)
    size = sim_disk(vcsim, name, disk.host_ref).capacity_bytes
    stale = StaleResizer(backend.vc, backend.vm_of(guest), name, disk.host_ref)
    with pytest.raises(ResizeUnavailable, match=rf"vCenter refused growing disk {disk.host_ref} of VM {name} from "
                                                rf"{size - 2 * MIB} to {size - MIB} bytes: .*InvalidDeviceOperation"):
        stale.resize(size - MIB)
    assert sim_disk(vcsim, name, disk.host_ref).capacity_bytes == size


def test_hotplug_adds_a_disk_beside_and_detach_and_remove_take_it_and_its_vmdk_away(
        backend: VSphereBackend, vcsim: Sim, cleanup: CleanupStack, one_disk_guest: Guest) -> None:
    guest, beside = one_disk_guest, one_disk_guest.disks[0]
    name = backend.vm_name(guest)
    dut = sim_disk(vcsim, name, beside.host_ref)
    before = sim_disks(vcsim, name)
    hot = backend.hotplug_disk(guest, beside)
    assert sim_disks(vcsim, name) == before and not hot.present()  # nothing is added before attach
    with pytest.raises(HypervisorError, match="no serial before it is attached"):
        _ = hot.serial
    registered = len(cleanup)
    hot.attach()
    added = [d for d in sim_disks(vcsim, name) if d not in before]
    assert len(added) == 1, added
    new = added[0]
    # on the controller of the disk under test, at its next unit, thin, with the size the rule expects
    assert (new.controller_key, new.unit, new.thin) == (dut.controller_key, dut.unit + 1, True), new
    assert new.capacity_bytes == hot.size_bytes == HOTPLUG_SIZE_BYTES
    # the serial is the UUID the guest sees as its WWN: the same form as the disks under test's
    assert hot.serial == new.uuid.replace("-", "").lower() and len(hot.serial) == 32
    assert beside.guest_id.kind == "wwn" and beside.guest_id.value == dut.uuid.replace("-", "").lower()
    assert new.file.startswith(f"[{dut.file[1:dut.file.index(']')]}] ")  # on the datastore of the disk beside
    assert vmdk_path(vcsim, new.file).exists()
    assert hot.present() and len(cleanup) == registered + 1  # the cleanup knows it from the attach on
    hot.detach()
    assert not hot.present() and sim_disks(vcsim, name) == before
    assert not vmdk_path(vcsim, new.file).exists()
    # added again (the surprise removal's second disk): at the same free unit, then removed by the cleanup path
    hot.attach()
    again = [d for d in sim_disks(vcsim, name) if d not in before]
    assert [(d.controller_key, d.unit) for d in again] == [(dut.controller_key, dut.unit + 1)]
    assert hot.serial == again[0].uuid.replace("-", "").lower()
    hot.remove()
    assert not hot.present() and sim_disks(vcsim, name) == before
    assert not vmdk_path(vcsim, again[0].file).exists()
    assert len(cleanup) == registered
    hot.remove()  # a disk already gone: nothing to do, no error


def test_a_run_that_dies_after_the_attach_leaves_no_disk_once_the_cleanup_runs(
        backend: VSphereBackend, vcsim: Sim, cleanup: CleanupStack, one_disk_guest: Guest) -> None:
    name = backend.vm_name(one_disk_guest)
    before = sim_disks(vcsim, name)
    hot = backend.hotplug_disk(one_disk_guest, one_disk_guest.disks[0])
    hot.attach()
    file = next(d.file for d in sim_disks(vcsim, name) if d not in before)
    # the rule never gets to remove() (Ctrl-C, a crash in the suite): the run's cleanup, newest first
    assert cleanup.run() == []
    assert not vmdk_path(vcsim, file).exists()
    assert vcsim.vms(name) == []


def test_a_failure_mid_way_through_the_attach_leaves_no_disk_behind(
        backend: VSphereBackend, vcsim: Sim, cleanup: CleanupStack, one_disk_guest: Guest,
        monkeypatch: pytest.MonkeyPatch) -> None:
    name = backend.vm_name(one_disk_guest)
    before = sim_disks(vcsim, name)
    created: list[str] = []

    def adopt_then_fail(self: VSphereHotplugDisk) -> None:
        created.extend(d.file for d in sim_disks(vcsim, name) if d not in before)
        raise RuntimeError("injected failure after vCenter added the disk")

    monkeypatch.setattr(VSphereHotplugDisk, "_adopt", adopt_then_fail)
    registered = len(cleanup)
    hot = backend.hotplug_disk(one_disk_guest, one_disk_guest.disks[0])
    with pytest.raises(RuntimeError, match="injected"):
        hot.attach()
    assert len(created) == 1, "the failure should come after vCenter created the disk"
    assert sim_disks(vcsim, name) == before and not vmdk_path(vcsim, created[0]).exists()
    assert len(cleanup) == registered  # nothing left for the run's cleanup


def test_a_task_vcenter_fails_is_an_error_naming_the_step_and_leaves_no_disk(
        backend: VSphereBackend, vcsim: Sim, cleanup: CleanupStack, one_disk_guest: Guest,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A unit that is taken: vcsim fails the task with InvalidDeviceSpec, which is not 'unsupported'."""
    guest, beside = one_disk_guest, one_disk_guest.disks[0]
    name = backend.vm_name(guest)
    taken = sim_disk(vcsim, name, beside.host_ref).unit
    before = sim_disks(vcsim, name)
    hot = backend.hotplug_disk(guest, beside)
    monkeypatch.setattr(VSphereHotplugDisk, "free_unit", lambda self, devs: taken)
    registered = len(cleanup)
    with pytest.raises(HypervisorError, match=rf"hot-adding a {HOTPLUG_SIZE_BYTES}-byte disk on scsi\d:{taken} of VM "
                                              rf"{name} failed: .*InvalidDeviceSpec") as e:
        hot.attach()
    assert not isinstance(e.value, HotplugUnavailable)
    assert sim_disks(vcsim, name) == before  # the disk under test at that unit is not taken for the failed one
    assert not hot.present()
    assert len(cleanup) == registered


@pytest.mark.parametrize(("disks", "unit"), [(7, 8), (15, None)], ids=["skips-unit-7", "controller-full"])
def test_the_next_free_unit_skips_the_controllers_own_and_a_full_controller_is_unavailable(
        backend: VSphereBackend, vcsim: Sim, run_dir: Path, run_pubkey: str, disks: int, unit: int | None) -> None:
    specs = tuple(DiskSpec("pvscsi", index=i, size_bytes=MIB) for i in range(disks))
    guest = backend.start_guest(GuestRequest("full", specs, run_dir, run_pubkey, boot_timeout_s=20))
    name = backend.vm_name(guest)
    if unit is None:
        with pytest.raises(HotplugUnavailable, match=rf"controller scsi1 of VM {name} has no free unit for another "
                                                     r"disk \(units 0-15 taken\)"):
            backend.hotplug_disk(guest, guest.disks[0])
        return
    hot = backend.hotplug_disk(guest, guest.disks[0])
    before = sim_disks(vcsim, name)
    hot.attach()
    new = [d for d in sim_disks(vcsim, name) if d not in before]
    assert [(d.bus, d.unit) for d in new] == [(1, unit)], new
    hot.remove()
    assert sim_disks(vcsim, name) == before


def test_a_vm_deleted_outside_the_suite_is_said_as_such(backend: VSphereBackend, vcsim: Sim,
                                                        one_disk_guest: Guest) -> None:
    guest, disk = one_disk_guest, one_disk_guest.disks[0]
    name = backend.vm_name(guest)
    resizer = backend.resizer(guest, disk)
    hot = backend.hotplug_disk(guest, disk)
    backend.vc.destroy_vm(name)  # as someone else would, with the same rights
    assert vcsim.vms(name) == []
    for call in (resizer.size_bytes, lambda: resizer.resize(disk.spec.size_bytes + GROW_BYTES), hot.attach):
        with pytest.raises(HypervisorError, match=rf"VM {name} no longer exists in vCenter .*start the run again"):
            call()


def test_a_disk_the_vm_does_not_have_is_said_before_the_rule_starts(backend: VSphereBackend,
                                                                    one_disk_guest: Guest) -> None:
    guest = one_disk_guest
    name = backend.vm_name(guest)
    ghost = replace(guest.disks[0], host_ref="scsi1:9")
    with pytest.raises(HypervisorError, match=rf"VM {name} has no disk scsi1:9 in its device list"):
        backend.resizer(guest, ghost)
    with pytest.raises(HypervisorError, match=rf"VM {name} has no disk scsi1:9 in its device list"):
        backend.hotplug_disk(guest, ghost)


def test_a_session_that_is_no_longer_logged_in_is_said_as_such(backend: VSphereBackend,
                                                               one_disk_guest: Guest) -> None:
    guest, disk = one_disk_guest, one_disk_guest.disks[0]
    resizer = backend.resizer(guest, disk)
    hot = backend.hotplug_disk(guest, disk)
    backend.vc.content.sessionManager.Logout()  # as vCenter does when a session times out
    try:
        for call in (resizer.size_bytes, lambda: resizer.resize(disk.spec.size_bytes + GROW_BYTES), hot.attach,
                     lambda: backend.hotplug_disk(guest, disk)):
            with pytest.raises(HypervisorError, match=r"the vCenter session is no longer logged in .*session timeout"):
                call()
    finally:
        backend.close()  # the next call logs in again, so that the cleanup can destroy the clone


def test_bad_credentials_are_said_when_the_resize_or_hotplug_logs_in(vcsim: Sim, guest_sshd: SimGuestSshd,
                                                                     backend: VSphereBackend, cleanup: CleanupStack,
                                                                     one_disk_guest: Guest) -> None:
    bad = VSphereBackend(cleanup, replace(sim_config(vcsim, guest_sshd), password=Secret("wrong-password-9c2d")),
                         run_id=backend.run_id)
    bad._clones[one_disk_guest.name] = backend.clone_of(one_disk_guest)  # the guest it would have started
    disk: AttachedDisk = one_disk_guest.disks[0]
    try:
        for call in (lambda: bad.resizer(one_disk_guest, disk), lambda: bad.hotplug_disk(one_disk_guest, disk)):
            with pytest.raises(HypervisorError, match=r"rejected the login of 'vioconform@vsphere.local': check the "
                                                      r"user and the password") as e:
                call()
            assert vcsim.password not in str(e.value)
    finally:
        bad.close()
