"""Filesystems: make one, mount and unmount it, lay out a file on it (written, not sparse)."""

from __future__ import annotations

import shlex

from guest.tools.base import GuestTool

MIB = 1 << 20


class Filesystem(GuestTool):
    """Interface: ``make_ext2`` is each variant's own (mke2fs here; ``mkfs.ext4 -O ^has_journal``
    would be another); mounting and writing files are common."""

    name = "filesystem"
    install_hint = "install e2fsprogs (mke2fs), or busybox with its mke2fs applet"

    def make_ext2(self, device: str, block_bytes: int) -> None:
        raise NotImplementedError

    def mount(self, device: str, mountpoint: str, options: str = "noatime") -> None:
        d = shlex.quote(mountpoint)
        self._run(f"mkdir -p {d} && mount -o {shlex.quote(options)} {shlex.quote(device)} {d}")

    def unmount(self, mountpoint: str) -> bool:
        """Unmount if mounted; whether something was."""
        return self._run(f"umount {shlex.quote(mountpoint)} 2>/dev/null", check=False).ok

    def lay_out_file(self, path: str, size_bytes: int) -> None:
        """Write ``size_bytes`` (whole MiB) of zeros to ``path`` and sync: every block allocated."""
        self._run(f"dd if=/dev/zero of={shlex.quote(path)} bs=1M count={-(-size_bytes // MIB)} 2>/dev/null && sync")


class Mke2fs(Filesystem):
    programs = ("mke2fs",)

    def make_ext2(self, device: str, block_bytes: int) -> None:
        self._run(f"mke2fs -q -F -b {int(block_bytes)} {shlex.quote(device)}")


Filesystem.variants = (Mke2fs,)
