"""Shared types below every layer: what a disk is, how a guest is reached, what the host traced,
what a rule's test ended as.

Pure data, importable from anywhere (model, transport, guest tools, hypervisors, measure).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from model.device_limits import ConfiguredLimits
from model.disk_settings import DiskSettings
from model.parse.histogram import HistogramKind, HistogramSet
from model.parse.qemutrace import TracedRequest

GIB = 1024**3

#: What a rule's test ended as: in a run's records (reports/records.py), its JUnit file and the store.
Outcome = Literal["passed", "failed", "error", "skipped", "not run"]


@dataclass(frozen=True)
class DiskSpec:
    """One disk under test: which controller carries it and what backs it.

    ``backing`` is ``"latency"`` (a disk with a fixed service time, independent of the host's
    page cache) or ``"file"`` (a sparse file the run creates). ``index`` numbers the disks of
    one guest; the guest sees the disk's serial ``vioc-dut<index>``.
    """

    controller: str
    index: int = 0
    backing: str = "latency"
    size_bytes: int = GIB
    latency_ms: float = 5.0
    queues: int = 1
    physical_block_bytes: int = 512
    optimal_io_bytes: int = 0
    #: "dut": the main disk under test; "scratch": a file-backed disk with 4 KiB physical
    #: blocks for rules that write, partition or need real block sizes
    role: str = "dut"
    #: how the host sets it up (``--disk``, ``--profile``); nothing asked: the suite's own set-up
    settings: DiskSettings = field(default_factory=DiskSettings)

    @property
    def serial(self) -> str:
        """``vioc-dut<index>``, or the asked serial followed by ``-<index>`` (the guest tells the disks apart by it)."""
        if self.settings.serial is not None:
            return f"{self.settings.serial}-{self.index}"
        return f"vioc-dut{self.index}"

    @property
    def logical_block_bytes(self) -> int:
        """The logical block the device advertises: asked, else 512."""
        return self.settings.logical_block_size or 512

    @property
    def physical_bytes(self) -> int:
        """The physical block the device advertises: asked, else the disk's own, never below the logical one."""
        return self.settings.physical_block_size or max(self.physical_block_bytes, self.logical_block_bytes)

    @property
    def label(self) -> str:
        """The part of a test id that names this disk, e.g. ``virtio-scsi:latency5ms``."""
        if self.backing == "latency":
            return f"{self.controller}:latency{self.latency_ms:g}ms"
        return f"{self.controller}:file"


@dataclass(frozen=True)
class SshEndpoint:
    """How to reach the guest. ``host_key`` is the pinned ``"ssh-ed25519 AAAA..."`` line.
    ``via``: where ``host:port`` is not this machine's but a remote libvirt host's loopback, opens
    a connection there (a tunnel of the suite's SSH connection to the host, a socket-like object)."""

    host: str
    port: int
    user: str
    key_path: Path
    host_key: str
    via: Callable[[str, int], Any] | None = None


@dataclass(frozen=True)
class GuestDiskId:
    """How the guest tells a disk from the others: by its ``serial`` (QEMU gives each disk its
    ``DiskSpec.serial``) or by its ``wwn`` (vSphere cannot set a serial; with ``disk.EnableUUID``
    the guest sees the disk's UUID as its WWN: lower-case hex, no dashes). The guest finds it in
    ``/sys/block/*/serial``, ``device/serial``, ``device/vpd_pg80`` or ``device/wwid``."""

    kind: Literal["serial", "wwn"]
    value: str


@dataclass(frozen=True)
class AttachedDisk:
    """A disk under test as attached: ``host_ref`` is the backend's handle for its counters,
    ``guest_id`` how the guest finds it (each backend fills both)."""

    spec: DiskSpec
    host_ref: str
    configured: ConfiguredLimits
    guest_id: GuestDiskId


@dataclass(frozen=True)
class HostTrace:
    """Exact host-side view of one window: every request the virtual device saw.

    ``requests`` is empty where the source gives histograms only (vscsiStats on ESXi).
    """

    histograms: HistogramSet
    requests: tuple[TracedRequest, ...]
    source: str
    #: the disk's own counter delta over ``window_s``, where the source has counters. The events
    #: are on a little longer than that window (switching them takes QMP round trips), so
    #: compare it with ``counted_window_requests``, not with ``count``.
    counter_requests: int | None = None
    window_s: float | None = None
    #: traced data requests that completed inside the counters' window (by the trace's clock,
    #: each counter read placed at the middle of its QMP round trip)
    counted_window_requests: int | None = None
    #: the same count with each read placed at either end of its round trip: (surely inside the
    #: window, possibly inside it). Where every request is traced, ``counter_requests`` lies
    #: between the two however long the reads took.
    counted_window_bounds: tuple[int, int] | None = None

    @property
    def iops(self) -> float | None:
        """Traced requests per second over the counters' window, where the source has one."""
        if self.counted_window_requests is None or not self.window_s:
            return None
        return self.counted_window_requests / self.window_s

    @property
    def count(self) -> int:
        return self.histograms.get(HistogramKind.OUTSTANDING_IOS).count



@dataclass(frozen=True)
class DiskImageInfo:
    """A user's guest image as the suite found it before booting it (``--image``): the file is
    never written; the guest runs on an overlay. ``sha256`` is of the file's bytes, so two runs
    can tell whether they tested the same image."""

    path: Path
    format: str  # "qcow2" or "raw", as qemu-img reports it
    virtual_size_bytes: int
    sha256: str
