"""QEMU ``log`` trace backend output: per-request start/end events, paired into requests.

This is the *exact* host-observed depth source (docs/rules/queue-depth.md) on KVM/QEMU: with
``-msg timestamp=on -D FILE -trace enable=EVENT`` each line reads
``PID@SEC.USEC:event args`` and the paired start/end events of one request give its
latency, and the number of requests in flight when each new one arrived.

Event formats are those of QEMU 7.2 (/usr/share/qemu/trace-events-all):

- virtio-blk: ``virtio_blk_handle_read|write vdev %p req %p sector %u nsectors %zu`` /
  ``virtio_blk_req_complete vdev %p req %p status %d``, paired by (vdev, req). Flushes have no
  start event in 7.2, so they are not seen on virtio-blk.
- SCSI (virtio-scsi, lsi53c895a, megasas, mptsas1068): ``scsi_req_parsed target %d lun %d tag %d
  command %d dir %d length %d`` (command is the decimal CDB opcode), ``scsi_req_parsed_lba ... lba %u``
  / ``scsi_req_dequeue target %d lun %d tag %d``, paired by (target, lun, tag). Commands other
  than READ/WRITE/SYNCHRONIZE CACHE (INQUIRY, TEST UNIT READY...) are left out.
- NVMe: ``pci_nvme_io_cmd cid %u nsid 0x%x sqid %u opc 0x%x opname '%s'`` (gives the queue and
  flushes, opc 0x0), ``pci_nvme_read cid %u nsid %u nlb %u count %u lba 0x%x`` and
  ``pci_nvme_write cid %u opname '%s' nsid ...`` / ``pci_nvme_enqueue_req_completion cid %u cqid %u
  ...``, paired by (queue, cid); Linux pairs submission and completion queues one to one.
  Completions on queue 0 (admin commands) are left out.
- AHCI (ich9-ahci), NCQ commands: ``process_ncq_command ahci(%p)[%d][tag:%d]: NCQ op 0x%02x on
  sectors [%PRId64,%PRId64]`` (the first and last sector, inclusive) / ``ncq_finish ahci(%p)[%d][tag:%d]:
  NCQ transfer finished``, paired by (HBA, port, tag). READ/WRITE FPDMA QUEUED (0x60/0x61) only.
  ATA's non-queued commands (FLUSH CACHE among them: Linux's libata sends no FUA by default)
  have no completion event, so flushes are not seen on AHCI; nor is anything on PIIX IDE,
  whose only per-request event (``ide_dma_cb``) marks the start of each DMA chunk.

Offsets are in 512-byte LBNs whatever the device's block size. Requests still in flight when
the trace ends are dropped.
"""

from __future__ import annotations

import heapq
import itertools
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from model.errors import ParseError
from model.parse.histogram import DIRECTIONS, Histogram, HistogramKind, HistogramSet

LBN_BYTES = 512
SCSI_READ_OPCODES = frozenset({0x08, 0x28, 0x88, 0xA8})
SCSI_WRITE_OPCODES = frozenset({0x0A, 0x2A, 0x8A, 0xAA})
SCSI_FLUSH_OPCODES = frozenset({0x35, 0x91})
Op = Literal["read", "write", "flush"]
_NVME_OPC: dict[int, Op] = {0x00: "flush", 0x01: "write", 0x02: "read"}
_NCQ_OPC: dict[int, Op] = {0x60: "read", 0x61: "write"}  # READ / WRITE FPDMA QUEUED

START_EVENTS = frozenset({"virtio_blk_handle_read", "virtio_blk_handle_write", "scsi_req_parsed",
                          "scsi_req_parsed_lba", "pci_nvme_io_cmd", "pci_nvme_read", "pci_nvme_write",
                          "process_ncq_command"})
END_EVENTS = frozenset({"virtio_blk_req_complete", "scsi_req_dequeue", "pci_nvme_enqueue_req_completion",
                        "ncq_finish"})

_LINE = re.compile(r"^(?:(?P<iso>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z)\s+)?"
                   r"(?:(?P<pid>\d+)@(?P<sec>\d+)\.(?P<usec>\d{6}):)?(?P<event>[a-z][a-z0-9_]*)(?:\s+(?P<args>.*))?$")
_ARG = re.compile(r"(\w+)\s+('[^']*'|\S+)")
_AHCI = re.compile(r"^ahci\((?P<hba>[^)]*)\)\[(?P<port>\d+)\]\[tag:(?P<tag>\d+)\]:\s*"
                   r"(?:NCQ op 0x(?P<cmd>[0-9a-fA-F]+) on sectors \[(?P<first>\d+),(?P<last>\d+)\])?")


@dataclass(frozen=True)
class IoEvent:
    """One start or completion of a request, as read from one trace line.

    ``key`` pairs a start with its completion. ``op`` is None for a start that carries no
    I/O (a SCSI INQUIRY) and for completions. A ``detail`` event (scsi_req_parsed_lba,
    pci_nvme_read after pci_nvme_io_cmd) completes the start with the same key.
    """

    time_us: int
    phase: Literal["start", "detail", "complete"]
    key: tuple[object, ...]
    op: Literal["read", "write", "flush"] | None = None
    offset_lbn: int | None = None
    length_bytes: int = 0
    lineno: int = 0


@dataclass(frozen=True)
class TracedRequest:
    """One request as the virtual device saw it, start to completion.

    ``outstanding_at_issue`` counts the requests in flight when it arrived, itself included
    (1 = nothing else was queued), like vscsiStats's outstandingIOs.
    """

    start_us: int
    end_us: int
    is_write: bool
    is_flush: bool
    offset_lbn: int
    length_bytes: int
    outstanding_at_issue: int

    @property
    def latency_us(self) -> int:
        return self.end_us - self.start_us

    @property
    def length_lbns(self) -> int:
        """Blocks covered, at least 1 so that a zero-length command still has a position."""
        return max(1, math.ceil(self.length_bytes / LBN_BYTES))


def _int(args: dict[str, str], key: str, where: str) -> int:
    if key not in args:
        raise ParseError(f"{where}: no {key!r} argument (is the trace from QEMU 7.2's trace-events format?)")
    try:
        return int(args[key].strip("'"), 0)
    except ValueError:
        raise ParseError(f"{where}: {key}={args[key]!r} is not a number") from None


def _ahci_event(name: str, text: str, time_us: int, lineno: int, where: str) -> IoEvent:
    m = _AHCI.match(text)
    if m is None or (name == "process_ncq_command" and m.group("cmd") is None):
        raise ParseError(f"{where}: {name} arguments {text!r} are not in QEMU 7.2's format "
                         "'ahci(%p)[port][tag:N]: ...'")
    key = ("ahci", m.group("hba"), int(m.group("port")), int(m.group("tag")))
    if name == "ncq_finish":
        return IoEvent(time_us, "complete", key, lineno=lineno)
    first, last = int(m.group("first")), int(m.group("last"))
    return IoEvent(time_us, "start", key, _NCQ_OPC.get(int(m.group("cmd"), 16)), first,
                   (last - first + 1) * LBN_BYTES, lineno)


def _event(name: str, args: dict[str, str], time_us: int, lineno: int, where: str,
           scsi_block_bytes: int, text: str = "") -> IoEvent | None:
    def a(key: str) -> int:
        return _int(args, key, where)

    if name in ("process_ncq_command", "ncq_finish"):
        return _ahci_event(name, text, time_us, lineno, where)
    if name in ("virtio_blk_handle_read", "virtio_blk_handle_write"):
        return IoEvent(time_us, "start", ("vblk", args.get("vdev"), args.get("req")),
                       "write" if name.endswith("write") else "read", a("sector"), a("nsectors") * LBN_BYTES, lineno)
    if name == "virtio_blk_req_complete":
        return IoEvent(time_us, "complete", ("vblk", args.get("vdev"), args.get("req")), lineno=lineno)
    if name.startswith("scsi_req_"):
        key = ("scsi", a("target"), a("lun"), a("tag"))
        if name == "scsi_req_dequeue":
            return IoEvent(time_us, "complete", key, lineno=lineno)
        cmd = a("command")
        op: Literal["read", "write", "flush"] | None = (
            "read" if cmd in SCSI_READ_OPCODES else "write" if cmd in SCSI_WRITE_OPCODES
            else "flush" if cmd in SCSI_FLUSH_OPCODES else None)
        if name == "scsi_req_parsed":
            return IoEvent(time_us, "start", key, op, None, a("length"), lineno)
        return IoEvent(time_us, "detail", key, op, a("lba") * scsi_block_bytes // LBN_BYTES, 0, lineno)
    if name == "pci_nvme_io_cmd":
        return IoEvent(time_us, "start", ("nvme", a("sqid"), a("cid")), _NVME_OPC.get(a("opc")), 0, 0, lineno)
    if name in ("pci_nvme_read", "pci_nvme_write"):
        nlb, count = a("nlb"), a("count")
        block = count // nlb if nlb else LBN_BYTES
        return IoEvent(time_us, "detail", ("nvme", None, a("cid")), "write" if name.endswith("write") else "read",
                       a("lba") * block // LBN_BYTES, count, lineno)
    if name == "pci_nvme_enqueue_req_completion":
        return IoEvent(time_us, "complete", ("nvme", a("cqid"), a("cid")), lineno=lineno)
    return None


def _time_us(m: re.Match[str], where: str) -> int:
    if m.group("sec") is not None:
        return int(m.group("sec")) * 1_000_000 + int(m.group("usec"))
    if m.group("iso") is not None:
        stamp = datetime.fromisoformat(m.group("iso"))
        return int(stamp.timestamp()) * 1_000_000 + stamp.microsecond
    raise ParseError(f"{where}: trace line has no timestamp; run QEMU with -msg timestamp=on "
                     "so that the log backend writes PID@SEC.USEC: before each event")


def parse_trace_events(text: str, source: str = "QEMU trace", scsi_block_bytes: int = 512) -> Iterator[IoEvent]:
    """The start/detail/complete events in ``text``, in file order; other lines are skipped.

    ``scsi_block_bytes`` is the SCSI disk's logical block size, to turn its LBAs into 512-byte LBNs.
    """
    for lineno, line in enumerate(text.splitlines(), start=1):
        m = _LINE.match(line.strip())
        if m is None or (m.group("event") not in START_EVENTS and m.group("event") not in END_EVENTS):
            continue
        where = f"{source} line {lineno}"
        text = m.group("args") or ""
        args = dict(_ARG.findall(text))
        event = _event(m.group("event"), args, _time_us(m, where), lineno, where, scsi_block_bytes, text)
        if event is not None:
            yield event


def pair_requests(events: Iterable[IoEvent]) -> list[TracedRequest]:
    """Pair starts with completions into requests, counting what was in flight at each start.

    Events must be in trace order. A completion without a start (a request begun before the
    trace, a flush on virtio-blk, an NVMe admin command) is skipped.
    """
    pending: dict[tuple[object, ...], IoEvent] = {}
    # The NVMe command a pci_nvme_read/write detail belongs to: QEMU emits the detail right
    # after its pci_nvme_io_cmd. A cid alone is not enough: each queue has its own cids, and
    # with several queues the same cid is in flight on two of them at once.
    last_io_cmd: tuple[object, ...] | None = None
    depth_at_start: dict[tuple[object, ...], int] = {}
    in_flight = 0
    done: list[TracedRequest] = []
    for ev in events:
        key = ev.key
        if ev.phase == "detail":
            if key[0] == "nvme":
                if last_io_cmd is None or last_io_cmd[2] != key[2]:
                    continue  # its pci_nvme_io_cmd came before the trace started (or was not traced)
                key = last_io_cmd
            start = pending.get(key)
            if start is None:
                continue
            # the start decided the operation (NVMe write zeroes, opc 0x8, stays left out)
            pending[key] = IoEvent(start.time_us, start.phase, start.key, start.op, ev.offset_lbn,
                                   ev.length_bytes or start.length_bytes, start.lineno)
            continue
        if ev.phase == "start":
            if key in pending and pending[key].op is not None:
                in_flight -= 1  # its completion was lost: forget it rather than count it forever
            pending[key] = ev
            if key[0] == "nvme" and key[1] is not None:
                last_io_cmd = key
            if ev.op is not None:
                in_flight += 1
                depth_at_start[key] = in_flight
            continue
        start = pending.pop(key, None)
        if start is None or start.op is None:
            continue
        in_flight -= 1
        done.append(TracedRequest(start.time_us, ev.time_us, start.op == "write", start.op == "flush",
                                  start.offset_lbn or 0, 0 if start.op == "flush" else start.length_bytes,
                                  depth_at_start.pop(key)))
    done.sort(key=lambda r: r.start_us)
    return done


def parse_qemu_trace(text: str, source: str = "QEMU trace", scsi_block_bytes: int = 512) -> list[TracedRequest]:
    """The completed requests of a QEMU log-backend trace, ordered by start time."""
    return pair_requests(parse_trace_events(text, source, scsi_block_bytes))


def _outstanding(requests: list[TracedRequest]) -> list[int]:
    """In flight at each start among ``requests`` alone (sorted by start), itself included."""
    ends: list[int] = []
    result = []
    for r in requests:
        while ends and ends[0] <= r.start_us:
            heapq.heappop(ends)
        heapq.heappush(ends, r.end_us)
        result.append(len(ends))
    return result


def _distance(new: TracedRequest, prev: TracedRequest) -> int:
    """vscsiStats's seek distance: from the previous command's last LBN, so sequential is +1."""
    return new.offset_lbn - (prev.offset_lbn + prev.length_lbns - 1)


def histograms_from_requests(requests: Iterable[TracedRequest]) -> HistogramSet:
    """vscsiStats's histograms computed from traced requests.

    "all" outstanding IOs uses each request's exact ``outstanding_at_issue``; the read and
    write ones count only reads (writes) in flight, like vscsiStats. Flushes count in
    outstanding IOs, latency and interarrival of "all", but carry no length or position, so
    they are left out of IO lengths and seek distances. A distance or interarrival needs a
    predecessor, so those histograms have one value fewer than there are requests.
    """
    ordered = sorted(requests, key=lambda r: r.start_us)
    subsets = {"all": ordered, "read": [r for r in ordered if not r.is_write and not r.is_flush],
               "write": [r for r in ordered if r.is_write]}
    out: list[Histogram] = []
    for direction in DIRECTIONS:
        reqs = subsets[direction]
        data = [r for r in reqs if not r.is_flush]
        depth = [r.outstanding_at_issue for r in reqs] if direction == "all" else _outstanding(reqs)
        out += [
            Histogram.from_values(HistogramKind.IO_LENGTH, direction, (r.length_bytes for r in data)),
            Histogram.from_values(HistogramKind.SEEK_DISTANCE, direction,
                                  (_distance(b, a) for a, b in itertools.pairwise(data))),
            Histogram.from_values(HistogramKind.LATENCY_US, direction, (r.latency_us for r in reqs)),
            Histogram.from_values(HistogramKind.OUTSTANDING_IOS, direction, depth),
            Histogram.from_values(HistogramKind.INTERARRIVAL_US, direction,
                                  (b.start_us - a.start_us for a, b in itertools.pairwise(reqs))),
        ]
    data = [r for r in ordered if not r.is_flush]
    last = [r.offset_lbn + r.length_lbns - 1 for r in data]  # each one's last LBN, as _distance counts
    closest = [min((r.offset_lbn - p for p in last[max(0, i - 16):i]), key=abs) for i, r in enumerate(data) if i]
    out.append(Histogram.from_values(HistogramKind.SEEK_DISTANCE_PREV16, "all", closest))
    return HistogramSet(tuple(out))
