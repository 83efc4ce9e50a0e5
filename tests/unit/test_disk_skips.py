"""What a guest's kernel lacks is a skip with its reason, never a crash (measure/disk.py's
prepare_disk against a scripted guest that answers with what the embedded guest printed,
tests/data/guest/facts/): a controller whose driver the kernel has not (Debian's cloud kernel and
mptsas), a limit the kernel does not show, a fault whose sysfs file it does not have."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

import pytest

from guest.tools.disk_survey import FOUND, KEPT, LIMITS
from guest.tools.facts import GuestFacts
from guest.tools.mkfs import Filesystem, FilesystemUnsupported
from guest.tools.partitioning import Partitioning
from guest.tools.tool import GuestTools
from hypervisors.base import Guest
from measure.disk import DiskSkip, DriverMissing, FaultNotApplicable, GuestDisk, SettingMissing, prepare_disk
from model.configuration import Configuration
from model.device_limits import ConfiguredLimits
from model.errors import HypervisorError
from model.faults import FAULTS
from model.parse.guestfacts import DiskFacts
from model.types import AttachedDisk, DiskSpec, GuestDiskId, SshEndpoint
from tests.unit.fake_shell import DATA, FakeBackend, FakeShell, Reply
from transport.ssh import GuestCommandError

FACTS = DATA / "guest" / "facts"
CLOUD_KERNEL = "6.1.0-28-cloud-amd64"
#: What DRIVER_SCRIPT prints on a kernel that has /lib/modules/<release> and its modules.builtin
#: but no mptsas anywhere (as Debian's cloud flavour: its config has no CONFIG_FUSION_SAS).
NO_MPTSAS = f"kernel={CLOUD_KERNEL}\nmodules_dir=1\nbuiltin_list=1\n"


class FakeLibvirt(FakeBackend):
    """A host whose controllers are libvirt's (the controller -> guest driver table)."""

    name = "libvirt"
    controllers: ClassVar[dict[str, str]] = {}


def guest_shell(found: str = "sdb", driver: str = NO_MPTSAS, limits: str | None = None,
                has_file: bool = True, extra: list[tuple[str, Callable[[str], Reply]]] | None = None,
                facts: str | None = None) -> FakeShell:
    """The guest as the survey of a disk (guest/tools/disk_survey.py) and each tool's own command
    see it: ``found`` the disks with the serial, ``limits`` and ``facts`` what their scripts print."""
    lim = limits if limits is not None else (DATA / "guest" / "limits-virtio-scsi.txt").read_text()
    said = facts if facts is not None else (FACTS / "disk-mptsas1068.txt").read_text()

    def survey(_: str) -> str:
        read = f"{LIMITS}\n{lim}\n{KEPT}\n{said}" if len(found.split()) == 1 else ""
        return f"{FOUND}\n{found}\n{read}"

    return FakeShell(has={"fio"}, handlers=[
        *(extra or []),
        (FOUND, survey),
        (r"for f in serial device/serial", lambda c: found),
        (r"/dev/disk/by-id", lambda c: ""),
        (r"^ls /sys/block$", lambda c: "sda\nvda\n"),
        (r"@@ os-release", lambda c: (FACTS / "system.txt").read_text()),
        (r'echo "@@ disk', lambda c: said),
        (r"modules\.builtin", lambda c: driver),
        (r"echo name=", lambda c: lim),
        (r"^test -e ", lambda c: (0 if has_file else 1, "", "")),
        (r"^echo .* > /sys/block/", lambda c: (0, "", "")),
    ])


def prepare(shell: FakeShell, controller: str = "mptsas1068", faults: tuple[str, ...] = (),
            on_found: Callable[[DiskFacts], None] | None = None) -> GuestDisk:
    guest = Guest("vioconform-7", SshEndpoint("127.0.0.1", 22, "root", Path("key"), "ssh-ed25519 AAAA"), (), "tcg")
    spec = DiskSpec(controller)
    attached = AttachedDisk(spec, "x", ConfiguredLimits(queue_depth=64), GuestDiskId("serial", spec.serial))
    return prepare_disk(guest, FakeLibvirt(), GuestTools(shell, guest.name), attached, Configuration("libvirt", controller),
                        [FAULTS[f] for f in faults], on_found=on_found)


def test_a_controller_whose_driver_the_kernel_lacks_is_a_skip_that_names_the_module() -> None:
    with pytest.raises(DriverMissing) as e:
        prepare(guest_shell(found=""))
    assert str(e.value).startswith(f"the guest's kernel {CLOUD_KERNEL} has no mptsas driver for mptsas1068 (not "
                                   f"loaded, not in modules.builtin, no mptsas.ko under /lib/modules/{CLOUD_KERNEL})")
    assert isinstance(e.value, DiskSkip)


@pytest.mark.parametrize(("why", "driver"), [
    ("the driver is there, so the disk's absence has another cause", (FACTS / "driver-mptsas.txt").read_text()),
    ("no /lib/modules: the guest cannot rule the driver out", f"kernel={CLOUD_KERNEL}\n"),
])
def test_a_missing_disk_whose_driver_exists_or_may_exist_stays_an_error(why: str, driver: str) -> None:
    with pytest.raises(HypervisorError, match=r"the guest shows 0 disks with serial vioc-dut0"):
        prepare(guest_shell(found="", driver=driver))


def test_a_controller_without_a_known_driver_is_not_looked_up() -> None:
    shell = guest_shell(found="")
    with pytest.raises(HypervisorError):
        prepare(shell, controller="floppy")
    assert not any("builtin_list=1" in c for c in shell.commands)  # DRIVER_SCRIPT's


def test_a_disk_found_by_udevs_by_id_link_when_sysfs_shows_no_serial() -> None:
    shell = guest_shell(found="", extra=[(r"/dev/disk/by-id", lambda c: "sdb\n")])
    assert prepare(shell).kernel_name == "sdb"


def test_a_limit_the_kernel_does_not_show_is_a_skip_naming_it() -> None:
    text = "\n".join(line for line in (DATA / "guest" / "limits-virtio-scsi.txt").read_text().splitlines()
                     if not line.startswith("discard_max_bytes="))
    with pytest.raises(SettingMissing, match=r"^sdb: guest limits: sysfs gave no discard_max_bytes .*the guest's "
                                             r"kernel 6\.1\.0-56-amd64 lacks a setting the rules read"):
        prepare(guest_shell(limits=text))


def test_a_fault_whose_sysfs_file_the_kernel_lacks_is_a_skip() -> None:
    with pytest.raises(FaultNotApplicable, match=r"^--inject io-breakup: the guest's kernel 6\.1\.0-56-amd64 has no "
                                                 r"/sys/block/sdb/queue/max_sectors_kb: the fault cannot apply"):
        prepare(guest_shell(has_file=False), faults=("io-breakup",))


def test_the_disks_facts_are_given_before_a_fault_can_skip_it() -> None:
    seen: list[DiskFacts] = []
    with pytest.raises(FaultNotApplicable):
        prepare(guest_shell(has_file=False), faults=("io-breakup",), on_found=seen.append)
    assert [f.name for f in seen] == ["sdb"] and seen[0].boot["queue_depth"] == "64"


def test_facts_the_guest_cannot_give_never_stop_the_disk() -> None:
    assert prepare(guest_shell(facts="")).boot_facts is None  # the survey printed none
    shell = guest_shell(found="", extra=[(r"/dev/disk/by-id", lambda c: "sdb\n"),
                                         (r'^\s*d=/sys/block/sdb\necho "@@ disk', lambda c: (1, "", "sh: readlink: not found"))])
    assert prepare(shell).boot_facts is None  # found by udev's link: its facts' own command failed


def test_a_filesystem_the_kernel_cannot_mount_is_named_and_an_xfs_only_guest_makes_xfs() -> None:
    said = "mount: /mnt/vioc-align: unknown filesystem type 'ext2'."
    shell = FakeShell(has={"mke2fs", "mkfs.xfs"}, handlers=[
        (r"^mkdir -p .* mount ", lambda c: (32, "", said)), (r"^uname -r$", lambda c: f"{CLOUD_KERNEL}\n")])
    fs = GuestTools(shell).get(Filesystem)
    assert fs.kind == "ext2"  # e2fsprogs first: the rule's thresholds were measured on ext2
    with pytest.raises(FilesystemUnsupported, match=rf"^the guest's kernel {CLOUD_KERNEL} cannot mount ext2 \({said}\)"):
        fs.mount("/dev/sdb1", "/mnt/vioc-align")
    xfs_only = FakeShell(has={"mkfs.xfs"}, handlers=[(r"^mkfs\.xfs ", lambda c: "")])
    fs = GuestTools(xfs_only).get(Filesystem)
    fs.make("/dev/sdb1", 4096)
    assert fs.kind == "xfs" and xfs_only.commands[-1] == "mkfs.xfs -q -f -b size=4096 /dev/sdb1"


def test_sfdisk_is_given_the_start_sector_as_is_and_the_reread_waits_for_udev() -> None:
    """The table written, re-read and its start read back in one guest command (one round trip, 0.3 s
    through a non-root login's sudo under TCG)."""
    written = "--vioconform-partition-written--\n"
    shell = FakeShell(has={"sfdisk", "blockdev"}, handlers=[(r"\| sfdisk ", lambda c: f"{written}start=63\n")])
    assert GuestTools(shell).get(Partitioning).create_one("sdb", 63) == 63
    assert len(shell.commands) == 2  # the program lookup, then one command
    assert shell.commands[1].startswith("printf 'label: dos\\nstart=%d, type=83\\n' 63 | sfdisk --no-reread "
                                        "--no-tell-kernel -q /dev/sdb 2>&1\n")
    assert "udevadm settle" in shell.commands[1] and "< /sys/block/sdb/sdb1/start" in shell.commands[1]
    said = "Checking that no-one is using this disk right now ... FAILED\n"
    none = FakeShell(has={"sfdisk", "blockdev"}, handlers=[(r"\| sfdisk ", lambda c: f"{said}{written}start=\n")])
    with pytest.raises(RuntimeError, match=r"^sfdisk made no partition on /dev/sdb \(no /sys/block/sdb/sdb1/start\); "
                                           r"sfdisk said: Checking that no-one"):
        GuestTools(none).get(Partitioning).create_one("sdb", 63)
    busy = FakeShell(has={"sfdisk", "blockdev"}, handlers=[
        (r"\| sfdisk ", lambda c: (1, written, "blockdev: ioctl error on BLKRRPART: Device or resource busy\n"))])
    with pytest.raises(GuestCommandError, match="BLKRRPART"):
        GuestTools(busy).get(Partitioning).create_one("sdb", 63)


def test_a_table_made_after_a_wipe_is_one_command_and_a_failed_wipe_stops_it() -> None:
    """alignment's fresh table: the first MiB zeroed, the table written, re-read and its start read back,
    in one guest command; the dd's failure is the command's, before the table program runs."""
    written = "--vioconform-partition-written--\n"
    shell = FakeShell(has={"sfdisk", "blockdev"}, handlers=[(r"\| sfdisk ", lambda c: f"{written}start=2048\n")])
    assert GuestTools(shell).get(Partitioning).create_one("sdb", 2048, wipe_first=True) == 2048
    assert len(shell.commands) == 2  # the program lookup, then one command
    assert shell.commands[1].startswith("dd if=/dev/zero of=/dev/sdb bs=1M count=1 oflag=direct 2>/dev/null || "
                                        "exit $?\nprintf 'label: dos")
    failed = FakeShell(has={"sfdisk", "blockdev"}, handlers=[(r"^dd ", lambda c: (1, "", "dd: /dev/sdb: I/O error\n"))])
    with pytest.raises(GuestCommandError, match="dd: /dev/sdb: I/O error"):
        GuestTools(failed).get(Partitioning).create_one("sdb", 2048, wipe_first=True)


def test_a_wipe_zeroes_the_label_and_rereads_it_in_one_command() -> None:
    shell = FakeShell(has={"fdisk", "blockdev"}, handlers=[(r"^dd if=/dev/zero of=/dev/vdb ", lambda c: "")])
    GuestTools(shell).get(Partitioning).wipe("vdb")
    assert len(shell.commands) == 2 and "&& ( for i in 1 2 3 4; do blockdev --rereadpt /dev/vdb" in shell.commands[1]


def test_a_missing_disk_whose_driver_is_not_loaded_says_so() -> None:
    not_loaded = f"kernel={CLOUD_KERNEL}\nmodules_dir=1\nbuiltin_list=1\nfile=/lib/modules/k/mptsas.ko\n"
    with pytest.raises(HypervisorError, match=r"its driver mptsas is in the guest's kernel but not loaded"):
        prepare(guest_shell(found="", driver=not_loaded))


def test_a_module_is_asked_about_once_per_guest() -> None:
    """The scratch disk shares its controller's drivers: modinfo costs 0.1-0.5 s a module under TCG."""
    first = (FACTS / "disk-virtio-scsi.txt").read_text()
    # what the guest prints for the second disk when every module is known: the walk, no module sections
    second = first.split("@@ module")[0].replace("@@ disk sda", "@@ disk sdb")
    answers = iter([first, second])
    shell = FakeShell(handlers=[(r'echo "@@ disk', lambda c: next(answers))])
    facts = GuestTools(shell).get(GuestFacts)
    a, b = facts.disk("sda"), facts.disk("sdb")
    assert 'seen="  "' in shell.commands[0] and 'seen=" sd_mod virtio_pci virtio_scsi "' in shell.commands[1]
    assert b.name == "sdb" and b.modules == a.modules and set(b.modules) == {"sd_mod", "virtio_scsi", "virtio_pci"}
