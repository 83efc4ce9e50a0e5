"""Which bytes of a host file hold data: a raw disk file's allocation, as the discard rule reads it on
the host (the run's hypervisors/libvirt/discard.py and the replay's host actions), with ``SEEK_DATA`` /
``SEEK_HOLE``: a range the guest discarded is a hole punched in the file (``fallocate(PUNCH_HOLE)``).
"""

from __future__ import annotations

import errno
import os
from pathlib import PurePath


def allocated_in(path: PurePath, offset_bytes: int, length_bytes: int) -> int:
    """Bytes of ``path``'s range ``[offset, offset + length)`` that hold data (SEEK_DATA/SEEK_HOLE)."""
    end = offset_bytes + length_bytes
    total = 0
    fd = os.open(path, os.O_RDONLY)
    try:
        pos = offset_bytes
        while pos < end:
            try:
                data = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError as e:
                if e.errno == errno.ENXIO:  # no data after pos
                    break
                raise
            if data >= end:
                break
            hole = os.lseek(fd, data, os.SEEK_HOLE)
            total += min(hole, end) - data
            pos = hole
    finally:
        os.close(fd)
    return total
