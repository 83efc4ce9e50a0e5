"""--disk on vSphere against a real vCenter API server (vcsim): the settings a VM's config has
(disk mode, multi-writer sharing, an IOPS limit) are set on the disk and read back from its device
config before the rules; the others are refused with the reason (hypervisors/vsphere/disk_settings.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyVmomi import vim

from hypervisors.base import GuestRequest
from hypervisors.cleanup import CleanupStack
from hypervisors.vsphere.backend import VSphereBackend
from hypervisors.vsphere.controllers import disk_instances
from hypervisors.vsphere.disk_settings import refusal
from hypervisors.vsphere.vcenter import devices
from model.disk_settings import DiskSettings, parse_disk_settings
from model.errors import HypervisorError
from model.settings_seen import properties
from model.types import DiskSpec
from tests.vsphere.vsphere_sim import Sim

GIB = 1024**3


def _request(run_dir: Path, pubkey: str, settings: DiskSettings) -> GuestRequest:
    disks = (DiskSpec("pvscsi", index=0, size_bytes=GIB, settings=settings),
             DiskSpec("pvscsi", index=1, size_bytes=GIB, settings=settings))
    return GuestRequest(name="g1", disks=disks, run_dir=run_dir, authorized_key=pubkey, boot_timeout_s=20)


def test_disk_mode_sharing_and_an_iops_limit_are_set_and_read_back(backend: VSphereBackend, run_dir: Path,
                                                                    run_pubkey: str) -> None:
    asked = parse_disk_settings("disk_mode=independent_persistent,sharing=multi_writer,iops=500")
    guest = backend.start_guest(_request(run_dir, run_pubkey, asked))
    for disk in guest.disks:
        vmdk = disk_instances(devices(backend.vm_of(guest)))[disk.host_ref]
        backing = vmdk.backing
        assert isinstance(backing, vim.vm.device.VirtualDisk.FlatVer2BackingInfo)
        assert (backing.diskMode, backing.sharing) == ("independent_persistent", "sharingMultiWriter")
        assert vmdk.storageIOAllocation is not None and vmdk.storageIOAllocation.limit == 500
    seen = properties(backend.disk_settings_seen(guest))
    assert seen["disk.pvscsi.setting.iops"] == "500 took: the VM's device config storageIOAllocation.limit 500"
    assert seen["disk.pvscsi.setting.disk_mode"] == (
        "independent_persistent took: the VM's device config backing.diskMode independent_persistent")
    assert seen["disk.pvscsi.setting.sharing"] == "multi_writer took: the VM's device config backing.sharing sharingMultiWriter"


def test_nothing_asked_is_the_thin_persistent_disk_without_a_limit(backend: VSphereBackend, run_dir: Path,
                                                                  run_pubkey: str) -> None:
    guest = backend.start_guest(_request(run_dir, run_pubkey, DiskSettings()))
    backing = disk_instances(devices(backend.vm_of(guest)))[guest.disks[0].host_ref].backing
    assert isinstance(backing, vim.vm.device.VirtualDisk.FlatVer2BackingInfo)
    assert (backing.diskMode, backing.thinProvisioned) == ("persistent", True)
    alloc = disk_instances(devices(backend.vm_of(guest)))[guest.disks[0].host_ref].storageIOAllocation
    assert alloc is None or alloc.limit in (None, -1)
    assert backend.disk_settings_seen(guest) == {}


def test_a_setting_vsphere_lacks_is_refused_before_anything_is_created(backend: VSphereBackend, vcsim: Sim,
                                                                       run_dir: Path, run_pubkey: str) -> None:
    with pytest.raises(HypervisorError) as e:
        backend.start_guest(_request(run_dir, run_pubkey, DiskSettings(cache="none", bps=1000)))
    assert "cache=none: ESXi decides a VMDK's caching itself" in str(e.value)
    assert "bps=1000: a vSphere disk's limit (storageIOAllocation.limit) is in IOPS only: give iops" in str(e.value)
    assert vcsim.vms(backend.clone_name(_request(run_dir, run_pubkey, DiskSettings()))) == []


@pytest.mark.parametrize(("text", "says"), [
    ("serial=VOL", "vSphere cannot set a disk's serial"),
    ("format=qcow2", "vSphere's disks are VMDKs"),
    ("iothread=on", "a VM's config has no iothread"),
    ("wwn=5000c50015ea7100", "derives a disk's WWN from its UUID"),
])
def test_each_refusal_names_the_reason_and_what_vsphere_has(text: str, says: str) -> None:
    said = refusal(DiskSpec("pvscsi", settings=parse_disk_settings(text)))
    assert says in said and said.endswith("(the vSphere disk settings are disk_mode, sharing, iops)")


def test_vsphere_settings_are_refused_on_libvirt(cleanup: CleanupStack) -> None:
    from hypervisors.libvirt.disk_settings import refusal as libvirt_refusal
    said = libvirt_refusal(DiskSpec("virtio-scsi", backing="file", settings=DiskSettings(disk_mode="persistent")),
                           "scsi", "virtio-scsi", True)
    assert said.startswith("disk_mode=persistent: vSphere's disk settings; libvirt's disks have no disk mode")
