"""Provisioning against a real vCenter API server (vcsim) and a real SSH server."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from pyVmomi import vim

from hypervisors.base import GuestRequest
from hypervisors.cleanup import CleanupStack
from hypervisors.vsphere.backend import KEY_PROPERTY, VSphereBackend
from hypervisors.vsphere.controllers import VSPHERE_SILENT
from images.cloudinit import DEFAULT_GUEST_USER
from model.errors import HypervisorError
from model.types import DiskSpec
from tests.vsphere.vsphere_sim import Sim, SimBackend, SimGuestSshd, cloud_init_documents, sim_config
from transport.ssh import SshTransport

GIB = 1024**3
ALL_CONTROLLERS = ("pvscsi", "lsilogic-sas", "lsilogic", "nvme")
EXPECTED_CLASS = {
    "pvscsi": vim.vm.device.ParaVirtualSCSIController,
    "lsilogic-sas": vim.vm.device.VirtualLsiLogicSASController,
    "lsilogic": vim.vm.device.VirtualLsiLogicController,
    "nvme": vim.vm.device.VirtualNVMEController,
}


def request_for(run_dir: Path, pubkey: str, controllers: tuple[str, ...] = ALL_CONTROLLERS) -> GuestRequest:
    disks = tuple(DiskSpec(c, index=i, size_bytes=(i + 1) * GIB, physical_block_bytes=4096)
                  for i, c in enumerate(controllers))
    return GuestRequest(name="g1", disks=disks, run_dir=run_dir, authorized_key=pubkey, boot_timeout_s=20)


def vm_devices(sim: Sim, name: str) -> list[tuple[str, int | None, int | None, int | None]]:
    """(device class, busNumber, unitNumber, capacityInKB) of the VM's controllers and disks."""
    with sim.session() as content:
        view = content.viewManager.CreateContainerView(content.rootFolder, [vim.VirtualMachine], True)
        vm = next(v for v in view.view if v.name == name)
        ctrl = {d.key: d for d in vm.config.hardware.device if hasattr(d, "busNumber")}
        return [(type(ctrl[d.controllerKey]).__name__, ctrl[d.controllerKey].busNumber, d.unitNumber,
                 d.capacityInKB) for d in vm.config.hardware.device if isinstance(d, vim.vm.device.VirtualDisk)]


def test_round_trip_one_disk_per_controller(backend: VSphereBackend, vcsim: Sim, cleanup: CleanupStack,
                                            run_dir: Path, run_pubkey: str) -> None:
    guest = backend.start_guest(request_for(run_dir, run_pubkey))
    name = backend.vm_name(guest)
    assert name == f"vioconform-{backend.run_id}-g1"
    assert vcsim.vms(name) == [name]
    # one disk per requested controller, each on its own new controller, with its size
    devices = vm_devices(vcsim, name)
    for disk in guest.disks:
        kind = EXPECTED_CLASS[disk.spec.controller].__name__.split(".")[-1]
        family, _, unit = disk.host_ref.partition(":")
        bus = int(family.removeprefix("scsi").removeprefix("nvme"))
        assert (f"vim.vm.device.{kind}", bus, int(unit), disk.spec.size_bytes // 1024) in devices, devices
    assert len({d.host_ref for d in guest.disks}) == 4
    # vSphere sets no serial: the guest finds each disk by its UUID, which it sees as its WWN (disk.EnableUUID)
    assert all(d.guest_id.kind == "wwn" and re.fullmatch(r"[0-9a-f]{32}", d.guest_id.value) for d in guest.disks), \
        [d.guest_id for d in guest.disks]
    assert len({d.guest_id.value for d in guest.disks}) == 4
    # a VMDK has no settable block sizes: the configured side says what vSphere gives, not what was asked
    assert {(d.configured.physical_block_bytes, d.configured.optimal_io_bytes, d.configured.queue_depth)
            for d in guest.disks} == {(512, 0, None)}
    # what the VM's device config says of each disk: recorded, and no limit it cannot state is "advertised"
    for disk in guest.disks:
        adv = backend.advertised(guest, disk)
        said = {(p.owner, p.name): p.value for p in adv.properties}
        kind = EXPECTED_CLASS[disk.spec.controller].__name__.split(".")[-1]
        assert said[(f"controller of {disk.host_ref}", "type")] == kind, said
        assert said[(f"disk {disk.host_ref}", "diskMode")] == "persistent", said
        assert said[(f"disk {disk.host_ref}", "capacityInBytes")] == str(disk.spec.size_bytes), said
        assert adv.source == "vSphere device config" and adv.said_by == {} and adv.queue_depth is None
        assert adv.notes == (VSPHERE_SILENT,) and adv.why_not_said("queue_depth") == VSPHERE_SILENT
    # the IP came from the (simulated) Tools, the key and the host key through cloud-init's guestinfo,
    # and SSH works with both
    assert guest.ssh.host == "127.0.0.1" and guest.accel == "vsphere"
    assert (guest.ssh.user, guest.ssh.key_path) == (DEFAULT_GUEST_USER, run_dir / "id_ed25519")
    documents = cloud_init_documents(vcsim.guestinfo(name))
    assert documents is not None
    assert documents[0]["ssh_authorized_keys"][0].split()[:2] == ["ssh-ed25519", run_pubkey]
    ssh = SshTransport(guest.ssh, connect_timeout_s=10)
    assert ssh.run("echo vioconform-$((6*7))").stdout.strip() == "vioconform-42"
    ssh.close()
    # the fingerprint: vCenter's about and the clone's ESXi host's product, as vcsim answers them
    env = backend.environment(guest)
    about = backend.vc.content.about
    assert (env["vcenter.version"], env["vcenter.build"]) == (about.version, about.build) and about.version
    host = backend.vm_of(guest).runtime.host
    assert host is not None and host.config is not None and host.config.product is not None
    assert (env["esxi.version"], env["esxi.build"]) == (host.config.product.version, host.config.product.build)
    assert env["esxi.version"] and env["esxi.build"]
    cleanup.run()
    assert vcsim.vms(f"vioconform-{backend.run_id}") == []


def test_unknown_controller_is_refused_before_anything_is_created(backend: VSphereBackend, vcsim: Sim,
                                                                  run_dir: Path, run_pubkey: str) -> None:
    with pytest.raises(HypervisorError, match=r"unknown controller.*virtio-blk.*pvscsi"):
        backend.start_guest(request_for(run_dir, run_pubkey, ("virtio-blk",)))
    assert vcsim.vms(f"vioconform-{backend.run_id}") == []


class FailsAfterClone(VSphereBackend):
    """Injects a failure once the clone exists (after power-on, before the IP)."""

    def wait_for_ip(self, vm: vim.VirtualMachine, timeout_s: float) -> str:
        assert vm.name.startswith("vioconform-")
        raise RuntimeError("injected failure after the clone")


def test_failure_after_clone_leaves_no_clone(vcsim: Sim, backend: VSphereBackend, cleanup: CleanupStack,
                                             run_dir: Path, run_pubkey: str) -> None:
    failing = FailsAfterClone(cleanup, backend.config, run_id=backend.run_id)
    with pytest.raises(RuntimeError, match="injected"):
        failing.start_guest(request_for(run_dir, run_pubkey, ("pvscsi",)))
    assert vcsim.vms(f"vioconform-{backend.run_id}") != [], "the clone should exist until cleanup runs"
    assert cleanup.run() == []
    assert vcsim.vms(f"vioconform-{backend.run_id}") == []
    failing.close()


def test_tools_never_reporting_an_ip_says_how_long_it_waited(vcsim: Sim, guest_sshd: object, cleanup: CleanupStack,
                                                             backend: VSphereBackend, run_dir: Path,
                                                             run_pubkey: str) -> None:
    from dataclasses import replace
    no_ip = VSphereBackend(cleanup, replace(backend.config, simulate_guest_ip="", ip_timeout_s=2.0),
                           run_id=backend.run_id)
    t0 = time.monotonic()
    with pytest.raises(HypervisorError, match=r"reported no IP address after 2 s"):
        no_ip.start_guest(request_for(run_dir, run_pubkey, ("nvme",)))
    assert time.monotonic() - t0 < 30
    cleanup.run()
    assert vcsim.vms(f"vioconform-{backend.run_id}") == []
    no_ip.close()


@pytest.mark.parametrize(("guest_prep", "remedy"), [
    ("cloud-init", r"cloud-init \(VMware datasource.*run key for vioconform.*guestinfo\.userdata"),
    ("rpctool", KEY_PROPERTY),
])
def test_guest_that_does_not_trust_the_key_fails_clearly(vcsim: Sim, guest_sshd: SimGuestSshd, cleanup: CleanupStack,
                                                         run_dir: Path, tmp_path_factory: pytest.TempPathFactory,
                                                         guest_prep: str, remedy: str) -> None:
    from transport.ssh import generate_run_key
    other_dir = tmp_path_factory.mktemp("other-key")
    _, other_pub = generate_run_key(other_dir)
    backend = SimBackend(cleanup, sim_config(vcsim, guest_sshd, guest_prep), guest_sshd, run_id=f"untrusted-{guest_prep}")
    # the guest is told to trust other_pub, but the backend logs in with run_dir's key
    t0 = time.monotonic()
    with pytest.raises(HypervisorError, match=f"SSH failed.*{remedy}"):
        backend.start_guest(GuestRequest("g2", (DiskSpec("pvscsi"),), run_dir, other_pub, boot_timeout_s=3))
    assert time.monotonic() - t0 < 30
    cleanup.run()
    assert vcsim.vms(f"vioconform-{backend.run_id}") == []
    backend.close()
