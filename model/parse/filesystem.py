"""What the guest's filesystem tools print: ``stat -f`` (statfs), ``fstrim -v`` and ``resize2fs``.

- ``stat -f -c '%S %b %f %a' MOUNTPOINT`` (busybox's and coreutils' alike): the block size, then the
  total, free and available blocks as statfs(2) gives them (what ``df`` shows). ext4's total leaves out
  its own overhead (inode tables, bitmaps, the journal), so it is less than the device it sits on.
- ``fstrim -v``: util-linux prints ``/mnt: 55.9 MiB (58650624 bytes) trimmed``, busybox
  ``/mnt: 58650624 bytes trimmed``; on a disk that takes no discard util-linux says ``fstrim: /mnt: the
  discard operation is not supported``, busybox ``fstrim: ioctl 0xc0185879 failed: Operation not supported``.
- ``resize2fs DEVICE`` on a mounted ext4: ``Filesystem at /dev/vdb is mounted on /mnt; on-line resizing
  required``, ``old_desc_blocks = 1, new_desc_blocks = 1`` and ``The filesystem on /dev/vdb is now 278528
  (4k) blocks long.``; a filesystem already that large ``The filesystem is already 262144 (4k) blocks long.
  Nothing to do!``; a refusal ``resize2fs: Permission denied to resize filesystem`` (e2fsprogs 1.47).

Example::

    parse_fstrim("/mnt/vioc: 55.9 MiB (58650624 bytes) trimmed\\n")  # 58650624
    parse_resize2fs("The filesystem on /dev/vdb is now 278528 (4k) blocks long.\\n").size_bytes  # 1140850688
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from model.errors import ParseError


@dataclass(frozen=True)
class FsSize:
    """A mounted filesystem's size as statfs(2) gives it (``df``), in its blocks."""

    block_bytes: int
    total_blocks: int
    free_blocks: int
    available_blocks: int  # free to an unprivileged user: free less the reserved blocks

    @property
    def total_bytes(self) -> int:
        return self.block_bytes * self.total_blocks

    @property
    def available_bytes(self) -> int:
        return self.block_bytes * self.available_blocks


def parse_statfs(text: str, where: str = "stat -f") -> FsSize:
    """``stat -f -c '%S %b %f %a'``'s one line; ParseError naming ``where`` otherwise."""
    words = text.split()
    if len(words) != 4 or not all(w.isdigit() for w in words):
        raise ParseError(f"{where}: expected four numbers (block size, total, free and available blocks), got "
                         f"{text.strip()[:200]!r}")
    block, total, free, available = (int(w) for w in words)
    if block <= 0:
        raise ParseError(f"{where}: a block size of {block} bytes")
    return FsSize(block, total, free, available)


_TRIMMED = re.compile(r"^\S.*?:\s+(?:[\d.]+\s+\S+\s+\()?(\d+) bytes\)? trimmed\s*$", re.MULTILINE)


def parse_fstrim(text: str) -> int | None:
    """The bytes ``fstrim -v`` says it trimmed (util-linux's and busybox's line), or None where it printed none."""
    found = _TRIMMED.findall(text)
    return sum(int(n) for n in found) if found else None


_NOW = re.compile(r"is (?:now|already) (\d+) \((\d+)k\) blocks long")


@dataclass(frozen=True)
class Resize2fsSaid:
    """What resize2fs said: the filesystem's size it reports (None: it reported none) and its last line."""

    blocks: int | None
    block_bytes: int | None
    last_line: str
    nothing_to_do: bool = False

    @property
    def size_bytes(self) -> int | None:
        return None if self.blocks is None or self.block_bytes is None else self.blocks * self.block_bytes


def parse_resize2fs(text: str) -> Resize2fsSaid:
    """resize2fs's output (stdout and stderr together): the size it reports and its last non-empty line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    m = _NOW.search(text)
    last = lines[-1] if lines else ""
    if m is None:
        return Resize2fsSaid(None, None, last)
    return Resize2fsSaid(int(m.group(1)), int(m.group(2)) * 1024, last, "Nothing to do" in text)
