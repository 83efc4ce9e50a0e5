"""The user command ``python -m hypervisors.vsphere.record`` against vcsim and a loopback "ESXi host"."""

from __future__ import annotations

from pathlib import Path

import pytest

from hypervisors.base import Guest
from hypervisors.vsphere import record
from hypervisors.vsphere.backend import VSphereBackend
from model.parse.histogram import HistogramKind
from model.parse.vscsistats_csv import parse_vscsistats_csv
from model.secret import PASSWORD_ENV
from tests.vsphere.vsphere_sim import EsxiFactory, Sim, write_target


def test_record_prints_counters_and_histograms(backend: VSphereBackend, vcsim: Sim, one_disk_guest: Guest,
                                               make_esxi: EsxiFactory, run_dir: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    vm, disk = backend.vm_name(one_disk_guest), one_disk_guest.disks[0].host_ref
    vcsim.set_perf({"vms": {vm: {disk: {"virtualDisk.readOIO.latest": 31, "virtualDisk.readIOSize.latest": 4096,
                                        "virtualDisk.numberReadAveraged.average": 5000}}}})
    server, _ = make_esxi(True)
    target = write_target(tmp_path / "vc.toml", backend, esxi_ssh_host="127.0.0.1", esxi_ssh_port=server.port,
                          esxi_host_key=server.host_key_line, esxi_key_path=str(run_dir / "id_ed25519"))
    monkeypatch.setenv(PASSWORD_ENV, vcsim.password)
    out = tmp_path / "rec.csv"
    assert record.main(["--target", str(target), "--vm", vm, "--seconds", "2.5", "--out", str(out)]) == 0
    lines = out.read_text().splitlines()
    # every disk of the VM: the template's scsi0:0, then the disk under test; counters first
    heads = [i for i, line in enumerate(lines) if line.startswith("Counters:")]
    assert [lines[i].split(",")[4] for i in heads] == ["scsi0:0", disk]
    assert lines[heads[1]].startswith(f"Counters: vCenter realtime virtualDisk,virtual machine,{vm},virtual disk,")
    counters = dict(line.split(",") for line in lines[heads[1] + 1:heads[1] + 9])
    assert (float(counters["read_oio"]), float(counters["read_io_size_bytes"]), float(counters["reads_per_s"])) \
        == (31, 4096, 5000)
    boot, dut = parse_vscsistats_csv(out.read_text())  # the counters are skipped; histograms are the interval's
    assert (dut.world_group_id, dut.handle_id, dut.disk_label) == (2099979, 8194, disk)
    assert dut.get(HistogramKind.OUTSTANDING_IOS, "read").count == 1205
    assert boot.get(HistogramKind.OUTSTANDING_IOS, "read").count == 0
    text = out.read_text()
    assert vcsim.password not in text


def test_record_errors_are_one_line_and_exit_2(vcsim: Sim, backend: VSphereBackend, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(PASSWORD_ENV, vcsim.password)
    target = write_target(tmp_path / "vc.toml", backend)
    assert record.main(["--target", str(target), "--vm", "no-such-vm", "--seconds", "1"]) == 2
    assert "record: error: VM 'no-such-vm' not found" in capsys.readouterr().err
