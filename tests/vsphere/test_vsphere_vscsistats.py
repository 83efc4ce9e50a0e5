"""vscsiStats histograms: parsing recorded-format output, and end to end over SSH and the ServiceManager."""

from __future__ import annotations

import shutil
import time
from dataclasses import replace

import pytest

from hypervisors.base import Guest
from hypervisors.cleanup import CleanupStack
from hypervisors.vsphere.backend import VSphereBackend
from hypervisors.vsphere.vscsidata import find_disk, parse_fetch_all_histograms, parse_vscsistats_list
from hypervisors.vsphere.vscsistats import VscsiStatsInterval
from model.errors import HypervisorError
from model.parse.histogram import HistogramKind, HistogramSet
from tests.vsphere.vsphere_sim import DATA, SAMPLE_VM, EsxiFactory, Sim, closed_port
from tests.vsphere.vsphere_sshd import LoopbackSshd

#: A well-formed host key for a server that is never reached.
UNUSED_HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"


def read_added_burst(diff: HistogramSet) -> None:
    """The second snapshot added 1,205 reads: 1,200 at depth 30-32 and 5 above 64 (the overflow row)."""
    depth = diff.get(HistogramKind.OUTSTANDING_IOS, "read")
    assert depth.count == 1205
    assert depth.counts[depth.bucket_limits.index(32)] == 1200 and depth.counts[-1] == 5
    assert diff.get(HistogramKind.OUTSTANDING_IOS, "write").count == 0
    assert diff.get(HistogramKind.OUTSTANDING_IOS, "all").counts == depth.counts
    assert diff.get(HistogramKind.IO_LENGTH, "read").percentile(100) == 4096


def test_list_output_finds_world_and_handle() -> None:
    disks = parse_vscsistats_list((DATA / "vscsistats-l.txt").read_text())
    assert [(d.vm_name, d.world_group_id, d.handle_id, d.label) for d in disks] == [
        (SAMPLE_VM, 2099979, 8195, "scsi0:0"), (SAMPLE_VM, 2099979, 8194, "scsi1:0"),
        ("other-vm", 2100412, 8201, "scsi0:0")]
    assert find_disk(disks, SAMPLE_VM, "scsi1:0", "here").handle_id == 8194
    with pytest.raises(HypervisorError, match=r"no disk nvme0:0 of VM 'vioc-sample'.*other-vm/scsi0:0"):
        find_disk(disks, SAMPLE_VM, "nvme0:0", "here")


def test_fetch_all_histograms_xml_parses_like_the_csv() -> None:
    before, after = (parse_fetch_all_histograms((DATA / f"fetch-all-histograms-{n}.xml").read_text()) for n in (1, 2))
    assert [(vm, label, len(h.histograms)) for vm, label, h in after] == [(SAMPLE_VM, "scsi1:0", 16),
                                                                         (SAMPLE_VM, "scsi0:0", 16)]
    read_added_burst(after[0][2].minus(before[0][2]))
    overflow = after[0][2].get(HistogramKind.IO_LENGTH, "write")
    assert overflow.counts[-1] == 1 and overflow.max == 1048576
    with pytest.raises(HypervisorError, match="not XML"):
        parse_fetch_all_histograms("vscsiStats: error")


def esxi_backend(backend: VSphereBackend, server: LoopbackSshd, **changes: object) -> VSphereBackend:
    backend.config = replace(backend.config, esxi_ssh_host="127.0.0.1", esxi_ssh_port=server.port,
                             esxi_host_key=server.host_key_line, **changes)  # type: ignore[arg-type]
    return backend


def test_ssh_interval_gives_the_difference(backend: VSphereBackend, one_disk_guest: Guest,
                                           make_esxi: EsxiFactory) -> None:
    server, root = make_esxi(True)
    source = esxi_backend(backend, server).vscsistats(one_disk_guest, "ssh")
    interval = VscsiStatsInterval(source, backend.vm_name(one_disk_guest), one_disk_guest.disks[0].host_ref)
    interval.begin()
    diff = interval.end()
    interval.stop()
    source.close()
    read_added_burst(diff)
    assert (diff.world_group_id, diff.handle_id, diff.disk_label) == (2099979, 8194, "scsi1:0")
    assert (root / "calls.log").read_text().splitlines() == [
        "vscsiStats -l", "vscsiStats -s -w 2099979 -i 8194", "vscsiStats -p all -c -w 2099979 -i 8194",
        "vscsiStats -p all -c -w 2099979 -i 8194", "vscsiStats -x -w 2099979 -i 8194"]


def test_missing_vscsistats_is_named(backend: VSphereBackend, one_disk_guest: Guest, make_esxi: EsxiFactory) -> None:
    server, _ = make_esxi(False)
    source = esxi_backend(backend, server).vscsistats(one_disk_guest, "ssh")
    with pytest.raises(HypervisorError, match=r"ESXi host root@127.0.0.1:\d+: vscsiStats not found"):
        source.find(backend.vm_name(one_disk_guest), one_disk_guest.disks[0].host_ref)


def test_esxi_ssh_refused_fails_within_30_s(backend: VSphereBackend, one_disk_guest: Guest) -> None:
    backend.config = replace(backend.config, esxi_ssh_host="127.0.0.1", esxi_ssh_port=closed_port(),
                             esxi_host_key=UNUSED_HOST_KEY,
                             connect_timeout_s=3.0)
    t0 = time.monotonic()
    with pytest.raises(HypervisorError, match=r"SSH failed.*Enable SSH on the host"):
        backend.vscsistats(one_disk_guest, "ssh")
    assert time.monotonic() - t0 < 30


def test_service_manager_interval(backend: VSphereBackend, vcsim: Sim, one_disk_guest: Guest) -> None:
    vm = backend.vm_name(one_disk_guest)
    xml = [(DATA / f"fetch-all-histograms-{n}.xml").read_text().replace(SAMPLE_VM, vm) for n in (1, 2)]
    vcsim.vscsi_xml_path.write_text(xml[0])
    source = backend.vscsistats(one_disk_guest, "service")
    interval = VscsiStatsInterval(source, vm, one_disk_guest.disks[0].host_ref)
    interval.begin()
    vcsim.vscsi_xml_path.write_text(xml[1])
    read_added_burst(interval.end())
    interval.stop()
    with pytest.raises(HypervisorError, match="knows no disk scsi9:0"):
        VscsiStatsInterval(source, vm, "scsi9:0")


def test_unknown_source_is_refused(backend: VSphereBackend, one_disk_guest: Guest, cleanup: CleanupStack) -> None:
    with pytest.raises(HypervisorError, match="choose ssh or service"):
        backend.vscsistats(one_disk_guest, "telnet")


def test_request_tracer_gives_the_suite_vscsistats(backend: VSphereBackend, vcsim: Sim, one_disk_guest: Guest) -> None:
    """The suite's exact host source on vSphere: the backend's request_tracer, through the service here."""
    vm = backend.vm_name(one_disk_guest)
    xml = [(DATA / f"fetch-all-histograms-{n}.xml").read_text().replace(SAMPLE_VM, vm) for n in (1, 2)]
    vcsim.vscsi_xml_path.write_text(xml[0])
    tracer = backend.request_tracer(one_disk_guest, one_disk_guest.disks[0])
    tracer.start()
    vcsim.vscsi_xml_path.write_text(xml[1])
    trace = tracer.stop()
    read_added_burst(trace.histograms)
    assert trace.requests == () and trace.count == 1205
    assert trace.source == "exact (vscsiStats histograms) via service"


def test_one_esxi_connection_serves_every_window_and_closes_with_the_backend(
        backend: VSphereBackend, one_disk_guest: Guest, make_esxi: EsxiFactory) -> None:
    """The suite's windows over SSH: one connection to the ESXi host for the whole run, closed with the backend."""
    server, root = make_esxi(True)
    esxi_backend(backend, server)
    windows = 3
    for n in range(3, 2 * windows + 1):  # each window reads two snapshots: the recorded pair again
        shutil.copy(root / f"snap{2 - n % 2}.csv", root / f"snap{n}.csv")
    disk = one_disk_guest.disks[0]
    for _ in range(windows):
        tracer = backend.request_tracer(one_disk_guest, disk)
        tracer.start()
        trace = tracer.stop()
        read_added_burst(trace.histograms)
        assert trace.source == "exact (vscsiStats histograms) via ssh"
    assert len(server.transports) == 1, f"{len(server.transports)} SSH connections for {windows} windows"
    assert server.open_connections() == 1
    backend.close()
    deadline = time.monotonic() + 10  # the server sees the close as soon as the socket shuts (milliseconds)
    while server.open_connections() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.open_connections() == 0, "the backend left its ESXi SSH connection open"
