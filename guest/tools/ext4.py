"""ext4 that a rule makes on its disk and takes off again: discard's fstrim, resize's online grow.

Made with e2fsprogs' ``mkfs.ext4`` (4 KiB blocks) so that the only writes are its own metadata:
``nodiscard`` (mke2fs would discard the whole filesystem first, which the discard rule counts),
``lazy_itable_init`` and ``lazy_journal_init`` (the inode tables and the journal are not zeroed: 0.1 s
instead of seconds under TCG), and mounted with ``noinit_itable`` so that the kernel does not zero the
inode tables in the background either (its ext4lazyinit thread would send write-zeroes while the rules
count). ``fstrim`` (util-linux or busybox) trims a mounted filesystem; ``resize2fs`` grows one online.

Example::

    fs = disk.tool(Ext4)
    fs.make("/dev/vdb", 64 << 20)
    fs.mount("/dev/vdb", "/mnt/vioc-fs")
    fs.size("/mnt/vioc-fs").total_bytes  # 58675200
"""

from __future__ import annotations

import shlex

from guest.tools.tool import GuestTool
from model.parse.filesystem import FsSize, parse_statfs
from transport.ssh import CommandResult

#: The filesystem's block: 4 KiB, ext4's default above 512 MiB and every host file system's.
BLOCK_BYTES = 4096
MKFS_OPTIONS = "nodiscard,lazy_itable_init=1,lazy_journal_init=1"
MOUNT_OPTIONS = "noatime,noinit_itable"
#: What ``wipe`` zeroes at the disk's start: the primary superblock (at 1 KiB) and group descriptors,
#: so that nothing finds a filesystem there afterwards.
WIPE_BYTES = 1 << 20
#: The block the test files are written in.
WRITE_BLOCK_BYTES = 1 << 20


class Ext4(GuestTool):
    name = "ext4"
    programs = ("mkfs.ext4",)
    install_hint = "mkfs.ext4 is part of e2fsprogs: install e2fsprogs in the image"

    def make(self, device: str, size_bytes: int | None = None) -> None:
        """ext4 over ``device``'s first ``size_bytes`` (a multiple of BLOCK_BYTES), or all of it."""
        size = "" if size_bytes is None else f" {size_bytes // 1024}k"
        self._run(f"mkfs.ext4 -q -F -b {BLOCK_BYTES} -E {MKFS_OPTIONS} {shlex.quote(device)}{size}", timeout_s=120)

    def mount(self, device: str, mountpoint: str) -> None:
        m = shlex.quote(mountpoint)
        self._run(f"mkdir -p {m} && mount -t ext4 -o {MOUNT_OPTIONS} {shlex.quote(device)} {m}")

    def unmount(self, mountpoint: str) -> bool:
        """Unmount if mounted; whether something was."""
        return self._run(f"umount {shlex.quote(mountpoint)} 2>/dev/null", check=False).ok

    def size(self, mountpoint: str) -> FsSize:
        """The mounted filesystem's size as statfs gives it (what ``df`` shows)."""
        said = self._run(f"stat -f -c '%S %b %f %a' {shlex.quote(mountpoint)}").stdout
        return parse_statfs(said, f"stat -f {mountpoint}")

    def write_file(self, path: str, size_bytes: int) -> None:
        """Write ``size_bytes`` (whole MiB) of data that is not zeroes to a new file at ``path``, with
        O_DIRECT, and sync: every block of it allocated and on the disk."""
        self._run(f"tr '\\0' 'Z' </dev/zero | dd of={shlex.quote(path)} bs={WRITE_BLOCK_BYTES} "
                  f"count={-(-size_bytes // WRITE_BLOCK_BYTES)} iflag=fullblock oflag=direct 2>/dev/null && sync",
                  timeout_s=120)

    def remove(self, path: str) -> None:
        """Delete the file and sync: its blocks are free once the journal's transaction commits."""
        self._run(f"rm -f {shlex.quote(path)} && sync")

    def wipe(self, device: str) -> None:
        """Zero the disk's first MiB (the superblock and group descriptors): no filesystem is found there after."""
        self._run(f"dd if=/dev/zero of={shlex.quote(device)} bs={WIPE_BYTES} count=1 oflag=direct conv=fsync "
                  "2>/dev/null")


class Fstrim(GuestTool):
    name = "fstrim"
    programs = ("fstrim",)
    install_hint = "fstrim is part of util-linux (or busybox): install it in the image"

    def trim(self, mountpoint: str) -> CommandResult:
        """``fstrim -v`` of the mounted filesystem: its result as the guest answered (a refusal is a finding)."""
        return self._run(f"fstrim -v {shlex.quote(mountpoint)}", check=False, timeout_s=120)


class Resize2fs(GuestTool):
    name = "resize2fs"
    programs = ("resize2fs",)
    install_hint = "resize2fs is part of e2fsprogs: install e2fsprogs in the image"

    def grow(self, device: str) -> CommandResult:
        """``resize2fs`` of the (mounted) filesystem on ``device`` to the device's size: the guest's answer."""
        return self._run(f"resize2fs {shlex.quote(device)} 2>&1", check=False, timeout_s=120)
