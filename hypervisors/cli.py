"""Shared ending of the record commands (``python -m hypervisors.libvirt.record``,
``python -m hypervisors.vsphere.record``): the CSV to a file or to standard output."""

from __future__ import annotations

import sys
from pathlib import Path


def emit(text: str, out: Path | None, prog: str) -> int:
    """Write ``text`` to ``out`` (saying so on stderr) or to stdout; returns the exit code 0."""
    if out is not None:
        out.write_text(text)
        print(f"{prog}: wrote {out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
