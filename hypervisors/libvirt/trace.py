"""Exact host-side I/O on KVM/QEMU: QEMU's per-request trace events, switched on for a window.

QEMU's ``log`` trace backend writes one line per event to its log file. The events for one
controller family (virtio-blk, SCSI, NVMe, AHCI; see model/parse/qemutrace.py) are enabled at run time
through the monitor (QMP ``trace-event-set-state``, via libvirt's monitor passthrough), only
for the measured window, and paired into requests, from which vscsiStats-style histograms
are built. Nothing is traced outside a window, so the guest runs at full speed otherwise.

Where the events go:
- a domain the suite starts is given ``-D <run dir>/qemu-trace.log`` on its command line;
- an already running domain (a user's VM) keeps its own set-up; its log output is pointed at
  a file of ours for the window with the HMP ``logfile`` command, and at /dev/null after
  (QEMU's log file only receives ``-d`` debug output and trace events, both off by default).

Limits of QEMU 7.2's events: SCSI events carry target/LUN/tag but not the HBA, and
virtio-blk events carry a device pointer that the monitor does not map to a device id. So
the requests of one window are those of every disk of the same family; ``check_isolated``
compares the traced count with this disk's own counters and refuses a window where other
disks of the family were busy.
"""

from __future__ import annotations

import logging
import os
import pwd
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any, Protocol

from model.errors import HypervisorError, TraceIncomplete
from model.parse.blockstats import HostBlockCounters, HostCountersDelta
from model.parse.qemutrace import END_EVENTS, TracedRequest, histograms_from_requests, parse_qemu_trace
from model.types import HostTrace

log = logging.getLogger("vioconform.trace")

#: The start/detail/end events of each controller family, as in QEMU 7.2's trace-events.
FAMILY_EVENTS: dict[str, tuple[str, ...]] = {
    "virtio-blk": ("virtio_blk_handle_read", "virtio_blk_handle_write", "virtio_blk_req_complete"),
    "scsi": ("scsi_req_parsed", "scsi_req_parsed_lba", "scsi_req_dequeue"),
    "nvme": ("pci_nvme_io_cmd", "pci_nvme_read", "pci_nvme_write", "pci_nvme_enqueue_req_completion"),
    "ahci": ("process_ncq_command", "ncq_finish"),
}

#: Each family's completion events (those the tracer must never miss while starts are on).
END_EVENTS_BY_FAMILY: dict[str, tuple[str, ...]] = {
    family: tuple(e for e in events if e in END_EVENTS) for family, events in FAMILY_EVENTS.items()}

EXACT_SOURCE = "exact (QEMU trace events)"


class TraceUnavailable(HypervisorError):
    """This QEMU cannot deliver the events (built without the log trace backend, or too old)."""


def qemu_user() -> tuple[int, int]:
    """uid/gid QEMU runs as under the system daemon (Debian: libvirt-qemu)."""
    try:
        pw = pwd.getpwnam("libvirt-qemu")
        return pw.pw_uid, pw.pw_gid
    except KeyError:
        return os.getuid(), os.getgid()


def prepare_log_file(path: Path) -> Path:
    """Create the trace log so that QEMU (running as its own user) can append to it."""
    path.touch()
    uid, gid = qemu_user()
    os.chown(path, uid, gid)
    path.chmod(0o644)
    return path


class LocalLog:
    """The trace log on this machine (a local libvirt host); ``hostfiles.RemoteFiles`` offers the
    same three operations for a log on a remote host."""

    def for_qemu(self, path: PurePath) -> None:
        prepare_log_file(Path(path))

    def size(self, path: PurePath) -> int:
        p = Path(path)
        return p.stat().st_size if p.exists() else 0

    def read(self, path: PurePath, offset: int = 0) -> bytes:
        p = Path(path)
        if not p.exists():
            return b""
        with open(p, "rb") as f:
            f.seek(offset)
            return f.read()


class LogFiles(Protocol):
    """Where the trace log is: this machine (``LocalLog``) or the libvirt host over SFTP."""

    def for_qemu(self, path: PurePath) -> None: ...

    def size(self, path: PurePath) -> int: ...

    def read(self, path: PurePath, offset: int = ...) -> bytes: ...


class QmpChannel(Protocol):
    """All QemuTracer needs of a domain: its monitor, and the counters of the traced disk
    (``hypervisors.libvirt.qmp.DomainQmp`` through libvirt)."""

    @property
    def domain(self) -> str: ...

    @property
    def device(self) -> str: ...

    def execute(self, command: dict[str, object]) -> dict[str, Any]: ...

    def counters(self) -> HostBlockCounters: ...


def deliverable(reply: dict[str, Any]) -> bool:
    """Whether QMP ``trace-event-get-state``'s ``reply`` says QEMU can deliver the event: it names it, and
    not as "unavailable" (a QEMU built without the log trace backend)."""
    states = reply.get("return")
    return isinstance(states, list) and bool(states) and not any(s.get("state") == "unavailable" for s in states)


class QemuTracer:
    """Switches one family's trace events on and off in a running domain and reads them back.

    ``logical_block_bytes``: the disk's logical block size, the unit of SCSI events' positions."""

    def __init__(self, channel: QmpChannel, family: str, log_path: PurePath, logical_block_bytes: int = 512,
                 redirect_log: bool = False, files: LogFiles | None = None) -> None:
        if family not in FAMILY_EVENTS:
            raise TraceUnavailable(f"no QEMU trace events are known for controller family {family!r}")
        self.channel = channel
        self.domain = channel.domain
        self.family = family
        self.log_path = log_path
        self.logical_block_bytes = logical_block_bytes
        self.redirect_log = redirect_log
        self.files: LogFiles = files or LocalLog()
        self._offset = 0
        self._on = False

    def check_available(self) -> None:
        """Raise TraceUnavailable unless every event of the family can be switched on."""
        for event in FAMILY_EVENTS[self.family]:
            reply = self.channel.execute({"execute": "trace-event-get-state", "arguments": {"name": event}})
            if not deliverable(reply):
                raise TraceUnavailable(
                    f"QEMU of domain {self.domain} cannot deliver trace event {event} ({reply}); it needs "
                    "QEMU built with the 'log' trace backend (Debian's is)")

    def _set(self, enable: bool) -> None:
        """Completion events are switched on before start events and off after them. Otherwise
        a request that starts and completes between the two QMP commands (a few ms on a busy
        host, one 5 ms request at depth 1) leaves a start without its completion, counted in
        flight for the rest of the window: seen as a host depth of 2 at offered depth 1."""
        events = FAMILY_EVENTS[self.family]
        ends = END_EVENTS_BY_FAMILY[self.family]
        others = tuple(e for e in events if e not in ends)
        for event in (ends + others if enable else others + ends):
            self.channel.execute({"execute": "trace-event-set-state", "arguments": {"name": event, "enable": enable}})

    def _hmp(self, command: str) -> None:
        self.channel.execute({"execute": "human-monitor-command", "arguments": {"command-line": command}})

    def start(self) -> None:
        if self.redirect_log:
            self.files.for_qemu(self.log_path)
            self._hmp(f"logfile {self.log_path}")
        self._offset = self.files.size(self.log_path)
        self._set(True)
        self._on = True
        self._counters, self._read0 = self._read_counters()

    def _read_counters(self) -> tuple[HostBlockCounters, CounterRead]:
        """The disk's counters and when they were read: between the two ends of the QMP round
        trip, on the wall clock, which is the trace log's (QEMU's log backend stamps events with
        gettimeofday)."""
        before = time.time()
        counters = self.channel.counters()
        return counters, CounterRead(int(before * 1e6), int(time.time() * 1e6))

    def stop(self) -> HostTrace:
        """Switch the events off and return the window's requests."""
        counters, read1 = self._read_counters()
        own = HostCountersDelta.between(self._counters, counters)
        self._set(False)
        self._on = False
        if self.redirect_log:
            self._hmp("logfile /dev/null")
        time.sleep(0.05)  # the last lines are written by QEMU's I/O thread
        text = self.files.read(self.log_path, self._offset).decode(errors="replace")
        requests = tuple(parse_qemu_trace(text, source=f"{self.log_path}",
                                          scsi_block_bytes=self.logical_block_bytes))
        # Compared with the counters: data requests (QEMU 7.2's NVMe does not count its flushes in
        # query-blockstats) that completed between the two counter reads (the counters count
        # completions). The events are on a few QMP round trips longer than that: on a busy
        # 2-core TCG host 2.8 % more requests than the counters' window at depth 16.
        edges = counter_window(requests, self._read0, read1)
        what = f"trace of {self.channel.device} in {self.domain}"
        check_isolated(edges.inner, own.requests, what)
        check_complete(edges.outer, own.requests, what, self.family)
        return HostTrace(histograms_from_requests(requests), requests, EXACT_SOURCE, own.requests,
                         own.elapsed_ns / 1e9, edges.middle, (edges.inner, edges.outer))

    def abort(self) -> None:
        """Switch events off after an error; used by the cleanup stack."""
        if self._on:
            try:
                self._set(False)
                if self.redirect_log:
                    self._hmp("logfile /dev/null")
            finally:
                self._on = False


#: The traced requests surely inside the counters' window (``CounterWindow.inner``) cannot
#: exceed the counters' delta, nor can those possibly inside it (``outer``) fall short of it,
#: but for a request whose completion event and counter update land on either side of a read:
#: a few. The 5 % (and 10 requests) allow that with room; beyond it, another disk of the
#: family was busy, or the family's events miss commands.
ISOLATION_TOLERANCE = 0.05


def check_isolated(traced: int, own_requests: int, what: str) -> None:
    """Refuse a trace that holds more requests than the disk's own counters explain."""
    if own_requests == 0 and traced == 0:
        return
    if traced > own_requests * (1 + ISOLATION_TOLERANCE) + 10:
        raise HypervisorError(
            f"{what}: the trace holds {traced} requests but the disk's own counters only {own_requests}; "
            "another disk of the same controller family was busy during the window, and QEMU's trace "
            "events cannot tell them apart. Keep the other disks idle while recording.")


def completed_between(requests: Iterable[TracedRequest], t0_us: int, t1_us: int) -> int:
    """How many data requests (not flushes) completed in [t0_us, t1_us]."""
    return sum(1 for r in requests if not r.is_flush and t0_us <= r.end_us <= t1_us)


@dataclass(frozen=True)
class CounterRead:
    """When one read of the disk's counters happened: somewhere in [before_us, after_us], the
    QMP round trip (a few ms on an idle host; on a loaded 2-core TCG host long enough to put the
    count between the round trips' middles several percent off the counters' delta)."""

    before_us: int
    after_us: int

    @property
    def middle_us(self) -> int:
        return (self.before_us + self.after_us) // 2


@dataclass(frozen=True)
class CounterWindow:
    """Traced data requests completed in the counters' window, counted three ways: ``inner``
    (surely inside it: from the end of the first read to the start of the second), ``outer``
    (possibly inside it: from the start of the first read to the end of the second) and
    ``middle`` (between the two round trips' middles, the estimate). On an isolated disk whose
    every request is traced, inner <= the counters' delta <= outer, however slow QMP was."""

    inner: int
    middle: int
    outer: int


def counter_window(requests: Sequence[TracedRequest], first: CounterRead, second: CounterRead) -> CounterWindow:
    return CounterWindow(completed_between(requests, first.after_us, second.before_us),
                         completed_between(requests, first.middle_us, second.middle_us),
                         completed_between(requests, first.before_us, second.after_us))


#: Why a family's trace can hold fewer requests than the disk's counters.
UNTRACED_COMMANDS = {
    "ahci": "QEMU 7.2 traces only AHCI's NCQ commands: the guest sent non-queued ATA commands "
            "(NCQ off, as with queue_depth 1)",
}


def check_complete(traced: int, own_requests: int, what: str, family: str) -> None:
    """Refuse a trace that misses requests the disk's own counters saw (beyond the window's edges)."""
    if traced < own_requests * (1 - ISOLATION_TOLERANCE) - 10:
        why = UNTRACED_COMMANDS.get(family, f"the device carried commands its {family} trace events do not show")
        raise TraceIncomplete(f"{what}: the trace holds {traced} of the disk's {own_requests} requests; {why}",
                              f"traced {traced} of {own_requests} requests; {why}")


def domain_trace_args(log_path: PurePath) -> list[str]:
    """QEMU arguments for a domain the suite starts: the log file the events go to."""
    return ["-D", str(log_path)]


class _Monitor(Protocol):
    @property
    def domain(self) -> str: ...

    def execute(self, command: dict[str, Any]) -> dict[str, Any]: ...


class EventLogWindow:
    """QEMU trace ``events`` switched on through the monitor for a window, and the domain's trace log
    (``log_path``, where ``files`` finds it) read back from where it stood when the window opened: the
    lines the events wrote meanwhile. ``abort`` switches them off after a failure, never raising."""

    def __init__(self, monitor: _Monitor, events: Sequence[str], log_path: PurePath, files: LogFiles) -> None:
        self.monitor, self.events, self.log_path, self.files = monitor, tuple(events), log_path, files
        self._offset = 0
        self._on = False

    def _set(self, enable: bool) -> None:
        for event in self.events:
            reply = self.monitor.execute({"execute": "trace-event-set-state",
                                          "arguments": {"name": event, "enable": enable}})
            err = reply.get("error")
            if err:
                said = err.get("desc", err) if isinstance(err, dict) else err
                raise HypervisorError(f"QMP trace-event-set-state {event} on {self.monitor.domain} failed: {said}")

    def start(self) -> None:
        self._offset = self.files.size(self.log_path)
        self._on = True
        self._set(True)

    def stop_text(self) -> str:
        """Switch the events off and return the window's lines."""
        self._set(False)
        self._on = False
        time.sleep(0.05)  # the last lines are written by QEMU's I/O thread
        return self.files.read(self.log_path, self._offset).decode(errors="replace")

    def abort(self) -> None:
        if self._on:
            try:
                self._set(False)
            except HypervisorError as e:
                log.warning("could not switch %s off: %s", ", ".join(self.events), e)
            finally:
                self._on = False

