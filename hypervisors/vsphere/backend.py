"""The vSphere backend: clone a template, add the disks under test, power on, SSH in, destroy.

Clones are named ``vioconform-<run id>-<guest name>`` and annotated with the run, so leftovers
of a killed run are easy to find (``python -m hypervisors.vsphere.leftovers``). The destroy
action is registered with the cleanup stack *before* the clone task starts: whatever happens
later (a failed reconfigure, no IP, Ctrl-C during the clone) the clone is removed.

How a clone learns the run's SSH key, and which host key the suite pins, depends on how the
template was prepared (``guest_prep`` in the config):

- ``cloud-init`` (the default): before power-on the backend sets the extraConfig keys of
  cloud-init's VMware datasource on the clone, ``guestinfo.userdata`` and ``guestinfo.metadata``
  (base64, with ``guestinfo.userdata.encoding`` / ``guestinfo.metadata.encoding`` = ``base64``).
  The user-data (``images.cloudinit``) makes the login user (``vioconform`` unless
  ``guest_user`` says otherwise) trust the run key, with passwordless sudo, and installs an
  ed25519 host key generated for this clone alone; its public half is the pinned key, known
  before the clone boots. The meta-data gives each clone its own ``instance-id`` (so cloud-init
  applies the user-data even on a template that ran cloud-init before) and asks cloud-init to
  clear ``guestinfo.userdata`` inside the guest once read (``redact``). The host key's private
  half is in the clone's configuration until the clone is destroyed: vCenter users with the VM's
  configuration privileges can read it there. It is per clone and thrown away with it.
- ``rpctool``: the backend sets ``guestinfo.vioconform.authorized_key`` (the base64 ed25519 run
  key). The template reads it at boot (``vmware-rpctool "info-get
  guestinfo.vioconform.authorized_key"`` into ``/root/.ssh/authorized_keys``) or already trusts
  ``guest_key_path``; the login is root. Clones keep the template's host key: ``guest_host_key``
  pins it.

No secret of the suite's own goes into guestinfo: the run key there is its public half, and the
vCenter password is never sent to a guest.
"""

from __future__ import annotations

import logging
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Self

from pyVmomi import vim

from hypervisors.base import BackendOptions, DiskThrottle, Guest, GuestRequest, HypervisorBackend, ThrottleUnavailable
from hypervisors.cleanup import CleanupStack
from hypervisors.vsphere import disk_settings as vsphere_settings
from hypervisors.vsphere.config import (
    TARGET_ENV,
    TARGET_EXAMPLE,
    ConfigError,
    VSphereConfig,
    parse_target,
)
from hypervisors.vsphere.controllers import (
    CONTROLLERS,
    PlannedDisk,
    advertised_of,
    configured_limits,
    disk_instances,
    plan_devices,
    wwn_of,
)
from hypervisors.vsphere.lifecycle import VSphereHotplugDisk, VSphereResizer, hotplug_beside
from hypervisors.vsphere.perf import DiskCounterTracker, DiskPerf
from hypervisors.vsphere.tracer import VscsiStatsTracer
from hypervisors.vsphere.vcenter import VCenter, devices, host_name
from hypervisors.vsphere.vscsistats import VscsiStatsSource, open_source
from images.cloudinit import generate_host_key, meta_data, user_data, vmware_guestinfo
from model.advertised import Advertised
from model.errors import HypervisorError
from model.parse.blockstats import HostBlockCounters
from model.secret import PASSWORD_ENV
from model.settings_seen import SettingSeen
from model.types import AttachedDisk, DiskSpec, GuestDiskId, SshEndpoint

log = logging.getLogger("vioconform.vsphere")

NAME_PREFIX = "vioconform-"
#: guest_prep = "rpctool": the run's public key (base64 ed25519) for the template's boot script.
KEY_PROPERTY = "guestinfo.vioconform.authorized_key"
#: guest_prep = "cloud-init": the guestinfo keys cloud-init clears in the guest once read (meta-data ``redact``).
REDACTED = ("userdata",)
#: vcsim only: a reconfigure setting this extraConfig key makes it report that guest IP.
SIM_IP_PROPERTY = "SET.guest.ipAddress"
#: Why the throttle rule is not judged on vSphere.
THROTTLE_NOT_JUDGED = ("vSphere: a disk's IOPS limit (--disk iops=, its storageIOAllocation.limit) is set when the "
                       "suite clones the VM and ESXi's storage I/O scheduler enforces it; the suite does not change it "
                       "under a running VM, and vcsim, which it is tested against, runs no I/O to limit: the throttle "
                       "rule is judged on libvirt only")


def default_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}"


@dataclass(frozen=True)
class GuestAccess:
    """How the suite reaches one clone: the guestinfo to set before power-on, the login user,
    the private key it logs in with and the host key line it accepts."""

    guestinfo: dict[str, str]
    user: str
    key_path: Path
    host_key: str


def guest_access(config: VSphereConfig, request: GuestRequest, clone_name: str) -> GuestAccess:
    """The guestinfo and the SSH endpoint's credentials of a new clone, by ``config.guest_prep``."""
    run_key = request.run_dir / "id_ed25519"
    if config.guest_prep == "cloud-init":
        host_key = generate_host_key()
        instance_id = f"{clone_name}-{secrets.token_hex(4)}"  # unique per clone, even for a reused run id
        info = vmware_guestinfo(user_data(config.login_user, request.authorized_key, host_key),
                                meta_data(instance_id, redact=REDACTED))
        return GuestAccess(info, config.login_user, run_key, host_key.public_line)
    return GuestAccess({KEY_PROPERTY: request.authorized_key}, config.login_user,
                       config.guest_key_path or run_key, config.guest_host_key)


@dataclass(frozen=True)
class Clone:
    """A guest's VM as this backend made it: the clone's name and the ESXi host it runs on."""

    vm: vim.VirtualMachine
    name: str
    esxi_host: str


class VSphereBackend(HypervisorBackend):
    """Guests on vCenter (or a single ESXi host) through pyVmomi."""

    name: ClassVar[str] = "vsphere"
    controllers: ClassVar[dict[str, str]] = {k.name: k.description for k in CONTROLLERS.values()}
    #: vSphere counts no flushes per disk: rules on flushes must skip on this backend.
    counts_flushes: ClassVar[bool] = False
    #: PerformanceManager gives 20 s averages, not request counts: one-for-one rules must skip.
    exact_counts: ClassVar[bool] = False

    def __init__(self, cleanup: CleanupStack, config: VSphereConfig | str, run_id: str | None = None) -> None:
        super().__init__(cleanup)
        self.config = parse_target(config) if isinstance(config, str) else config
        self.run_id = run_id or default_run_id()
        self._vc: VCenter | None = None
        self._perf: DiskPerf | None = None
        self._clones: dict[str, Clone] = {}
        self._trackers: dict[tuple[str, str], DiskCounterTracker] = {}
        #: vscsiStats sources by (ESXi host, via, key): opened on first use, closed with the backend
        self._sources: dict[tuple[str, str, Path | None], VscsiStatsSource] = {}

    @classmethod
    def validate_options(cls, opts: BackendOptions) -> None:
        """At configure time: a bad target (or no password) raises ConfigError with its one-line cause
        (the session makes it a usage error, exit 4) before any test runs."""
        parse_target(_target_of(opts))

    @classmethod
    def from_options(cls, cleanup: CleanupStack, opts: BackendOptions) -> Self:
        """The suite's way in: ``opts.vcenter`` (``--vcenter``: vsphere:// URL or TOML file), else $TARGET_ENV."""
        return cls(cleanup, parse_target(_target_of(opts)))

    @property
    def vc(self) -> VCenter:
        if self._vc is None:
            self._vc = VCenter(self.config)
        return self._vc

    @property
    def perf(self) -> DiskPerf:
        if self._perf is None:
            self._perf = DiskPerf(self.vc)
        return self._perf

    def clone_name(self, request: GuestRequest) -> str:
        return f"{NAME_PREFIX}{self.run_id}-{request.name}"

    def _placement(self) -> tuple[vim.Folder, vim.vm.RelocateSpec, vim.VirtualMachine, vim.Network | None]:
        """Look up everything the clone needs before creating anything, so a bad name leaves nothing behind."""
        cfg, vc = self.config, self.vc
        dc = vc.datacenter()
        template = vc.find(vim.VirtualMachine, cfg.template, "template")
        relocate = vim.vm.RelocateSpec()
        if cfg.datastore:
            relocate.datastore = vc.find(vim.Datastore, cfg.datastore, "datastore")
        if cfg.resource_pool:
            relocate.pool = vc.find(vim.ResourcePool, cfg.resource_pool, "resource pool")
        elif cfg.cluster:
            relocate.pool = vc.find(vim.ComputeResource, cfg.cluster, "cluster").resourcePool
        else:
            compute = [c for c in dc.hostFolder.childEntity if isinstance(c, vim.ComputeResource)]
            if not compute:
                raise HypervisorError(f"datacenter {dc.name} has no host or cluster; set cluster=NAME")
            relocate.pool = compute[0].resourcePool
        network = vc.find(vim.Network, cfg.network, "network") if cfg.network else None
        return dc.vmFolder, relocate, template, network

    def _start_guest(self, request: GuestRequest) -> Guest:
        refused = next((r for r in map(vsphere_settings.refusal, request.disks) if r), "")
        if refused:  # before the clone: nothing to remove
            raise HypervisorError(f"--disk: {refused}")
        cfg = self.config
        folder, relocate, template, network = self._placement()
        name = self.clone_name(request)
        self.cleanup.push(f"vSphere VM {name}", lambda: self.destroy_vm(name))
        note = f"vioconform run {self.run_id} (pid {os.getpid()}); safe to delete when that run is over"
        # the note goes in at clone time (vCenter) and again with the disks (vcsim ignores a CloneSpec's config)
        spec = vim.vm.CloneSpec(location=relocate, powerOn=False, template=False,
                                config=vim.vm.ConfigSpec(annotation=note))
        vm = self.vc.wait(template.CloneVM_Task(folder=folder, name=name, spec=spec),
                          f"cloning {cfg.template} to {name}")
        datastore = cfg.datastore or (vm.datastore[0].name if vm.datastore else "")
        changes, planned = plan_devices(devices(vm), request.disks, datastore)
        if network is not None:
            changes.extend(_nic_changes(vm, network))
        access = guest_access(cfg, request, name)
        extra = [vim.option.OptionValue(key=k, value=v) for k, v in access.guestinfo.items()]
        extra.append(vim.option.OptionValue(key="disk.EnableUUID", value="TRUE"))
        if cfg.simulate_guest_ip:
            extra.append(vim.option.OptionValue(key=SIM_IP_PROPERTY, value=cfg.simulate_guest_ip))
        self.vc.wait(vm.ReconfigVM_Task(spec=vim.vm.ConfigSpec(
            annotation=note, numCPUs=request.vcpus, memoryMB=request.memory_mib, deviceChange=changes,
            extraConfig=extra)),
            f"adding {len(request.disks)} disk(s) to {name}")
        self.vc.wait(vm.PowerOnVM_Task(), f"powering on {name}")
        origin_ns = self.perf.server_now_ns()
        ip = self.wait_for_ip(vm, cfg.ip_timeout_s)
        self._clones[request.name] = Clone(vm, name, host_name(vm))
        wwns = _disk_wwns(vm, planned)
        disks = tuple(AttachedDisk(p.spec, p.instance, configured_limits(p.spec), GuestDiskId("wwn", wwns[p.instance]))
                      for p in planned)
        for p in planned:
            self._trackers[(request.name, p.instance)] = DiskCounterTracker(self.perf, vm, p.instance, origin_ns)
        endpoint = SshEndpoint(ip, cfg.guest_ssh_port, access.user, access.key_path, access.host_key)
        guest = Guest(request.name, endpoint, disks, accel="vsphere")
        self.wait_for_ssh(guest, request.boot_timeout_s)
        return guest

    def wait_for_ip(self, vm: vim.VirtualMachine, timeout_s: float) -> str:
        """The first IP VMware Tools reports; the error says how long it waited and what Tools said."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout_s:
            ip = vm.guest.ipAddress if vm.guest is not None else None
            if ip:
                return str(ip)
            time.sleep(min(2.0, max(timeout_s / 20, 0.1)))
        raise HypervisorError(
            f"VMware Tools in {vm.name} reported no IP address after {time.monotonic() - t0:.0f} s "
            f"(tools status {vm.guest.toolsRunningStatus if vm.guest else 'unknown'}); "
            f"check that open-vm-tools runs in the template and that its NIC is connected")

    def wait_for_ssh(self, guest: Guest, timeout_s: float) -> None:
        """Connect once with the pinned host key, so a template that does not trust the key fails here."""
        from transport.ssh import GuestUnreachable, SshTransport  # the transport layer is optional for pure tests
        try:
            SshTransport(guest.ssh, connect_timeout_s=timeout_s).close()
        except GuestUnreachable as e:
            if self.config.guest_prep == "cloud-init":
                remedy = (f"the template must run cloud-init (VMware datasource, with open-vm-tools) to take the "
                          f"run key for {guest.ssh.user} and this clone's host key from guestinfo.userdata (see "
                          f"'Preparing a template' in hypervisors/vsphere/README.md); a template without cloud-init "
                          f"needs guest_prep = \"rpctool\"")
            else:
                remedy = f"the template must trust the run key (see {KEY_PROPERTY}) or guest_key_path"
            raise HypervisorError(f"{self.vm_name(guest)} got IP {guest.ssh.host} but SSH failed: {e}; "
                                  f"{remedy}") from e

    def destroy_vm(self, name: str) -> None:
        """Power off and delete the VM ``name`` if it exists (the cleanup action of every clone)."""
        self.vc.destroy_vm(name)

    def clone_of(self, guest: Guest) -> Clone:
        try:
            return self._clones[guest.name]
        except KeyError:
            raise HypervisorError(f"guest {guest.name} was not started by this vSphere backend") from None

    def vm_of(self, guest: Guest) -> vim.VirtualMachine:
        return self.clone_of(guest).vm

    def vm_name(self, guest: Guest) -> str:
        """The name of the guest's VM on vCenter (``vioconform-<run id>-<guest name>``)."""
        return self.clone_of(guest).name

    def host_counters(self, guest: Guest, disk: AttachedDisk) -> HostBlockCounters:
        """Cumulative counters from the realtime perf samples (see hypervisors.vsphere.perfdata)."""
        tracker = self._trackers.get((guest.name, disk.host_ref))
        if tracker is None:
            raise HypervisorError(f"no disk {disk.host_ref} on guest {guest.name}")
        return tracker.counters()

    def check_counters(self, guest: Guest) -> None:
        """Raise now, not after a long fio run, if a needed counter is not collected for a disk."""
        for disk in guest.disks:
            self.perf.check_available(self.vm_of(guest), disk.host_ref)

    def disk_settings_seen(self, guest: Guest) -> dict[DiskSpec, list[SettingSeen]]:
        """Each disk's asked settings read back from the VM's device config (hypervisors/vsphere/disk_settings.py)."""
        instances = disk_instances(devices(self.vm_of(guest)))
        return {d.spec: vsphere_settings.seen(d.spec, instances.get(d.host_ref)) for d in guest.disks
                if d.spec.settings.pairs()}

    def advertised(self, guest: Guest, disk: AttachedDisk) -> Advertised:
        """The VM's device config of the disk (hypervisors.vsphere.controllers.advertised_of)."""
        return advertised_of(devices(self.vm_of(guest)), disk.host_ref)

    def disk_throttle(self, guest: Guest, disk: AttachedDisk) -> DiskThrottle:
        """Not on vSphere (:data:`THROTTLE_NOT_JUDGED` says why): the throttle rule skips with it."""
        raise ThrottleUnavailable(THROTTLE_NOT_JUDGED)

    def resizer(self, guest: Guest, disk: AttachedDisk) -> VSphereResizer:
        """Grows ``disk`` with ``ReconfigVM_Task`` (hypervisors.vsphere.lifecycle); it refuses to shrink it."""
        clone = self.clone_of(guest)
        resizer = VSphereResizer(self.vc, clone.vm, clone.name, disk.host_ref)
        resizer.size_bytes()  # a disk the VM no longer has fails here, before the rule starts its I/O
        return resizer

    def hotplug_disk(self, guest: Guest, beside: AttachedDisk) -> VSphereHotplugDisk:
        """A new thin disk on the controller of ``beside`` (hypervisors.vsphere.lifecycle); its serial is its
        UUID, which the guest sees as its WWN."""
        clone = self.clone_of(guest)
        return hotplug_beside(self.vc, clone.vm, clone.name, beside, self.cleanup)

    def request_tracer(self, guest: Guest, disk: AttachedDisk) -> VscsiStatsTracer:
        """vscsiStats for the measured window: over SSH when the config gives ESXi SSH keys, else the service."""
        via = "ssh" if (self.config.esxi_key_path or self.config.esxi_host_key) else "service"
        return VscsiStatsTracer(self.vscsistats(guest, via), self.vm_name(guest), disk.host_ref, via)

    def vscsistats(self, guest: Guest, via: str = "ssh") -> VscsiStatsSource:
        """The vscsiStats source for the guest's ESXi host: ``via`` is "ssh" or "service" (ServiceManager).

        Opened on first use and kept: every window of the run goes through it (over SSH, one
        connection per ESXi host), and ``close()`` closes it. Over SSH the key is ``esxi_key_path``,
        or else the run key (the guest's).
        """
        host = self.clone_of(guest).esxi_host
        key = (self.config.esxi_key_path or guest.ssh.key_path) if via == "ssh" else None
        source = self._sources.get((host, via, key))
        if source is None:
            source = self._sources[(host, via, key)] = open_source(self.vc, self.config, host, via, key)
        return source

    def environment(self, guest: Guest) -> dict[str, str]:
        """The vCenter's build (the ServiceInstance's ``about``) and the clone's ESXi host's
        (``config.product``): the fingerprint of a vSphere run."""
        about = self.vc.content.about
        host = self.vm_of(guest).runtime.host
        product = host.config.product if host is not None and host.config is not None else None
        return {"vcenter.version": str(about.version), "vcenter.build": str(about.build),
                "vcenter.name": str(about.fullName),
                "esxi.version": str(product.version) if product else "unknown",
                "esxi.build": str(product.build) if product else "unknown"}

    def close(self) -> None:
        sources, self._sources = list(self._sources.values()), {}
        for source in sources:
            source.close()
        if self._vc is not None:
            self._vc.close()
            self._vc = None
            self._perf = None


def _target_of(opts: BackendOptions) -> str:
    target = opts.vcenter or os.environ.get(TARGET_ENV)
    if not target:
        raise ConfigError(f"--hypervisor vsphere needs --vcenter {TARGET_EXAMPLE} or a config file "
                          f"(or ${TARGET_ENV}); the password comes from ${PASSWORD_ENV} or password_file")
    return str(target)


def _nic_changes(vm: vim.VirtualMachine, network: vim.Network) -> list[vim.vm.device.VirtualDeviceSpec]:
    """Connect the template's first NIC to ``network`` (standard or distributed port group)."""
    nics = [d for d in devices(vm) if isinstance(d, vim.vm.device.VirtualEthernetCard)]
    if not nics:
        raise HypervisorError(f"template of {vm.name} has no network card to connect to {network.name}")
    nic = nics[0]
    if isinstance(network, vim.dvs.DistributedVirtualPortgroup):
        nic.backing = vim.vm.device.VirtualEthernetCard.DistributedVirtualPortBackingInfo(
            port=vim.dvs.PortConnection(portgroupKey=network.key,
                                        switchUuid=_switch_uuid(network)))
    else:
        nic.backing = vim.vm.device.VirtualEthernetCard.NetworkBackingInfo(network=network, deviceName=network.name)
    return [vim.vm.device.VirtualDeviceSpec(operation="edit", device=nic)]


def _switch_uuid(portgroup: vim.dvs.DistributedVirtualPortgroup) -> str:
    switch = portgroup.config.distributedVirtualSwitch
    if switch is None:
        raise HypervisorError(f"distributed port group {portgroup.name} belongs to no switch")
    return str(switch.uuid)


def _disk_wwns(vm: vim.VirtualMachine, planned: list[PlannedDisk]) -> dict[str, str]:
    """Disk instance -> the disk's UUID as lower-case hex, which the guest sees as its WWN (disk.EnableUUID).

    vSphere cannot give a disk a custom serial such as ``vioc-dut0``: the guest finds the disk by this instead.
    """
    attached = disk_instances(devices(vm))
    out: dict[str, str] = {}
    for p in planned:
        disk = attached.get(p.instance)
        if disk is None:
            raise HypervisorError(f"{vm.name}: disk {p.instance} is missing after the reconfigure")
        out[p.instance] = wwn_of(disk)
    return out
