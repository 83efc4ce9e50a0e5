"""The replay's host actions on a disk's backing file: the replay's own copy of the run's file (in its
output directory, where main.py recreated it), found through QEMU's monitor (``query-block``: the file
under the disk's device), never by a name the guest gives.

Example (the guest's script asks ``host alloc ua-vioc-dut01 536870912 1048576``)::

    allocated(qmp, ["ua-vioc-dut01", "536870912", "1048576"])   # "1048576": every byte holds data
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path

from model.errors import ParseError
from model.parse.blockstats import parse_qmp_unmap
from model.sparse_file import allocated_in
from replay.qmp import Qmp, QmpError


def disk_file(qmp: Qmp, ref: str) -> Path:
    """The raw file under the disk's device ``ref`` (its qdev id), from QEMU's ``query-block``; QmpError
    for a disk QEMU does not list or one whose image is not raw (its file is not the guest's bytes)."""
    for entry in qmp.execute("query-block").get("return", []):
        names = [str(entry.get(k, "")) for k in ("qdev", "device")]
        if not any(n == ref or n.startswith(f"/machine/peripheral/{ref}/") for n in names):
            continue
        inserted = entry.get("inserted") or {}
        if inserted.get("drv") != "raw":
            raise QmpError(f"disk {ref} is a {inserted.get('drv')} image, not raw: its file is not the guest's bytes")
        return Path(str(inserted.get("file")))
    raise QmpError(f"QEMU's query-block lists no disk {ref}")


def file_of(qmp: Qmp, args: Sequence[str]) -> str:
    """``file <device>``: the path of the disk's file (for the verdict's words)."""
    (ref,) = args
    return str(disk_file(qmp, ref))


def allocated(qmp: Qmp, args: Sequence[str]) -> str:
    """``alloc <device> <offset> <length>``: how many bytes of that range of the disk's file hold data."""
    ref, offset, length = args
    return str(allocated_in(disk_file(qmp, ref), int(offset), int(length)))


def unmapped(qmp: Qmp, args: Sequence[str]) -> str:
    """``unmap <device>``: the disk's discard counters now (model.parse.blockstats.HostUnmapCounters), as
    one line of JSON."""
    (ref,) = args
    try:
        counters = parse_qmp_unmap(qmp.execute("query-blockstats"), ref)
    except ParseError as e:
        raise QmpError(str(e)) from e
    return json.dumps(dataclasses.asdict(counters), separators=(",", ":"))
