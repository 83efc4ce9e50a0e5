"""Each disk setting asked is checked on the running host before any rule trusts it
(hypervisors/libvirt/settings_check.py), on the live XML and QMP query-block of a real run
(tests/data/disk-settings-*: --controllers virtio-scsi --disk cache=none,aio=native)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.libvirt_python import REASON

pytest.importorskip("libvirt", reason=REASON)  # settings_check reads through libvirt's monitor passthrough

from hypervisors.libvirt.controllers import device_id
from hypervisors.libvirt.settings_check import DiskState, check_disk
from model.disk_settings import DiskSettings
from model.disks import suite_disks
from model.errors import HypervisorError
from model.settings_seen import properties, raise_if_missing
from model.types import DiskSpec

DATA = Path(__file__).parent.parent / "data"
ASKED = DiskSettings(cache="none", aio="native")


def _recorded(disk: DiskSpec, qom: dict[str, object] | None = None) -> DiskState:
    live = ET.fromstring((DATA / "disk-settings-live.xml").read_text())
    blocks: list[dict[str, Any]] = json.loads((DATA / "disk-settings-query-block.json").read_text())["return"]
    dev = device_id(disk)
    live_disk = next((d for d in live.iter("disk") if d.find(f"alias[@name='{dev}']") is not None), None)
    inserted = next(b.get("inserted") for b in blocks if b.get("qdev") == dev)
    return DiskState(live_disk, 0, inserted, qom or {})


def test_what_took_on_the_recorded_run() -> None:
    dut, scratch = suite_disks(("virtio-scsi",), settings={"virtio-scsi": ASKED})
    checked = {dut: check_disk(dut, _recorded(dut)), scratch: check_disk(scratch, _recorded(scratch))}
    assert [(s.key, s.status) for s in checked[dut]] == [("aio", "not-applicable"), ("cache", "took")]
    assert [(s.key, s.status) for s in checked[scratch]] == [("aio", "took"), ("cache", "took")]
    raise_if_missing(checked)  # nothing missing
    props = properties(checked)
    assert props["disk.virtio-scsi.setting.cache"] == (
        "none took: query-block cache writeback=true direct=true no-flush=false")
    assert props["disk.virtio-scsi.scratch.setting.aio"] == "native took: live XML <driver io> native"
    assert props["disk.virtio-scsi.setting.aio"] == "native not-applicable: the null-co latency disk has no file under it"


def test_a_setting_the_host_does_not_show_stops_the_run_with_its_name() -> None:
    """The same recorded host, asked for what it does not show: writethrough (it shows direct, writeback),
    detect-zeroes unmap (off), qcow2 (raw), an iops limit (0) and 4 KiB logical blocks (512)."""
    asked = DiskSettings(cache="writethrough", detect_zeroes="on", format="qcow2", iops=100, logical_block_size=4096)
    scratch = replace(suite_disks(("virtio-scsi",), "file")[1], settings=asked)
    seen = check_disk(scratch, _recorded(scratch, {"logical_block_size": 512, "physical_block_size": 4096}))
    assert {s.key: s.status for s in seen} == {"cache": "missing", "detect_zeroes": "missing", "format": "missing",
                                               "iops": "missing", "logical_block_size": "missing"}
    with pytest.raises(HypervisorError) as e:
        raise_if_missing({scratch: seen})
    said = str(e.value)
    assert "virtio-scsi:file disk 1: cache=writethrough did not take (query-block cache writeback=true direct=true" in said
    assert "format=qcow2 did not take (query-block drv raw)" in said and "iops=100 did not take (query-block iops 0)" in said


def test_device_properties_are_compared_as_the_device_holds_them() -> None:
    s = DiskSettings(serial="VOL", wwn="5000c50015ea7100", iothread="on", logical_block_size=4096)
    dut = replace(suite_disks(("virtio-scsi",))[0], settings=s)
    state = replace(_recorded(dut), domain_iothreads=1,
                    qom={"serial": "VOL-0", "wwn": 0x5000C50015EA7100, "iothread": "/objects/iothread1",
                         "logical_block_size": 4096, "physical_block_size": 4096})
    assert all(x.status == "took" for x in check_disk(dut, state)), check_disk(dut, state)
    unpinned = replace(state, qom={**state.qom, "iothread": ""})
    assert {x.key: x.status for x in check_disk(dut, unpinned)}["iothread"] == "missing"


def test_a_format_on_the_null_co_disk_is_not_applicable() -> None:
    """A profile's format=raw (kubevirt, ovirt) on the latency disk: null-co is no image (query-block
    drv null-co). Seen on a real --profile kubevirt,ovirt run, which the check stopped before."""
    dut = suite_disks(("virtio-scsi",), settings={"virtio-scsi": DiskSettings(format="raw")})[0]
    (seen,) = check_disk(dut, _recorded(dut))
    assert (seen.status, seen.seen) == ("not-applicable", "the null-co latency disk is no image")
