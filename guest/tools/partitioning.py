"""Partition tables: one partition at a chosen start sector, wiping the label, making the
kernel re-read it. The dialogue with the partitioning program is the part that differs between
guests: util-linux's ``sfdisk`` (every systemd distribution: Debian's ``fdisk`` package, RHEL's
util-linux; its script syntax ``label: dos`` / ``start=`` since util-linux 2.26, RHEL 8 has 2.32)
takes the start sector as given, 63 included (checked with util-linux 2.38 on a file); busybox's
``fdisk`` is asked its dialogue. util-linux's own ``fdisk`` refuses a start below 2048 in its
default mode, so it is not a variant.

On a systemd distribution udev opens a disk to probe it whenever its partition table changes,
and the kernel refuses to re-read a table (BLKRRPART) while anyone holds the disk open: the
re-read is retried after ``udevadm settle``, where the guest has udev."""

from __future__ import annotations

from guest.tools.sysfs import Sysfs, valid_disk
from guest.tools.tool import GuestTool
from transport.ssh import CommandResult


def partition_name(disk: str) -> str:
    """sdb -> sdb1, vdb -> vdb1, nvme0n1 -> nvme0n1p1."""
    return f"{disk}p1" if disk[-1].isdigit() else f"{disk}1"


class Partitioning(GuestTool):
    """Interface: ``create_one`` is each variant's own; the rest is common."""

    name = "partitioning"
    install_hint = ("install sfdisk and blockdev (util-linux; Debian's fdisk package), or busybox with its fdisk "
                    "and blockdev applets")

    def create_one(self, disk: str, start_sector: int) -> int:
        """A new DOS label with one primary partition from ``start_sector`` to the end, re-read by
        the kernel; returns the partition's start sector as the guest sees it."""
        raise NotImplementedError

    def wipe(self, disk: str) -> None:
        """Zero the disk's first MiB (any partition table) and have the kernel re-read it."""
        self._run(f"dd if=/dev/zero of=/dev/{valid_disk(disk)} bs=1M count=1 oflag=direct 2>/dev/null")
        self.reread(disk)

    def reread(self, disk: str) -> None:
        """Have the kernel re-read the partition table; up to 5 tries, waiting for udev between them
        (a disk udev still probes is busy: "Device or resource busy")."""
        dev = f"/dev/{valid_disk(disk)}"
        self._run(f"for i in 1 2 3 4; do blockdev --rereadpt {dev} 2>/dev/null && exit 0; "
                  "udevadm settle 2>/dev/null || sleep 1; done; "
                  f"blockdev --rereadpt {dev}")

    def start_sector(self, disk: str) -> int:
        """The start of the disk's first partition, in 512-byte sectors."""
        return int(self.tools.get(Sysfs).read(disk, partition_name(disk) + "/start"))

    def _made(self, disk: str, program: str, said: CommandResult) -> int:
        """After ``program`` wrote the table: the kernel re-reads it, and the start sector it then
        sees is the verdict (the program's own status is not: it may complain that the kernel kept
        the old table). No partition is an error with what the program said."""
        self.reread(disk)
        try:
            return self.start_sector(disk)
        except (RuntimeError, ValueError) as e:
            raise RuntimeError(f"{program} made no partition on /dev/{disk} ({e}); {program} said: "
                               f"{said.stdout.strip()[-800:] or '(nothing)'}") from e


class FdiskPartitioning(Partitioning):
    """fdisk's dialogue as busybox's fdisk asks it: o (new label), n p 1 <start> <default end>, w."""

    programs = ("fdisk", "blockdev")

    def create_one(self, disk: str, start_sector: int) -> int:
        dev = f"/dev/{valid_disk(disk)}"
        said = self._run(f"printf 'o\\nn\\np\\n1\\n{int(start_sector)}\\n\\nw\\n' | fdisk {dev} 2>&1", check=False)
        return self._made(disk, "fdisk", said)


class SfdiskPartitioning(Partitioning):
    """util-linux's sfdisk, fed a script: a DOS label and one Linux partition from the start sector."""

    programs = ("sfdisk", "blockdev")

    def create_one(self, disk: str, start_sector: int) -> int:
        dev = f"/dev/{valid_disk(disk)}"
        said = self._run(f"printf 'label: dos\\nstart=%d, type=83\\n' {int(start_sector)} | "
                         f"sfdisk --no-reread --no-tell-kernel -q {dev} 2>&1", check=False)
        return self._made(disk, "sfdisk", said)


Partitioning.variants = (SfdiskPartitioning, FdiskPartitioning)
