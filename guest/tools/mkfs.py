"""Filesystems: make one, mount and unmount it, lay out a file on it (written, not sparse).

Which filesystem is the part that differs between guests: ext2 with e2fsprogs' ``mke2fs``
(every Debian, RHEL 8/9 cloud image; busybox's applet in the embedded guest), else XFS with
``mkfs.xfs`` (an image that carries xfsprogs only). Both are made with 4 KiB blocks.
A kernel that cannot mount the filesystem ("unknown filesystem type": no ext2/ext4 or xfs
driver) is ``FilesystemUnsupported``, which the alignment rule turns into a skip with that reason.
"""

from __future__ import annotations

import shlex
from typing import ClassVar

from guest.tools.tool import GuestTool
from transport.ssh import GuestCommandError

MIB = 1 << 20


class FilesystemUnsupported(RuntimeError):
    """The guest's kernel cannot mount the filesystem its tools made; ``str()`` says which and why."""


class Filesystem(GuestTool):
    """Interface: ``make`` is each variant's own; mounting and writing files are common."""

    name = "filesystem"
    install_hint = "install e2fsprogs (mke2fs), or busybox with its mke2fs applet, or xfsprogs (mkfs.xfs)"
    #: the filesystem it makes, for messages and records: "ext2", "xfs"
    kind: ClassVar[str] = ""

    def make(self, device: str, block_bytes: int) -> None:
        raise NotImplementedError

    def mount(self, device: str, mountpoint: str, options: str = "noatime") -> None:
        d = shlex.quote(mountpoint)
        res = self._run(f"mkdir -p {d} && mount -o {shlex.quote(options)} {shlex.quote(device)} {d}", check=False)
        if res.ok:
            return
        said = (res.stderr or res.stdout).strip()
        if "unknown filesystem type" in said or "no such device" in said.lower():
            kernel = self._run("uname -r", check=False).stdout.strip()
            raise FilesystemUnsupported(f"the guest's kernel {kernel} cannot mount {self.kind} ({said.splitlines()[-1]}):"
                                        f" it has no driver for it")
        raise GuestCommandError(res, f"mounting {device} ({self.kind})")

    def unmount(self, mountpoint: str) -> bool:
        """Unmount if mounted; whether something was."""
        return self._run(f"umount {shlex.quote(mountpoint)} 2>/dev/null", check=False).ok

    def lay_out_file(self, path: str, size_bytes: int) -> None:
        """Write ``size_bytes`` (whole MiB) of zeros to ``path`` and sync: every block allocated."""
        self._run(f"dd if=/dev/zero of={shlex.quote(path)} bs=1M count={-(-size_bytes // MIB)} 2>/dev/null && sync")


class Mke2fs(Filesystem):
    """ext2 (no journal: the only writes are the file's), mounted through the ext4 driver where
    the kernel has no ext2 of its own (Debian's, RHEL's)."""

    programs = ("mke2fs",)
    kind = "ext2"

    def make(self, device: str, block_bytes: int) -> None:
        self._run(f"mke2fs -q -F -b {int(block_bytes)} {shlex.quote(device)}")


class MkfsXfs(Filesystem):
    programs = ("mkfs.xfs",)
    kind = "xfs"

    def make(self, device: str, block_bytes: int) -> None:
        self._run(f"mkfs.xfs -q -f -b size={int(block_bytes)} {shlex.quote(device)}")


Filesystem.variants = (Mke2fs, MkfsXfs)
