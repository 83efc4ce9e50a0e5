"""The identity rule on recorded guest data (tests/data/guest/identity-*.txt): the embedded guest's
sysfs files of the disks on virtio-scsi and virtio-blk, healthy and under a QEMU that gave the disk
under test another WWN or a 24-byte serial (tests/e2e/test_identity.py's wrapper)."""

from __future__ import annotations

from pathlib import Path

import pytest

from model.advertised import Advertised, DeviceProperty
from model.parse.identity_files import IdentityParseError, parse_identity_files, vpd_naa, vpd_serial
from model.rules.identity import (
    ConfiguredIdentity,
    DeviceIdentity,
    device_identity,
    guest_identity,
    judge_identity,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "guest"
GIB = 1 << 30
SCSI_DEV = "/machine/peripheral/ua-vioc-dut00"
BLK_DEV = "/machine/peripheral/ua-vioc-dut02/virtio-backend"
SOURCE = "QEMU 7.2.22, QMP qom-get"


def _seen(name: str) -> str:
    return (DATA / f"identity-{name}.txt").read_text()


def _qemu(path: str, serial: str, wwn: int | None = None) -> DeviceIdentity:
    props = (DeviceProperty(path, "serial", serial),) + (() if wwn is None else (DeviceProperty(path, "wwn", str(wwn)),))
    return device_identity(Advertised(SOURCE, properties=props))


SCSI_DUT = ConfiguredIdentity("vioc-dut0", "5000c50015ea7100", GIB, 36, "virtio-scsi")
BLK_DUT = ConfiguredIdentity("vioc-dut2", None, GIB, 20, "virtio-blk")


def test_the_vpd_pages_of_qemus_scsi_hd_give_its_serial_and_wwn() -> None:
    files = parse_identity_files(_seen("virtio-scsi-dut-sdb-identity"), "sdb")
    assert vpd_serial(files["device/vpd_pg80"]) == "vioc-dut0"
    # page 0x83: an ASCII vendor-specific designator (the serial), then the NAA one (type 3)
    assert vpd_naa(files["device/vpd_pg83"]) == "5000c50015ea7100"
    with pytest.raises(IdentityParseError, match="not VPD page 0x83"):
        vpd_naa(files["device/vpd_pg80"])
    with pytest.raises(IdentityParseError, match="sdb, line 2: 'serial=zz' is not FILE=HEX"):
        parse_identity_files("size=30\nserial=zz\n", "sdb")


def test_healthy_disks_on_both_controllers_pass() -> None:
    scsi = judge_identity([
        ("dut", SCSI_DUT, guest_identity("sdb", _seen("virtio-scsi-dut-sdb-identity")),
         _qemu(SCSI_DEV, "vioc-dut0", 0x5000C50015EA7100)),
        ("scratch", ConfiguredIdentity("vioc-dut1", "5000c50015ea7101", GIB, 36, "virtio-scsi"),
         guest_identity("sda", _seen("virtio-scsi-scratch-sda-identity")), DeviceIdentity())])
    assert scsi.passed, scsi.problems
    assert scsi.lines[0] == ("dut disk sdb on virtio-scsi: serial 'vioc-dut0' (device/vpd_pg80); WWN 5000c50015ea7100 "
                             "(device/vpd_pg83); size 1073741824 bytes; VPD pages 0x80, 0x83")
    assert scsi.properties["dut_wwn_device"] == "5000c50015ea7100"
    blk = judge_identity([("dut", BLK_DUT, guest_identity("vda", _seen("virtio-blk-dut-vda-identity")),
                           _qemu(BLK_DEV, "vioc-dut2"))])
    assert blk.passed and "serial 'vioc-dut2' (serial); no WWN (the bus has none)" in blk.lines[0]


def test_a_device_with_another_wwn_fails_blamed_on_the_hypervisor() -> None:
    seen = guest_identity("sdb", _seen("virtio-scsi-other-wwn-dut-sdb"))
    v = judge_identity([("dut", SCSI_DUT, seen, _qemu(SCSI_DEV, "vioc-dut0", 0x5000C50015EA71FF))])
    assert v.problems == ((f"dut disk sdb: WWN: the suite configured '5000c50015ea7100', the device has "
                          f"'5000c50015ea71ff' (wwn of {SCSI_DEV}, {SOURCE}), the guest sees '5000c50015ea71ff' "
                          "[blame: hypervisor]"),)
    assert v.hint is not None and v.hint.layer == "hypervisor"


def test_a_serial_the_bus_cuts_is_named_as_truncation() -> None:
    seen = guest_identity("vda", _seen("virtio-blk-long-serial-dut-vda"))
    v = judge_identity([("dut", BLK_DUT, seen, _qemu(BLK_DEV, "vioc-dut2-cut-by-the-bus"))])
    assert v.problems == ((f"dut disk vda: serial: the suite configured 'vioc-dut2', the device has "
                          f"'vioc-dut2-cut-by-the-bus' (serial of {BLK_DEV}, {SOURCE}), the guest sees "
                          "'vioc-dut2-cut-by-the': truncated to 20 bytes, what virtio-blk carries of a serial "
                          "[blame: hypervisor]"),)
    # a serial configured longer than the bus carries (the suite refuses it on libvirt) is cut too
    long = ConfiguredIdentity("vioc-dut2-cut-by-the-bus", None, GIB, 20, "virtio-blk")
    v = judge_identity([("dut", long, seen, DeviceIdentity())])
    assert v.problems[0].endswith("truncated to 20 bytes, what virtio-blk carries of a serial [blame: hypervisor]")


def test_what_the_device_has_names_the_layer() -> None:
    seen = guest_identity("sdb", _seen("virtio-scsi-other-wwn-dut-sdb"))
    driver = judge_identity([("dut", SCSI_DUT, seen, _qemu(SCSI_DEV, "vioc-dut0", 0x5000C50015EA7100))])
    assert driver.hint is not None and driver.hint.layer == "guest driver", driver.problems
    unsaid = judge_identity([("dut", SCSI_DUT, seen, DeviceIdentity())])
    assert "the hypervisor did not say what the device has" in unsaid.problems[0]
    assert unsaid.hint is not None and unsaid.hint.layer == "unknown"
    small = judge_identity([("dut", ConfiguredIdentity("vioc-dut0", None, 2 * GIB, 36, "virtio-scsi"), seen,
                             DeviceIdentity())])
    assert small.problems == (("dut disk sdb: size: the suite configured 2147483648 bytes, the guest sees 1073741824 "
                              "[blame: unknown]"),)
