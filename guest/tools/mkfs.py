"""Filesystems: make one, mount and unmount it, lay out a file on it (written, not sparse).

Which filesystem is the part that differs between guests: ext2 with e2fsprogs' ``mke2fs``
(every Debian, RHEL 8/9 cloud image; busybox's applet in the embedded guest), else XFS with
``mkfs.xfs`` (an image that carries xfsprogs only). Both are made with 4 KiB blocks.
A kernel that cannot mount the filesystem ("unknown filesystem type": no ext2/ext4 or xfs
driver) is ``FilesystemUnsupported``, which the alignment rule turns into a skip with that reason.
"""

from __future__ import annotations

import shlex
from typing import ClassVar, NoReturn

from guest.tools.tool import GuestTool
from transport.ssh import CommandResult, GuestCommandError

MIB = 1 << 20


class FilesystemUnsupported(RuntimeError):
    """The guest's kernel cannot mount the filesystem its tools made; ``str()`` says which and why."""


class Filesystem(GuestTool):
    """Interface: ``make`` is each variant's own; mounting and writing files are common."""

    name = "filesystem"
    install_hint = "install e2fsprogs (mke2fs), or busybox with its mke2fs applet, or xfsprogs (mkfs.xfs)"
    #: the filesystem it makes, for messages and records: "ext2", "xfs"
    kind: ClassVar[str] = ""

    def _make_command(self, device: str, block_bytes: int) -> str:
        raise NotImplementedError

    def make(self, device: str, block_bytes: int) -> None:
        self._run(self._make_command(device, block_bytes))

    def mount(self, device: str, mountpoint: str, options: str = "noatime") -> None:
        res = self._run(_mount_command(device, mountpoint, options), check=False)
        if not res.ok:
            self._mount_failed(res, device)

    def _mount_failed(self, res: CommandResult, device: str) -> NoReturn:
        said = (res.stderr or res.stdout).strip()
        if "unknown filesystem type" in said or "no such device" in said.lower():
            kernel = self._run("uname -r", check=False).stdout.strip()
            raise FilesystemUnsupported(f"the guest's kernel {kernel} cannot mount {self.kind} ({said.splitlines()[-1]}):"
                                        f" it has no driver for it")
        raise GuestCommandError(res, f"mounting {device} ({self.kind})")

    def unmount(self, mountpoint: str) -> bool:
        """Unmount if mounted; whether something was."""
        return self._run(_unmount_command(mountpoint), check=False).ok

    def unmount_with_next(self, mountpoint: str) -> None:
        """Unmount if mounted, ahead of the guest's next command where the shell can carry it (one round trip
        fewer: transport/ride_along.py), else now; whether something was is not asked."""
        self._with_next(_unmount_command(mountpoint))

    def lay_out_file(self, path: str, size_bytes: int) -> None:
        """Write ``size_bytes`` (whole MiB) of zeros to ``path`` and sync: every block allocated."""
        self._run(_lay_out_command(path, size_bytes))

    def make_mounted_file(self, device: str, block_bytes: int, mountpoint: str, path: str, size_bytes: int) -> None:
        """:meth:`make`, :meth:`mount` (noatime) and :meth:`lay_out_file` in one guest command, each step's
        failure raised as that step's own: FilesystemUnsupported for a mount the kernel cannot do."""
        steps = ((_MAKE, self._make_command(device, block_bytes)),
                 (_MOUNT, _mount_command(device, mountpoint, "noatime")), (_FILE, _lay_out_command(path, size_bytes)))
        script = "\n".join(f"{command} || {{ s=$?; echo {_FAILED}{step}; exit $s; }}" for step, command in steps)
        res = self._run(script, check=False)
        if res.ok:
            return
        out, _, failed = res.stdout.rpartition(_FAILED)
        own = CommandResult(dict(steps).get(failed.strip(), script), res.exit_status, out, res.stderr, res.duration_s)
        if failed.strip() == _MOUNT:
            self._mount_failed(own, device)
        raise GuestCommandError(own)


#: The steps of ``make_mounted_file`` and the line that names the one that failed.
_MAKE, _MOUNT, _FILE = "make", "mount", "file"
_FAILED = "vioconform-fs-step-failed="


def _mount_command(device: str, mountpoint: str, options: str) -> str:
    d = shlex.quote(mountpoint)
    return f"mkdir -p {d} && mount -o {shlex.quote(options)} {shlex.quote(device)} {d}"


def _unmount_command(mountpoint: str) -> str:
    return f"umount {shlex.quote(mountpoint)} 2>/dev/null"


def _lay_out_command(path: str, size_bytes: int) -> str:
    return f"dd if=/dev/zero of={shlex.quote(path)} bs=1M count={-(-size_bytes // MIB)} 2>/dev/null && sync"


class Mke2fs(Filesystem):
    """ext2 (no journal: the only writes are the file's), mounted through the ext4 driver where
    the kernel has no ext2 of its own (Debian's, RHEL's)."""

    programs = ("mke2fs",)
    kind = "ext2"

    def _make_command(self, device: str, block_bytes: int) -> str:
        return f"mke2fs -q -F -b {int(block_bytes)} {shlex.quote(device)}"


class MkfsXfs(Filesystem):
    programs = ("mkfs.xfs",)
    kind = "xfs"

    def _make_command(self, device: str, block_bytes: int) -> str:
        return f"mkfs.xfs -q -f -b size={int(block_bytes)} {shlex.quote(device)}"


Filesystem.variants = (Mke2fs, MkfsXfs)
