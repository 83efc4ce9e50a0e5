"""A cpio archive in the "newc" format, which the Linux kernel unpacks as an initramfs: the replay
appends one to the bundle's initramfs (the kernel accepts archives concatenated) to add its own
init script.

Example::

    data = newc_archive([("vioconform-replay", 0o100755, b"#!/bin/sh\\n...")])
"""

from __future__ import annotations

from collections.abc import Iterable

TRAILER = "TRAILER!!!"


def _pad4(n: int) -> bytes:
    return b"\0" * (-n % 4)


def _entry(ino: int, name: str, mode: int, data: bytes) -> bytes:
    encoded = name.encode() + b"\0"
    fields = (ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(encoded), 0)
    header = b"070701" + b"".join(f"{v:08X}".encode() for v in fields)
    head = header + encoded
    return head + _pad4(len(head)) + data + _pad4(len(data))


def newc_archive(files: Iterable[tuple[str, int, bytes]]) -> bytes:
    """An archive of ``(name, mode, data)`` files (a name without a leading ``/``; mode with its
    file-type bits, e.g. 0o100755), then the trailer; its length is a multiple of 4."""
    out = b"".join(_entry(i, name, mode, data) for i, (name, mode, data) in enumerate(files, start=1))
    out += _entry(0, TRAILER, 0, b"")
    return out + b"\0" * (-len(out) % 512)


def read_newc(data: bytes) -> list[tuple[str, int, bytes]]:
    """The files of a newc archive (until its trailer): for tests and for checking what was written."""
    files: list[tuple[str, int, bytes]] = []
    pos = 0
    while True:
        if data[pos:pos + 6] != b"070701":
            raise ValueError(f"no newc header at byte {pos}")
        fields = [int(data[pos + 6 + 8 * i:pos + 14 + 8 * i], 16) for i in range(13)]
        mode, size, namesize = fields[1], fields[6], fields[11]
        name_start = pos + 110
        name = data[name_start:name_start + namesize - 1].decode()
        data_start = name_start + namesize + (-(110 + namesize) % 4)
        if name == TRAILER:
            return files
        files.append((name, mode, data[data_start:data_start + size]))
        pos = data_start + size + (-size % 4)
