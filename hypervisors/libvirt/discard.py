"""A disk's discards as the libvirt host sees them: QMP ``query-blockstats`` unmap counters of its
device, and which bytes of its backing file still hold data (``SEEK_DATA``/``SEEK_HOLE`` on the file).

QEMU 7.2 hands a guest's discard to the raw file as a hole punched with ``fallocate(PUNCH_HOLE |
KEEP_SIZE)`` when the disk's block nodes are opened with ``discard=unmap`` (the suite's scratch disks
are: libvirt's ``<driver discard='unmap'/>``, or ``"discard": "unmap"`` on the nodes the suite gives
QEMU itself); with ``discard=ignore`` the device still counts the discard but the file keeps its blocks.
The file is read on this machine; on a remote libvirt host its allocation is not read (the counters still
are), which the rule's verdict says. A write-zeroes is told from a write of data by QEMU's
``blk_co_pwritev`` trace event (model/parse/backend_writes.py: its counters count both as writes).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import tempfile
from pathlib import Path, PurePath

from hypervisors.base import DiscardUnavailable
from hypervisors.libvirt.hostfiles import HostFiles, LocalFiles
from hypervisors.libvirt.qmp import DomainQmp
from hypervisors.libvirt.trace import EventLogWindow, LogFiles, deliverable
from model.parse.backend_writes import EVENT, BackendWrite, parse_backend_writes
from model.parse.blockstats import HostUnmapCounters, parse_qmp_blockstats, parse_qmp_unmap
from model.sparse_file import allocated_in

__all__ = ["BackendWriteTrace", "QmpDiscardObserver", "allocated_in", "punch_hole_problem"]

#: linux/falloc.h
FALLOC_FL_KEEP_SIZE = 0x01
FALLOC_FL_PUNCH_HOLE = 0x02
#: The probe file's size and the hole punched in it: two and one 64 KiB, above any file system's block.
_PROBE_BYTES = 128 * 1024
_PROBE_HOLE_BYTES = 64 * 1024


def punch_hole_problem(directory: Path) -> str | None:
    """Why a file in ``directory`` cannot give space back by a punched hole (what QEMU's discard does),
    or None where it can: a file written there, a hole punched in it, its allocated blocks read again."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    fd, name = tempfile.mkstemp(prefix=".vioc-discard-probe-", dir=directory)
    try:
        os.write(fd, b"\x5a" * _PROBE_BYTES)
        os.fsync(fd)
        before = os.fstat(fd).st_blocks
        rc = libc.fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, ctypes.c_long(0),
                            ctypes.c_long(_PROBE_HOLE_BYTES))
        if rc != 0:
            err = ctypes.get_errno()
            return f"the file system of {directory} cannot punch holes (fallocate: {errno.errorcode.get(err, err)})"
        after = os.fstat(fd).st_blocks
        if after >= before:
            return (f"the file system of {directory} keeps a punched hole's blocks ({before} blocks of 512 bytes "
                    f"before, {after} after)")
        return None
    finally:
        os.close(fd)
        os.unlink(name)


class BackendWriteTrace(EventLogWindow):
    """``hypervisors.base.WriteTrace`` through QEMU's ``blk_co_pwritev`` trace event
    (model/parse/backend_writes.py), switched on for the window only, read back from the domain's trace
    log (``log_path``, where ``files`` finds it: the ``-D`` file of a domain the suite starts)."""

    def __init__(self, qmp: DomainQmp, log_path: PurePath, files: LogFiles) -> None:
        super().__init__(qmp, (EVENT,), log_path, files)

    def stop(self) -> tuple[BackendWrite, ...]:
        return tuple(parse_backend_writes(self.stop_text(), str(self.log_path)))


class QmpDiscardObserver:
    """``hypervisors.base.DiscardObserver`` of one libvirt disk: its device's counters through QMP, its
    backing file's allocation (on this machine only) and, where the domain has a trace log, its writes."""

    def __init__(self, qmp: DomainQmp, files: HostFiles, path: PurePath, trace_log: PurePath | None = None,
                 log_files: LogFiles | None = None) -> None:
        self.qmp, self.files, self.path = qmp, files, path
        self.trace_log, self.log_files = trace_log, log_files
        if isinstance(files, LocalFiles):
            why = punch_hole_problem(Path(path).parent)
            if why is not None:
                raise DiscardUnavailable(f"{why}: the backing file {path} cannot give discarded space back")

    @property
    def where(self) -> str:
        host = "this machine" if isinstance(self.files, LocalFiles) else self.files.link.address.host
        return f"the backing file {self.path} on {host}"

    def unmap(self) -> HostUnmapCounters:
        return parse_qmp_unmap(self.qmp.execute({"execute": "query-blockstats"}), self.qmp.device)

    def allocated_bytes(self, offset_bytes: int, length_bytes: int) -> int | None:
        if not isinstance(self.files, LocalFiles):
            return None
        return allocated_in(self.path, offset_bytes, length_bytes)

    def written_bytes(self) -> int:
        return parse_qmp_blockstats(self.qmp.execute({"execute": "query-blockstats"}), self.qmp.device, 0).wr_bytes

    def write_trace(self) -> BackendWriteTrace | None:
        """None where the domain has no trace log, or its QEMU cannot deliver the event (built without
        the log trace backend: the event's state is "unavailable")."""
        if self.trace_log is None or self.log_files is None:
            return None
        if not deliverable(self.qmp.execute({"execute": "trace-event-get-state", "arguments": {"name": EVENT}})):
            return None
        return BackendWriteTrace(self.qmp, self.trace_log, self.log_files)
