"""vscsiStats histograms of one virtual disk: over SSH to the ESXi host, or through the ServiceManager.

Both sources give cumulative ``HistogramSet``s; ``VscsiStatsInterval`` takes the difference
between a snapshot at the start and one at the end of a measured interval (the *exact*
host-observed depth (docs/user-guide.md, "Host-side histograms on your own KVM host"): "number of
outstanding IOs when a new IO is issued").

- ``EsxiSsh``: ``vscsiStats -l`` finds the VM's world group and the disk's handle, then
  ``-s -w W -i H`` starts, ``-p all -c -w W -i H`` prints CSV, ``-x`` stops, ``-r`` resets.
  The ESXi host needs SSH enabled and the key in ``/etc/ssh/keys-root/authorized_keys``.
- ``ServiceManagerVscsiStats``: where SSH is not allowed, the host's "VscsiStats" service
  (``ExecuteSimpleCommand`` StartVscsiStats / FetchAllHistograms / ResetVscsiStats /
  StopVscsiStats) gives the same histograms. It starts and stops collection for every VM on
  the host, and identifies disks by VM name and disk name only (world and handle are 0).
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from pyVmomi import vmodl

from hypervisors.vsphere.config import VSphereConfig
from hypervisors.vsphere.vcenter import VCenter, fault_text
from hypervisors.vsphere.vscsidata import VscsiDisk, find_disk, parse_fetch_all_histograms, parse_vscsistats_list
from model.errors import HypervisorError, ParseError
from model.parse.histogram import HistogramSet
from model.parse.vscsistats_csv import parse_vscsistats_csv
from model.types import SshEndpoint

#: Exit status of a shell asked to run a command it cannot find.
COMMAND_NOT_FOUND = 127


class VscsiStatsSource(Protocol):
    """Where vscsiStats histograms come from; ``find`` names the disk for the other calls."""

    def find(self, vm_name: str, label: str) -> VscsiDisk: ...
    def start(self, disk: VscsiDisk) -> None: ...
    def snapshot(self, disk: VscsiDisk) -> HistogramSet: ...
    def reset(self, disk: VscsiDisk) -> None: ...
    def stop(self, disk: VscsiDisk) -> None: ...
    def close(self) -> None: ...


class EsxiSsh:
    """vscsiStats run on the ESXi host over SSH (paramiko, host key pinned)."""

    def __init__(self, endpoint: SshEndpoint, connect_timeout_s: float = 10.0) -> None:
        from transport.ssh import GuestUnreachable, SshTransport
        self.where = f"ESXi host {endpoint.user}@{endpoint.host}:{endpoint.port}"
        if not endpoint.host_key:
            raise HypervisorError(f"{self.where}: esxi_host_key is not set; pin the host's key "
                                  f"(ssh-keyscan -t ed25519 {endpoint.host}) in the vsphere config")
        try:
            self.ssh = SshTransport(endpoint, connect_timeout_s=connect_timeout_s)
        except GuestUnreachable as e:
            raise HypervisorError(f"{self.where}: SSH failed: {e}. Enable SSH on the host (Configure > Services "
                                  f"> SSH), add the key to /etc/ssh/keys-root/authorized_keys, or use the "
                                  f"ServiceManager source instead (no SSH needed)") from None

    def run(self, args: str) -> str:
        result = self.ssh.run(f"vscsiStats {args}", check=False, timeout_s=60)
        if result.exit_status == COMMAND_NOT_FOUND:
            raise HypervisorError(f"{self.where}: vscsiStats not found ({result.stderr.strip()}); it ships with "
                                  f"ESXi as /usr/lib/vmware/bin/vscsiStats: is this an ESXi host?")
        if not result.ok:
            raise HypervisorError(f"{self.where}: vscsiStats {args} failed (exit {result.exit_status}): "
                                  f"{(result.stderr or result.stdout).strip()[-500:]}")
        return result.stdout

    @staticmethod
    def _which(disk: VscsiDisk) -> str:
        return f"-w {disk.world_group_id} -i {disk.handle_id}"

    def find(self, vm_name: str, label: str) -> VscsiDisk:
        return find_disk(parse_vscsistats_list(self.run("-l")), vm_name, label, self.where)

    def start(self, disk: VscsiDisk) -> None:
        self.run(f"-s {self._which(disk)}")

    def snapshot(self, disk: VscsiDisk) -> HistogramSet:
        source = f"{self.where} vscsiStats -p all -c {self._which(disk)}"
        try:
            sets = parse_vscsistats_csv(self.run(f"-p all -c {self._which(disk)}"), source=source)
        except ParseError as e:
            raise HypervisorError(str(e)) from None
        for s in sets:
            if (s.world_group_id, s.handle_id) == (disk.world_group_id, disk.handle_id):
                return s
        raise HypervisorError(f"{source}: no histograms of handle {disk.handle_id}; "
                              f"got handles {[s.handle_id for s in sets]} (was collection started with -s?)")

    def reset(self, disk: VscsiDisk) -> None:
        self.run(f"-r {self._which(disk)}")

    def stop(self, disk: VscsiDisk) -> None:
        self.run(f"-x {self._which(disk)}")

    def close(self) -> None:
        self.ssh.close()


class ServiceManagerVscsiStats:
    """The host's "VscsiStats" SimpleCommand, reached through vCenter's (or ESXi's) ServiceManager."""

    def __init__(self, vc: VCenter, esxi_host: str) -> None:
        self.where = f"VscsiStats service of {esxi_host}"
        location = f"vmware.host.{esxi_host}"  # the prefix vCenter needs; ESXi itself accepts it too
        services = vc.content.serviceManager.QueryServiceList(serviceName="VscsiStats", location=[location])
        if not services:
            raise HypervisorError(f"{self.where}: the ServiceManager offers no VscsiStats service there "
                                  f"(ESXi 5.1 or newer has it); use the SSH source")
        self.command = services[0].service

    def execute(self, command: str) -> str:
        try:
            return str(self.command.ExecuteSimpleCommand(arguments=[command]))
        except vmodl.MethodFault as e:
            raise HypervisorError(f"{self.where}: {command} failed: {fault_text(e)}") from None

    def _ok(self, command: str) -> None:
        answer = self.execute(command).strip()
        if answer != "OK":
            raise HypervisorError(f"{self.where}: {command} answered {answer[:200]!r}, not OK")

    def _all(self) -> list[tuple[str, str, HistogramSet]]:
        return parse_fetch_all_histograms(self.execute("FetchAllHistograms"))

    def find(self, vm_name: str, label: str) -> VscsiDisk:
        disks = [VscsiDisk(vm, 0, 0, disk) for vm, disk, _ in self._all()]
        return find_disk(disks, vm_name, label, self.where)

    def start(self, disk: VscsiDisk) -> None:
        self._ok("StartVscsiStats")

    def snapshot(self, disk: VscsiDisk) -> HistogramSet:
        for vm, label, hists in self._all():
            if (vm, label) == (disk.vm_name, disk.label):
                return hists
        raise HypervisorError(f"{self.where}: FetchAllHistograms has no {disk.vm_name}/{disk.label}")

    def reset(self, disk: VscsiDisk) -> None:
        self._ok("ResetVscsiStats")

    def stop(self, disk: VscsiDisk) -> None:
        self._ok("StopVscsiStats")

    def close(self) -> None:
        """Nothing to release: the vCenter session belongs to the backend."""


class VscsiStatsInterval:
    """Histograms of one disk over one interval: ``begin()`` starts collection, ``end()`` gives the difference."""

    def __init__(self, source: VscsiStatsSource, vm_name: str, label: str) -> None:
        self.source = source
        self.disk = source.find(vm_name, label)
        self._baseline: HistogramSet | None = None

    def begin(self) -> None:
        self.source.start(self.disk)
        self._baseline = self.source.snapshot(self.disk)

    def end(self) -> HistogramSet:
        if self._baseline is None:
            raise HypervisorError("VscsiStatsInterval.end() called before begin()")
        try:
            return self.source.snapshot(self.disk).minus(self._baseline)
        except ParseError as e:
            raise HypervisorError(f"vscsiStats histograms of {self.disk.vm_name}/{self.disk.label}: {e}") from None

    def stop(self) -> None:
        self.source.stop(self.disk)


def open_source(vc: VCenter, cfg: VSphereConfig, esxi_host: str, via: str, key_path: Path | None) -> VscsiStatsSource:
    """A vscsiStats source for ``esxi_host`` (the VM's ``runtime.host.name``): ``via`` is "ssh" or "service".

    SSH goes to ``esxi_ssh_host`` when the config sets one (a jump address), else to the host's name.
    """
    if via == "service":
        return ServiceManagerVscsiStats(vc, esxi_host)
    if via != "ssh":
        raise HypervisorError(f"unknown vscsiStats source {via!r}: choose ssh or service")
    if key_path is None:
        raise HypervisorError("no ESXi SSH key: set esxi_key_path in the vsphere config, or use the service source")
    endpoint = SshEndpoint(cfg.esxi_ssh_host or esxi_host, cfg.esxi_ssh_port, cfg.esxi_user, key_path,
                           cfg.esxi_host_key)
    return EsxiSsh(endpoint, connect_timeout_s=cfg.connect_timeout_s)

