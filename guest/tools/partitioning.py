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
from transport.ssh import GuestCommandError


def partition_name(disk: str) -> str:
    """sdb -> sdb1, vdb -> vdb1, nvme0n1 -> nvme0n1p1."""
    return f"{disk}p1" if disk[-1].isdigit() else f"{disk}1"


class Partitioning(GuestTool):
    """Interface: ``create_one`` is each variant's own; the rest is common."""

    name = "partitioning"
    install_hint = ("install sfdisk and blockdev (util-linux; Debian's fdisk package), or busybox with its fdisk "
                    "and blockdev applets")

    def create_one(self, disk: str, start_sector: int, wipe_first: bool = False) -> int:
        """A new DOS label with one primary partition from ``start_sector`` to the end, re-read by
        the kernel; returns the partition's start sector as the guest sees it. ``wipe_first``: the
        disk's first MiB zeroed first (:meth:`wipe`'s), in the same guest command."""
        raise NotImplementedError

    def wipe(self, disk: str) -> None:
        """Zero the disk's first MiB (any partition table) and have the kernel re-read it (one command)."""
        self._run(f"{_zero_command(disk)} && ( {self._reread_command(disk)} )")

    def reread(self, disk: str) -> None:
        """Have the kernel re-read the partition table; up to 5 tries, waiting for udev between them
        (a disk udev still probes is busy: "Device or resource busy")."""
        self._run(self._reread_command(disk))

    @staticmethod
    def _reread_command(disk: str) -> str:
        dev = f"/dev/{valid_disk(disk)}"
        return (f"for i in 1 2 3 4; do blockdev --rereadpt {dev} 2>/dev/null && exit 0; "
                "udevadm settle 2>/dev/null || sleep 1; done; "
                f"blockdev --rereadpt {dev}")

    def start_sector(self, disk: str) -> int:
        """The start of the disk's first partition, in 512-byte sectors."""
        return int(self.tools.get(Sysfs).read(disk, partition_name(disk) + "/start"))

    def _made(self, disk: str, program: str, command: str, wipe_first: bool = False) -> int:
        """Run ``command`` (``program`` writing the table), then have the kernel re-read it and read the
        start sector it then sees, all in one guest command. That start is the verdict (the program's own
        status is not: it may complain that the kernel kept the old table); no partition is an error with
        what the program said; a re-read that fails, the guest's error."""
        start = f"/sys/block/{valid_disk(disk)}/{partition_name(disk)}/start"
        first = f"{_zero_command(disk)} || exit $?\n" if wipe_first else ""
        ran = self._run(f"{first}{command}\necho {_MADE_LINE}\n( {self._reread_command(disk)} ) || exit $?\n"
                        f"s=; read -r s < {start} 2>/dev/null; echo \"start=$s\"", check=False)
        said, _, after = ran.stdout.partition(f"{_MADE_LINE}\n")
        if not ran.ok:
            raise GuestCommandError(ran)
        value = after.strip().removeprefix("start=")
        if not value.isdigit():
            raise RuntimeError(f"{program} made no partition on /dev/{disk} (no {start}); {program} said: "
                               f"{said.strip()[-800:] or '(nothing)'}")
        return int(value)


#: The line that ends the partitioning program's output in ``_made``'s command.
_MADE_LINE = "--vioconform-partition-written--"


def _zero_command(disk: str) -> str:
    """Zero the disk's first MiB: its partition table and any filesystem's superblock."""
    return f"dd if=/dev/zero of=/dev/{valid_disk(disk)} bs=1M count=1 oflag=direct 2>/dev/null"


class FdiskPartitioning(Partitioning):
    """fdisk's dialogue as busybox's fdisk asks it: o (new label), n p 1 <start> <default end>, w."""

    programs = ("fdisk", "blockdev")

    def create_one(self, disk: str, start_sector: int, wipe_first: bool = False) -> int:
        dev = f"/dev/{valid_disk(disk)}"
        return self._made(disk, "fdisk", f"printf 'o\\nn\\np\\n1\\n{int(start_sector)}\\n\\nw\\n' | fdisk {dev} 2>&1",
                          wipe_first)


class SfdiskPartitioning(Partitioning):
    """util-linux's sfdisk, fed a script: a DOS label and one Linux partition from the start sector."""

    programs = ("sfdisk", "blockdev")

    def create_one(self, disk: str, start_sector: int, wipe_first: bool = False) -> int:
        dev = f"/dev/{valid_disk(disk)}"
        return self._made(disk, "sfdisk", f"printf 'label: dos\\nstart=%d, type=83\\n' {int(start_sector)} | "
                                          f"sfdisk --no-reread --no-tell-kernel -q {dev} 2>&1", wipe_first)


Partitioning.variants = (SfdiskPartitioning, FdiskPartitioning)
