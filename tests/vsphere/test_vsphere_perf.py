"""Realtime virtualDisk counters: from the simulator's test-controlled source to the backend's numbers."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from hypervisors.base import Guest, GuestRequest
from hypervisors.vsphere.backend import VSphereBackend
from hypervisors.vsphere.perfdata import NS_PER_S, PerfWindowSummary
from model.errors import HypervisorError
from model.parse.blockstats import HostCountersDelta
from model.types import DiskSpec
from tests.vsphere.vsphere_sim import SAMPLE_S, Sim

PVSCSI_VALUES = {
    "virtualDisk.readOIO.latest": 12, "virtualDisk.writeOIO.latest": 4,
    "virtualDisk.numberReadAveraged.average": 3000, "virtualDisk.numberWriteAveraged.average": 1000,
    "virtualDisk.readIOSize.latest": 4096, "virtualDisk.writeIOSize.latest": 65536,
    "virtualDisk.readLatencyUS.latest": 4000, "virtualDisk.writeLatencyUS.latest": 4000,
}
NVME_VALUES = {"virtualDisk.readOIO.latest": 1, "virtualDisk.numberReadAveraged.average": 140,
               "virtualDisk.readIOSize.latest": 512}


@pytest.fixture
def guest(backend: VSphereBackend, vcsim: Sim, run_dir: Path, run_pubkey: str) -> Guest:
    g = backend.start_guest(GuestRequest("perf", (DiskSpec("pvscsi", 0), DiskSpec("nvme", 1)), run_dir, run_pubkey,
                                         boot_timeout_s=20))
    vm = backend.vm_name(g)
    vcsim.set_perf({"vms": {vm: {g.disks[0].host_ref: PVSCSI_VALUES, g.disks[1].host_ref: NVME_VALUES}}})
    time.sleep(2 * SAMPLE_S)  # a real run measures a guest that has been up for more than a sample
    return g


def test_counters_follow_the_controlled_source(backend: VSphereBackend, guest: Guest) -> None:
    backend.check_counters(guest)
    pvscsi, nvme = guest.disks
    a, a_nvme = backend.host_counters(guest, pvscsi), backend.host_counters(guest, nvme)
    time.sleep(3 * SAMPLE_S + 0.2)
    b, b_nvme = backend.host_counters(guest, pvscsi), backend.host_counters(guest, nvme)
    d = HostCountersDelta.between(a, b)
    seconds = d.elapsed_ns / NS_PER_S
    assert seconds >= 3 * SAMPLE_S and d.elapsed_ns % (SAMPLE_S * NS_PER_S) == 0
    assert d.avg_in_flight == pytest.approx(12 + 4)  # Little's law gives back readOIO + writeOIO
    assert (d.reads, d.writes, d.flushes) == (3000 * seconds, 1000 * seconds, 0)
    assert d.avg_request_size_bytes == pytest.approx((3000 * 4096 + 1000 * 65536) / 4000)
    # the other disk has its own instance and its own numbers
    dn = HostCountersDelta.between(a_nvme, b_nvme)
    assert dn.avg_in_flight == pytest.approx(1)
    assert (dn.iops, dn.avg_request_size_bytes, dn.writes) == (140, 512, 0)


def test_window_summary_and_too_short_window(backend: VSphereBackend, guest: Guest) -> None:
    vm = backend.vm_of(guest)
    start = backend.perf.server_now_ns()
    time.sleep(4 * SAMPLE_S)
    end = backend.perf.server_now_ns()
    samples = backend.perf.window(vm, guest.disks[0].host_ref, start, end, min_samples=2, wait_s=5)
    summary = PerfWindowSummary.of(samples)
    assert summary.samples >= 2 and summary.seconds == summary.samples * SAMPLE_S
    assert (summary.read_oio, summary.write_oio) == (12, 4)
    assert (summary.read_io_size_bytes, summary.writes_per_s) == (4096, 1000)
    with pytest.raises(HypervisorError, match=r"holds \d whole realtime sample.*measure for at least"):
        backend.perf.window(vm, guest.disks[0].host_ref, end, end + NS_PER_S // 2, min_samples=2, wait_s=1)


def test_counter_not_collected_names_its_level(backend: VSphereBackend, vcsim: Sim, guest: Guest) -> None:
    vcsim.set_perf({"unavailable": ["virtualDisk.readIOSize.latest"]})
    with pytest.raises(HypervisorError, match=r"scsi\d:0: not collected.*readIOSize.latest \(level 4, per-device "
                                              r"level 4\).*statistics level"):
        backend.check_counters(guest)
