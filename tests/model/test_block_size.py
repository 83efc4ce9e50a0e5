"""The block-size rule on recorded guest data: fio's JSON of the rule's three O_DIRECT reads in the
embedded guest (tests/data/guest/block-size-*.json: the 512e scratch disk on virtio-scsi, and the 4Kn disk
under test with ``--disk logical_block_size=4096``), and the recorded probe-time limits of virtio-scsi's
disk (limits-virtio-scsi.txt: 512/512)."""

from __future__ import annotations

import dataclasses
import errno
from pathlib import Path

from model.advertised import Advertised
from model.device_limits import ConfiguredLimits, parse_guest_limits
from model.rules.block_size import DirectProbe, judge_block_size, probes_for, probes_from_fio

DATA = Path(__file__).resolve().parents[1] / "data" / "guest"
GUEST = parse_guest_limits((DATA / "limits-virtio-scsi.txt").read_text())
ASKED = ConfiguredLimits(queue_depth=128, logical_block_bytes=512, physical_block_bytes=512)
QOM = "logical_block_size 512 of /machine/peripheral/ua-vioc-dut00"


def _probes(name: str, logical: int) -> list[DirectProbe]:
    return probes_from_fio((DATA / f"block-size-{name}-direct-reads.json").read_text(), probes_for(logical), name)


def _said(physical: int) -> Advertised:
    return Advertised("QEMU 7.2.22, QMP qom-get", logical_block_bytes=512, physical_block_bytes=physical,
                      said_by={"logical_block_bytes": QOM,
                               "physical_block_bytes": f"physical_block_size {physical} of /machine/peripheral/ua-vioc-dut00"})


def test_the_guest_refuses_reads_below_the_logical_block_512e_and_4kn() -> None:
    scsi_512e = _probes("virtio-scsi-scratch-sdb", 512)
    assert [(p.kind, p.offset_bytes, p.length_bytes, p.error) for p in scsi_512e] == [
        ("aligned", 0, 512, 0), ("short", 0, 256, errno.EINVAL), ("offset", 256, 512, errno.EINVAL)]
    kn = _probes("4kn-virtio-scsi-dut-sda", 4096)
    assert [(p.offset_bytes, p.length_bytes, p.ok, p.refused_einval) for p in kn] == [
        (0, 4096, True, False), (0, 2048, False, True), (2048, 4096, False, True)]
    scratch = dataclasses.replace(GUEST, physical_block_size=4096)
    v = judge_block_size([("dut", ASKED, GUEST, _said(512), kn[:1] + scsi_512e[1:]),
                          ("scratch", dataclasses.replace(ASKED, physical_block_bytes=4096), scratch, _said(4096),
                           scsi_512e)])
    assert v.passed, v.problems
    assert v.lines[1] == ("scratch disk sda (sd): logical block size 512; physical block size 4096; O_DIRECT 512 B at "
                          "0: read; O_DIRECT 256 B at 0: refused (EINVAL: Invalid argument); O_DIRECT 512 B at 256: "
                          "refused (EINVAL: Invalid argument)")
    assert v.properties["scratch_direct_short"] == "EINVAL: Invalid argument"


def test_a_read_below_the_logical_block_let_through_is_the_guest_drivers() -> None:
    let_through = [DirectProbe(k, o, n) for k, o, n in probes_for(512)]
    v = judge_block_size([("dut", ASKED, GUEST, _said(512), let_through)])
    assert v.problems == (
        ("dut disk sda: an O_DIRECT read of 256 bytes at offset 0 (size below the logical block of 512) read, where "
        "the guest must refuse it with EINVAL [blame: guest driver]"),
        ("dut disk sda: an O_DIRECT read of 512 bytes at offset 256 (offset below the logical block of 512) read, where "
        "the guest must refuse it with EINVAL [blame: guest driver]"))
    assert v.hint is not None and v.hint.layer == "guest driver"
    refused = judge_block_size([("dut", ASKED, GUEST, None, [DirectProbe("aligned", 0, 512, errno.EIO)])])
    assert refused.problems[0].startswith("dut disk sda: an O_DIRECT read of 512 bytes at offset 0 (one logical "
                                          "block of 512) was refused (EIO: Input/output error)")


def test_a_device_advertising_another_physical_block_is_the_hypervisors() -> None:
    seen = dataclasses.replace(GUEST, physical_block_size=4096)
    v = judge_block_size([("dut", ASKED, seen, _said(4096), _probes("virtio-scsi-scratch-sdb", 512))])
    assert v.problems == (("dut disk sda: physical block size: the suite asked for 512, the device advertises 4096 "
                          "(physical_block_size 4096 of /machine/peripheral/ua-vioc-dut00), the guest sees 4096 "
                          "[blame: hypervisor]"),)
