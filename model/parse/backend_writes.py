"""The writes QEMU's block backends took, from its ``blk_co_pwritev`` trace event: which were write-zeroes.

QEMU 7.2 counts a device's write-zeroes as writes in ``query-blockstats`` (``wr_operations``,
``wr_bytes``: virtio-blk and scsi-disk's WRITE SAME account them as BLOCK_ACCT_WRITE; NVMe's Write
Zeroes adds no bytes, measured), and its file node counts none: only the trace tells them apart. Every write a
device hands its block backend passes ``blk_co_do_pwritev_part``, which traces
``blk_co_pwritev blk %p bs %p offset %ld bytes %ld flags 0x%x``; a write-zeroes
(``blk_aio_pwrite_zeroes``) carries ``BDRV_REQ_ZERO_WRITE`` in its flags, a write of data does not.
The log backend's lines read ``PID@SEC.USEC:blk_co_pwritev blk 0x55.. bs 0x55.. offset 545259520
bytes 1048576 flags 0x2`` (model/parse/qemutrace.py has the line format). The event names no device
(``blk`` is a pointer the monitor does not map), so the writes of every disk are there: the caller
keeps those in its own byte range, in a window where its disk is the one written.

Example::

    writes = parse_backend_writes(text)
    sum(w.length_bytes for w in writes if w.zeroes)  # 1048576
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from model.errors import ParseError

#: The trace event, as QEMU 7.2's block/trace-events names it.
EVENT = "blk_co_pwritev"
#: include/block/block-common.h's BdrvRequestFlags: the write carries no data, the range reads as zeroes.
BDRV_REQ_ZERO_WRITE = 0x2
#: ... and the device allowed the host to unmap the range instead (a write-zeroes with the unmap bit).
BDRV_REQ_MAY_UNMAP = 0x4

_LINE = re.compile(r"^(?:\S+\s+)?(?:\d+@\d+\.\d+:)?" + EVENT + r"\s+(?P<args>.*)$")
_ARG = re.compile(r"(\w+)\s+(\S+)")


@dataclass(frozen=True)
class BackendWrite:
    """One write a block backend took: where, how long, and whether it was a write-zeroes."""

    offset_bytes: int
    length_bytes: int
    flags: int

    @property
    def zeroes(self) -> bool:
        return bool(self.flags & BDRV_REQ_ZERO_WRITE)

    def overlap_bytes(self, offset_bytes: int, length_bytes: int) -> int:
        """How many of its bytes fall in ``[offset, offset + length)``."""
        return max(0, min(self.offset_bytes + self.length_bytes, offset_bytes + length_bytes)
                   - max(self.offset_bytes, offset_bytes))


def parse_backend_writes(text: str, source: str = "QEMU trace") -> list[BackendWrite]:
    """Every ``blk_co_pwritev`` line of ``text`` in order; other lines are skipped. A line of the
    event without its offset, bytes and flags is a ParseError naming ``source`` and the line."""
    out = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        m = _LINE.match(line.strip())
        if m is None:
            continue
        args = dict(_ARG.findall(m.group("args")))
        try:
            out.append(BackendWrite(int(args["offset"]), int(args["bytes"]), int(args["flags"], 16)))
        except (KeyError, ValueError):
            raise ParseError(f"{source} line {lineno}: {EVENT} without QEMU 7.2's 'offset N bytes N flags 0xF' "
                             f"arguments: {line.strip()[:200]!r}") from None
    return out


@dataclass(frozen=True)
class WritesInRange:
    """What the host's block backends took in one byte range: its write-zeroes and its writes of data."""

    zero_requests: int
    zero_bytes: int
    data_requests: int
    data_bytes: int


def writes_in(writes: Iterable[BackendWrite], offset_bytes: int, length_bytes: int) -> WritesInRange:
    """The writes that touch ``[offset, offset + length)``, and how many of their bytes fall in it."""
    overlaps = ((w, w.overlap_bytes(offset_bytes, length_bytes)) for w in writes)
    inside = [(w, n) for w, n in overlaps if n > 0]
    zeroes = [n for w, n in inside if w.zeroes]
    data = [n for w, n in inside if not w.zeroes]
    return WritesInRange(len(zeroes), sum(zeroes), len(data), sum(data))
