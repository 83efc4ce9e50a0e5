"""What a path is, for messages that refuse it: "a directory", "a FIFO (named pipe)"... Every
output file the suite and its tools write, and every file they read, is checked with these."""

from __future__ import annotations

import os
import stat
from pathlib import Path


def kind_of(mode: int) -> str:
    """What a file of ``st_mode`` is, for messages: "a directory", "a character device"..."""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISREG, "a regular file")):
        if test(mode):
            return name
    return "not a regular file"


def not_regular(path: Path) -> str | None:
    """What ``path`` is if it exists and is not a regular file (symbolic links followed), e.g.
    "a character device"; None for a regular file or a path where nothing is (yet). Stat only, never
    an open (opening a FIFO would block)."""
    try:
        st = os.stat(path)
    except OSError:
        return None  # nothing there (or a dangling link): a new file; a parent that cannot be used fails later
    return None if stat.S_ISREG(st.st_mode) else kind_of(st.st_mode)
