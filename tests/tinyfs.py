"""A tiny file system of the test's own: a tmpfs mounted in the test's directory, which the test can
fill or make read-only, unmounted when the test ends. Mounting needs root (CAP_SYS_ADMIN): without
it the test is skipped with the reason.

    with tiny_fs(tmp_path / "fs") as fs:
        fill(fs)            # no space left
        read_only(fs)       # remounted read-only
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

#: The tmpfs's size: room for a new store (about 40 KiB: five tables, their indexes, a journal) and
#: little else, so that filling it is quick.
TINY_FS_KIB = 256


@contextlib.contextmanager
def tiny_fs(where: Path, size_kib: int = TINY_FS_KIB) -> Iterator[Path]:
    """A tmpfs of ``size_kib`` mounted at ``where`` (made if missing) for the block; unmounted after."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    where.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kib}k,mode=0700", "vioconform-test",
                              str(where)], capture_output=True, text=True, check=False)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        if subprocess.run(["umount", str(where)], capture_output=True, check=False).returncode != 0:
            subprocess.run(["umount", "-l", str(where)], capture_output=True, check=False)  # a file still open


def read_only(where: Path) -> None:
    """Remount the tmpfs at ``where`` read-only (root, too, can write nothing there then)."""
    subprocess.run(["mount", "-o", "remount,ro", str(where)], check=True, capture_output=True)


def fill(where: Path) -> None:
    """Fill the file system at ``where`` to its last byte (one file, ``filler``)."""
    fd = os.open(where / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for chunk in (b"\0" * 4096, b"\0"):  # whole pages, then what is left of the last one
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, chunk)
    finally:
        os.close(fd)
