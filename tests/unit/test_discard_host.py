"""The discard rule's host side on this machine (hypervisors/libvirt/discard.py) and the scratch disks'
discard mode: every file-backed disk's nodes are opened with discard=unmap, so that QEMU gives a
discarded range back to the file (libvirt's default, discard=ignore, keeps the blocks)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.libvirt_python import REASON

pytest.importorskip("libvirt", reason=REASON)

from hypervisors.libvirt.controllers import disk_devices
from hypervisors.libvirt.discard import BackendWriteTrace, QmpDiscardObserver, allocated_in, punch_hole_problem
from hypervisors.libvirt.hostfiles import LocalFiles
from hypervisors.libvirt.trace import LocalLog
from model.disks import suite_disks
from model.parse.backend_writes import BackendWrite


def test_every_file_backed_disk_gives_discarded_space_back(tmp_path: Path) -> None:
    specs = suite_disks(["virtio-blk", "virtio-scsi", "megasas-gen2", "nvme", "ahci", "ide"])
    for s in specs:
        (tmp_path / f"dut{s.index}.img").write_bytes(b"")
    xml, args = disk_devices(specs, tmp_path)
    drivers = [x for x in xml if x.startswith("<disk")]
    assert drivers and all("discard='unmap'" in x for x in drivers), drivers
    files = [json.loads(v) for f, v in zip(args[::2], args[1::2], strict=False)
             if f == "-blockdev" and json.loads(v)["driver"] == "raw"]
    assert files and all(b["discard"] == "unmap" and b["file"]["discard"] == "unmap" for b in files), files


def test_allocation_is_read_with_seek_data_and_a_punched_hole_gives_it_back(tmp_path: Path) -> None:
    assert punch_hole_problem(tmp_path) is None  # the project's temp directories sit on ext4 or tmpfs
    assert list(tmp_path.iterdir()) == []  # the probe file is gone
    f = tmp_path / "disk.img"
    with open(f, "wb") as out:
        out.truncate(1 << 20)
        out.seek(64 * 1024)
        out.write(b"\x5a" * (128 * 1024))
        out.flush()
        os.fsync(out.fileno())
    assert allocated_in(f, 0, 1 << 20) == 128 * 1024
    assert allocated_in(f, 96 * 1024, 16 * 1024) == 16 * 1024
    assert allocated_in(f, 512 * 1024, 4096) == 0


class _Monitor:
    """A domain's monitor that appends to its trace log what QEMU would while ``blk_co_pwritev`` is on."""

    domain, device = "vioconform-7", "ua-vioc-dut03"

    def __init__(self, log: Path, lines: str) -> None:
        self.log, self.lines = log, lines
        self.sent: list[dict[str, object]] = []

    def execute(self, command: dict[str, object]) -> dict[str, object]:
        self.sent.append(command)
        if command["execute"] == "trace-event-get-state":
            return {"return": [{"name": "blk_co_pwritev", "state": "disabled" if self.lines else "unavailable"}]}
        args = command.get("arguments")
        if isinstance(args, dict) and args.get("enable"):
            with open(self.log, "a") as f:
                f.write(self.lines)
        return {"return": {}}


def test_the_write_trace_reads_only_its_windows_lines_and_switches_the_event_off(tmp_path: Path) -> None:
    """The log's lines from before the window are not read; the event is off after stop (and after abort)."""
    log = tmp_path / "qemu-trace.log"
    log.write_text("1@1.000001:blk_co_pwritev blk 0x1 bs 0x2 offset 0 bytes 4096 flags 0x0\n")  # an earlier window
    monitor = _Monitor(log, "1@2.000001:blk_co_pwritev blk 0x1 bs 0x2 offset 545259520 bytes 1048576 flags 0x2\n")
    trace = BackendWriteTrace(monitor, log, LocalLog())  # type: ignore[arg-type]
    trace.start()
    assert trace.stop() == (BackendWrite(545259520, 1 << 20, 0x2),)
    assert [c["arguments"] for c in monitor.sent] == [{"name": "blk_co_pwritev", "enable": True},
                                                      {"name": "blk_co_pwritev", "enable": False}]
    trace.start()
    trace.abort()
    trace.abort()  # off already: nothing sent
    assert len(monitor.sent) == 4 and monitor.sent[-1]["arguments"] == {"name": "blk_co_pwritev", "enable": False}


def test_a_qemu_that_cannot_deliver_the_event_has_no_write_trace(tmp_path: Path) -> None:
    """QEMU built without the log trace backend: the rule then notes that the host cannot tell zeroes from writes."""
    log = tmp_path / "qemu-trace.log"
    disk = tmp_path / "dut3.img"
    disk.write_bytes(b"")
    observer = QmpDiscardObserver(_Monitor(log, ""), LocalFiles(), disk, log, LocalLog())  # type: ignore[arg-type]
    assert observer.write_trace() is None
    delivering = QmpDiscardObserver(_Monitor(log, "x"), LocalFiles(), disk, log, LocalLog())  # type: ignore[arg-type]
    assert isinstance(delivering.write_trace(), BackendWriteTrace)
    assert QmpDiscardObserver(_Monitor(log, "x"), LocalFiles(), disk).write_trace() is None  # type: ignore[arg-type]
