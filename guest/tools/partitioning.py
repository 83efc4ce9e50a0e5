"""Partition tables: one partition at a chosen start sector, wiping the label, making the
kernel re-read it. The dialogue with the partitioning program is the part that differs between
guests (busybox's ``fdisk`` here; ``sfdisk`` or ``parted`` would be further variants)."""

from __future__ import annotations

from guest.tools.base import GuestTool
from guest.tools.sysfs import Sysfs, valid_disk


def partition_name(disk: str) -> str:
    """sdb -> sdb1, vdb -> vdb1, nvme0n1 -> nvme0n1p1."""
    return f"{disk}p1" if disk[-1].isdigit() else f"{disk}1"


class Partitioning(GuestTool):
    """Interface: ``create_one`` is each variant's own; the rest is common."""

    name = "partitioning"
    install_hint = "install fdisk and blockdev (util-linux, or busybox with those applets)"

    def create_one(self, disk: str, start_sector: int) -> int:
        """A new DOS label with one primary partition from ``start_sector`` to the end, re-read by
        the kernel; returns the partition's start sector as the guest sees it."""
        raise NotImplementedError

    def wipe(self, disk: str) -> None:
        """Zero the disk's first MiB (any partition table) and have the kernel re-read it."""
        self._run(f"dd if=/dev/zero of=/dev/{valid_disk(disk)} bs=1M count=1 oflag=direct 2>/dev/null")
        self.reread(disk)

    def reread(self, disk: str) -> None:
        self._run(f"blockdev --rereadpt /dev/{valid_disk(disk)}")

    def start_sector(self, disk: str) -> int:
        """The start of the disk's first partition, in 512-byte sectors."""
        return int(self.tools.get(Sysfs).read(disk, partition_name(disk) + "/start"))


class FdiskPartitioning(Partitioning):
    """fdisk's dialogue as busybox's fdisk asks it: o (new label), n p 1 <start> <default end>, w."""

    programs = ("fdisk", "blockdev")

    def create_one(self, disk: str, start_sector: int) -> int:
        dev = f"/dev/{valid_disk(disk)}"
        # fdisk's own status is not its verdict (it may complain that the kernel kept the old
        # table): the start sector the kernel sees after the re-read is.
        said = self._run(f"printf 'o\\nn\\np\\n1\\n{int(start_sector)}\\n\\nw\\n' | fdisk {dev} 2>&1", check=False)
        self.reread(disk)
        try:
            return self.start_sector(disk)
        except (RuntimeError, ValueError) as e:
            raise RuntimeError(f"fdisk made no partition on {dev} ({e}); fdisk said: "
                               f"{said.stdout.strip()[-800:] or '(nothing)'}") from e


Partitioning.variants = (FdiskPartitioning,)
