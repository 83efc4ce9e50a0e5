"""ext4 that a rule makes on its disk and takes off again: discard's fstrim, resize's online grow.

Made and mounted as model/ext4_options.py says. ``fstrim`` (util-linux or busybox) trims a mounted
filesystem; ``resize2fs`` grows one online. Each method is one guest command: under TCG a command's round trip (about 80 ms) costs more than the work.

Example::

    fs = disk.tool(Ext4)
    fs.make_mounted("/dev/vdb", "/mnt/vioc-fs", 64 << 20).total_bytes  # 58675200
    fs.take_off("/dev/vdb", "/mnt/vioc-fs")
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from guest.tools.tool import GuestTool
from model.errors import ParseError
from model.ext4_options import BLOCK_BYTES, MKFS_OPTIONS, MOUNT_OPTIONS, STATFS, WIPE_BYTES
from model.parse.filesystem import FsSize, parse_statfs
from transport.ssh import CommandResult

#: The block the test files are written in.
WRITE_BLOCK_BYTES = 1 << 20
_SIZE_MARK = "VIOC-STATFS"


@dataclass(frozen=True)
class Grown:
    """resize2fs's answer: its exit status, what it printed (stdout and stderr), and the filesystem's
    size afterwards (None where resize2fs failed or statfs could not be read)."""

    exit_status: int
    said: str
    size: FsSize | None

    @property
    def ok(self) -> bool:
        return self.exit_status == 0


class Ext4(GuestTool):
    name = "ext4"
    programs = ("mkfs.ext4",)
    install_hint = "mkfs.ext4 is part of e2fsprogs: install e2fsprogs in the image"

    def make_mounted(self, device: str, mountpoint: str, size_bytes: int | None = None,
                     discard: bool = False, written: tuple[str, int] | None = None) -> FsSize:
        """ext4 over ``device``'s first ``size_bytes`` (a multiple of BLOCK_BYTES), or all of it, mounted at
        ``mountpoint`` (whatever was mounted there first unmounted): its size. ``discard``: mkfs discards
        the filesystem's region first, as it does unless told not to. ``written``: a file (path, bytes)
        then written and deleted as :meth:`write_and_delete` does, in the same guest command."""
        m, dev = shlex.quote(mountpoint), shlex.quote(device)
        size = "" if size_bytes is None else f" {size_bytes // 1024}k"
        options = MKFS_OPTIONS.replace("nodiscard", "discard") if discard else MKFS_OPTIONS
        then = "" if written is None else f" && {_write_and_delete(*written)}"
        said = self._run(f"umount {m} 2>/dev/null; mkfs.ext4 -q -F -b {BLOCK_BYTES} -E {options} {dev}{size} && "
                         f"mkdir -p {m} && mount -t ext4 -o {MOUNT_OPTIONS} {dev} {m} && {STATFS} {m}{then}",
                         timeout_s=120).stdout
        return parse_statfs(said.strip().splitlines()[-1], f"stat -f {mountpoint}")

    def size(self, mountpoint: str) -> FsSize:
        """The mounted filesystem's size as statfs gives it (what ``df`` shows)."""
        said = self._run(f"{STATFS} {shlex.quote(mountpoint)}").stdout
        return parse_statfs(said, f"stat -f {mountpoint}")

    def write_and_delete(self, path: str, size_bytes: int) -> None:
        """Write ``size_bytes`` (whole MiB) of data that is not zeroes to a new file at ``path``, with
        O_DIRECT, sync, delete it and sync again: its blocks were on the disk and are free now (the
        journal's transaction that frees them committed)."""
        self._run(_write_and_delete(path, size_bytes), timeout_s=120)

    def take_off(self, device: str, mountpoint: str) -> None:
        """Unmount whatever is mounted at ``mountpoint`` and zero the disk's first WIPE_BYTES (the
        superblock and group descriptors): no filesystem is found there afterwards."""
        self._run(f"umount {shlex.quote(mountpoint)} 2>/dev/null; dd if=/dev/zero of={shlex.quote(device)} "
                  f"bs={WIPE_BYTES} count=1 oflag=direct conv=fsync 2>/dev/null")


def _write_and_delete(path: str, size_bytes: int) -> str:
    p = shlex.quote(path)
    return (f"tr '\\0' 'Z' </dev/zero | dd of={p} bs={WRITE_BLOCK_BYTES} count={-(-size_bytes // WRITE_BLOCK_BYTES)} "
            f"iflag=fullblock oflag=direct 2>/dev/null && sync && rm {p} && sync")


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

    def grow(self, device: str, mountpoint: str) -> Grown:
        """``resize2fs`` of the filesystem on ``device`` (mounted at ``mountpoint``) to the device's size,
        then its size as statfs gives it: one guest command. A refusal is the guest's answer, not raised."""
        done = self._run(f"resize2fs {shlex.quote(device)} 2>&1; s=$?; echo {_SIZE_MARK} $({STATFS} "
                         f"{shlex.quote(mountpoint)}); exit $s", check=False, timeout_s=120)
        said, _, size = done.stdout.partition(_SIZE_MARK)
        try:
            grown = parse_statfs(size, f"stat -f {mountpoint}") if done.ok else None
        except ParseError:
            grown = None
        return Grown(done.exit_status, said.strip(), grown)
