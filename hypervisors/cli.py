"""Shared parts of the record commands (``python -m hypervisors.libvirt.record``,
``python -m hypervisors.vsphere.record``): their ``--out`` and ``--seconds`` values, and the CSV to
a file or to standard output."""

from __future__ import annotations

import argparse
import math
import os
import stat
import sys
from pathlib import Path


def kind_of(mode: int) -> str | None:
    """What a file of ``mode`` is when it is not a regular file ("a FIFO (named pipe)"...); None for one."""
    for test, name in ((stat.S_ISREG, None), (stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def not_regular(path: Path) -> str | None:
    """What ``path`` is when it exists and is not a regular file (stat only, never an open); else None."""
    try:
        return kind_of(path.stat().st_mode)  # a symbolic link is followed: what it points at is written
    except OSError:
        return None  # nothing there yet: a new file


def output_file(text: str) -> Path:
    """``--out``: a new file or a regular file to replace, checked before anything is recorded. A
    device is never written (as root, ``--out /dev/sda`` would write the CSV over a disk), a FIFO
    never opened (the write waits for a reader for ever), a directory never replaced."""
    path = Path(text).expanduser()
    kind = not_regular(path)
    if kind is not None:
        raise argparse.ArgumentTypeError(f"{text} is {kind}, not a regular file; give the path of a new file (or "
                                         "of a regular file to replace), or leave --out out for standard output")
    return path


def seconds_to_record(text: str) -> float:
    """``--seconds``: a finite number above 0 (time.sleep takes no nan, inf or negative time)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a time to record; give seconds above 0, e.g. 10")
    return value


def emit(text: str, out: Path | None, prog: str) -> int:
    """Write ``text`` to ``out`` (saying so on stderr) or to stdout; the exit code: 0, or 2 when
    ``out`` became something other than a regular file meanwhile (it is then left alone). The file
    is written beside ``out`` and renamed onto it."""
    if out is None:
        sys.stdout.write(text)
        return 0
    temp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        temp.write_text(text)
        kind = not_regular(out)
        if kind is not None:
            print(f"error: --out {out} is now {kind}, not a regular file: not replaced; the CSV was not written",
                  file=sys.stderr)
            return 2
        os.replace(temp, out)
    except OSError as e:
        print(f"error: --out {out} not written: {e.strerror or e}", file=sys.stderr)
        return 2
    finally:
        temp.unlink(missing_ok=True)
    print(f"{prog}: wrote {out}", file=sys.stderr)
    return 0
