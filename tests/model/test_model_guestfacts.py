"""What was tested, parsed from what guests printed: the embedded guest (real, recorded through
guest/tools/facts.py's scripts on 5 controllers), this machine's own Debian 12 with a 6.18 kernel whose
drivers are built in (real), and a RHEL 8-style 4.18 guest (synthetic, to kmod's modinfo format)."""

from __future__ import annotations

from pathlib import Path

import pytest

from model.errors import ParseError
from model.parse.guestfacts import (
    EMBEDDED_OS,
    ModuleFacts,
    disk_properties,
    image_properties,
    missing_driver_properties,
    parse_disk_facts,
    parse_driver_presence,
    parse_os_release,
    parse_system_facts,
    scheduler_in_use,
)

DATA = Path(__file__).resolve().parents[1] / "data"
FACTS = DATA / "guest" / "facts"
KERNEL = "6.1.0-56-amd64"

#: Synthetic: a RHEL 8 guest's answer (kernel 4.18.0-513.5.1.el8_9.x86_64), written to the format of
#: kmod's modinfo ("filename: (builtin)" for a built-in module) and sysfs as 4.18 shows it: no
#: queue/rq_affinity value differs, write_cache present (4.7+), scheduler mq-deadline (blk-mq).
RHEL8_DISK = """\
@@ disk sdb
queue/scheduler=[mq-deadline] kyber bfq none
queue/nr_requests=256
queue/read_ahead_kb=4096
device/queue_depth=128
queue/max_sectors_kb=1280
queue/write_cache=write back
queue/nomerges=0
queue/rq_affinity=1
@@ drivers
sd sd_mod
virtio_scsi virtio_scsi
virtio-pci virtio_pci
@@ module sd_mod
version=
srcversion=
builtin=1
@@ modinfo sd_mod
filename:       (builtin)
description:    SCSI disk (sd) driver
license:        GPL
@@ module virtio_scsi
version=
srcversion=
builtin=0
@@ modinfo virtio_scsi
filename:       /lib/modules/4.18.0-513.5.1.el8_9.x86_64/kernel/drivers/scsi/virtio_scsi.ko.xz
description:    Virtio SCSI HBA driver
license:        GPL
rhelversion:    8.9
srcversion:     8DB4A6F1C8D3C3F4A15E0D9
depends:
intree:         Y
name:           virtio_scsi
vermagic:       4.18.0-513.5.1.el8_9.x86_64 SMP mod_unload modversions
@@ module virtio_pci
version=1
srcversion=
builtin=1
@@ modinfo virtio_pci
filename:       (builtin)
version:        1
"""


def read(name: str) -> str:
    return (FACTS / name).read_text()


def test_the_embedded_guest_says_what_it_is_without_os_release() -> None:
    s = parse_system_facts(read("system.txt"))
    assert (s.os_release, s.os_id, s.kernel, s.embedded_recipe) == (EMBEDDED_OS, "embedded", KERNEL,
                                                                    "56a4ad75000f8008")
    assert s.properties() == {"guest.os_release": EMBEDDED_OS, "guest.os_id": "embedded",
                              "guest.os_version_id": "none", "guest.kernel": KERNEL}


def test_a_systemd_distribution_is_named_by_its_os_release() -> None:
    s = parse_system_facts((DATA / "facts-host-6.18-system.txt").read_text())
    assert (s.os_release, s.os_id, s.os_version_id, s.kernel, s.embedded_recipe) == (
        "Debian GNU/Linux 12 (bookworm)", "debian", "12", "6.18.44-fc-v669", "")


def test_os_release_values_are_unquoted_as_a_shell_would() -> None:
    assert parse_os_release('NAME="Red Hat Enterprise Linux"\nVERSION_ID="8.9"\nID=rhel\n# c\nPRETTY_NAME=\'RHEL 8\'\n'
                            "ID_LIKE=\"fedora\"\nbroken line\n") == {
        "NAME": "Red Hat Enterprise Linux", "VERSION_ID": "8.9", "ID": "rhel", "PRETTY_NAME": "RHEL 8",
        "ID_LIKE": "fedora"}
    s = parse_system_facts('@@ os-release\nNAME="Alpine"\nVERSION="3.20"\n@@ uname\n6.6.1\n@@ vioconform-image\n')
    assert s.os_release == "Alpine 3.20"  # no PRETTY_NAME


def test_no_os_release_and_not_embedded_is_unknown_not_an_error() -> None:
    s = parse_system_facts("@@ os-release\n@@ uname\n5.14.0\n@@ vioconform-image\n")
    assert s.os_id == "unknown" and s.os_release.startswith("unknown")


@pytest.mark.parametrize("text", ["", "junk\n@@ uname\n6.1\n", "@@ os-release\nID=x\n@@ uname\n\n"])
def test_system_facts_without_a_kernel_are_a_parse_error(text: str) -> None:
    with pytest.raises(ParseError):
        parse_system_facts(text)


def test_scheduler_is_the_bracketed_one() -> None:
    assert scheduler_in_use("[none] mq-deadline ") == "none"
    assert scheduler_in_use("none [mq-deadline] kyber bfq") == "mq-deadline"
    assert scheduler_in_use("none") == "none"  # a queue without a choice


@pytest.mark.parametrize(("controller", "name", "chain", "boot"), [
    ("virtio-scsi", "sda", ["sd", "virtio_scsi", "virtio-pci"],
     {"scheduler": "none", "nr_requests": "256", "queue_depth": "128", "max_sectors_kb": "1280"}),
    ("virtio-blk", "vda", ["virtio_blk", "virtio-pci"],
     {"scheduler": "none", "nr_requests": "256", "queue_depth": None, "max_sectors_kb": "1280"}),
    ("nvme", "nvme0n1", ["nvme"], {"scheduler": "none", "nr_requests": "1023", "queue_depth": None}),
    ("ahci", "sdc", ["sd", "ahci"], {"scheduler": "mq-deadline", "nr_requests": "64", "queue_depth": "32",
                                     "max_sectors_kb": "128"}),
    ("mptsas1068", "sdb", ["sd", "mptsas"], {"scheduler": "mq-deadline", "nr_requests": "236", "queue_depth": "64"}),
])
def test_recorded_disks_of_the_embedded_guest(controller: str, name: str, chain: list[str],
                                              boot: dict[str, str | None]) -> None:
    f = parse_disk_facts(read(f"disk-{controller}.txt"))
    assert f.name == name and [d.driver for d in f.drivers] == chain
    assert {k: f.boot[k] for k in boot} == boot
    assert f.boot["read_ahead_kb"] == "128" and f.boot["write_cache"] == "write back"


def test_driver_versions_as_the_embedded_guest_reported_them() -> None:
    mpt = parse_disk_facts(read("disk-mptsas1068.txt"))
    assert mpt.modules["mptsas"].describe(KERNEL) == "3.04.20 srcversion 016480FA0F81FEC28B029AF"
    scsi = parse_disk_facts(read("disk-virtio-scsi.txt"))
    # virtio_scsi has no MODULE_VERSION and (without CONFIG_MODULE_SRCVERSION_ALL) no srcversion:
    # it is the kernel's own, and busybox's modinfo says "intree: Y"
    assert scsi.modules["virtio_scsi"].describe(KERNEL) == f"in-tree {KERNEL}"
    assert scsi.modules["virtio_pci"].describe(KERNEL) == "1 srcversion 2526A0E335FCA2331138131"
    nvme = parse_disk_facts(read("disk-nvme.txt"))
    assert nvme.modules["nvme"].version == "1.0"


def test_properties_of_a_disk_have_every_key_whatever_the_guest_showed() -> None:
    blk = disk_properties("virtio-blk", "dut", parse_disk_facts(read("disk-virtio-blk.txt")), KERNEL, "virtio_blk")
    assert blk == {
        "disk.virtio-blk.driver": "virtio_blk", "disk.virtio-blk.driver_module": "virtio_blk",
        "disk.virtio-blk.driver_version": f"in-tree {KERNEL}",
        "disk.virtio-blk.driver_chain": f"virtio_blk (in-tree {KERNEL}), virtio-pci (1 srcversion 2526A0E335FCA2331138131)",
        "disk.virtio-blk.kernel_name": "vda",
        "disk.virtio-blk.boot.scheduler": "none", "disk.virtio-blk.boot.nr_requests": "256",
        "disk.virtio-blk.boot.read_ahead_kb": "128", "disk.virtio-blk.boot.queue_depth": "none",
        "disk.virtio-blk.boot.max_sectors_kb": "1280", "disk.virtio-blk.boot.write_cache": "write back",
        "disk.virtio-blk.boot.nomerges": "0", "disk.virtio-blk.boot.rq_affinity": "1"}
    scsi = disk_properties("virtio-scsi", "scratch", parse_disk_facts(read("disk-virtio-scsi.txt")), KERNEL,
                           "virtio_scsi")
    assert scsi["disk.virtio-scsi.driver"] == "virtio_scsi"  # the controller's, not sd's
    assert scsi["disk.virtio-scsi.scratch.boot.queue_depth"] == "128"
    assert "disk.virtio-scsi.boot.queue_depth" not in scsi  # the scratch disk's own keys
    assert {k.rsplit(".", 1)[0] for k in scsi if ".boot." in k} == {"disk.virtio-scsi.scratch.boot"}


def test_a_missing_driver_has_the_same_keys_as_a_found_one() -> None:
    found = disk_properties("mptsas1068", "dut", parse_disk_facts(read("disk-mptsas1068.txt")), KERNEL, "mptsas")
    missing = missing_driver_properties("mptsas1068", "mptsas")
    assert set(missing) == set(found) and missing["disk.mptsas1068.driver"] == "missing: mptsas"
    assert found["disk.mptsas1068.driver_version"] == "3.04.20 srcversion 016480FA0F81FEC28B029AF"


def test_the_controller_driver_without_a_table_entry_is_the_first_non_generic_one() -> None:
    f = parse_disk_facts(read("disk-virtio-scsi.txt"))
    ctl = f.controller_driver()
    assert ctl is not None and ctl.driver == "virtio_scsi"


def test_a_rhel8_guest_with_kmod_and_built_in_modules() -> None:
    f = parse_disk_facts(RHEL8_DISK)
    k = "4.18.0-513.5.1.el8_9.x86_64"
    assert f.modules["sd_mod"].builtin and f.modules["sd_mod"].describe(k) == f"built-in {k}"
    assert f.modules["virtio_scsi"].describe(k) == "srcversion 8DB4A6F1C8D3C3F4A15E0D9"  # from modinfo
    assert f.modules["virtio_pci"].describe(k) == "1"
    p = disk_properties("virtio-scsi", "dut", f, k, "virtio_scsi")
    assert p["disk.virtio-scsi.boot.scheduler"] == "mq-deadline" and p["disk.virtio-scsi.boot.read_ahead_kb"] == "4096"


def test_a_kernel_with_every_driver_built_in_and_no_modules_directory() -> None:
    """This machine's own kernel (6.18, Firecracker-style): drivers without a module link, no modinfo answer."""
    f = parse_disk_facts((DATA / "facts-host-6.18-disk-vda.txt").read_text())
    assert [(d.driver, d.module) for d in f.drivers] == [("virtio_blk", ""), ("virtio-pci", "")]
    assert f.boot["scheduler"] == "mq-deadline" and f.boot["read_ahead_kb"] == "8192"
    p = disk_properties("virtio-blk", "dut", f, "6.18.44-fc-v669", "virtio_blk")
    assert p["disk.virtio-blk.driver_module"] == "none"
    assert p["disk.virtio-blk.driver_version"] == "unversioned, kernel 6.18.44-fc-v669"


def test_module_versions_from_sysfs_win_over_modinfo() -> None:
    text = "@@ disk vda\n@@ drivers\nx x\n@@ module x\nversion=2.0\n@@ modinfo x\nversion: 1.0\nintree: N\n"
    assert parse_disk_facts(text).modules["x"] == ModuleFacts("x", "2.0", "", False, False, "")
    out_of_tree = ModuleFacts("y", intree=False, filename="/lib/modules/k/extra/y.ko")
    assert out_of_tree.describe("k") == "out-of-tree, unversioned (/lib/modules/k/extra/y.ko) on k"


def test_disk_facts_without_a_disk_section_are_a_parse_error() -> None:
    with pytest.raises(ParseError, match="no disk section"):
        parse_disk_facts("@@ drivers\nsd sd_mod\n")


@pytest.mark.parametrize(("file", "present", "known"), [
    ("driver-mptsas.txt", True, True), ("driver-nvme.txt", True, True), ("driver-sd_mod.txt", True, True),
    ("driver-nosuchdrv.txt", False, True), ("driver-qla2xxx.txt", False, True),
])
def test_driver_presence_in_the_embedded_guest(file: str, present: bool, known: bool) -> None:
    p = parse_driver_presence(read(file), file.removeprefix("driver-").removesuffix(".txt"))
    assert (p.present, p.known, p.kernel) == (present, known, KERNEL)


def test_a_driver_the_guest_cannot_rule_out_is_not_called_missing() -> None:
    """No /lib/modules/<release> (this machine's kernel): absence cannot be trusted."""
    p = parse_driver_presence((DATA / "facts-host-6.18-driver-mptsas.txt").read_text(), "mptsas")
    assert not p.present and not p.known
    built_in = parse_driver_presence("kernel=6.1.0-28-cloud-amd64\nmodules_dir=1\nbuiltin_list=1\nbuiltin=1\n", "sd_mod")
    assert built_in.present
    with pytest.raises(ParseError, match="no kernel release"):
        parse_driver_presence("", "mptsas")


def test_image_properties() -> None:
    assert image_properties("embedded:56a4ad75000f8008", "initramfs") == {
        "image": "embedded:56a4ad75000f8008", "image.format": "initramfs", "image.sha256": "none",
        "image.virtual_size_bytes": "none"}
    assert image_properties("/i/d.qcow2", "qcow2", "ab" * 32, 2 << 30)["image.virtual_size_bytes"] == str(2 << 30)
