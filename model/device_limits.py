"""Device limits: what the suite asks the hypervisor for, and what the guest sees.

Pure data (no hypervisor or SSH import): the limits-advertisement rule compares the two,
and the queue-depth rule takes its expected depth from the configured side.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, fields

from model.errors import ParseError


@dataclass(frozen=True)
class ConfiguredLimits:
    """What the virtual device should offer, as the suite asks the hypervisor for it (what the
    device really advertises is the hypervisor's own answer: ``model.advertised.Advertised``).

    ``queue_depth`` is how many commands the device accepts at once for this disk
    (1 = no command queuing, e.g. IDE). ``None`` means unknown.
    """

    queue_depth: int | None
    max_transfer_bytes: int | None = None
    logical_block_bytes: int = 512
    physical_block_bytes: int = 512
    optimal_io_bytes: int = 0
    write_cache: bool | None = None
    discard: bool | None = None
    queues: int | None = 1  # None: the guest chooses (NVMe: one per vCPU)

    @property
    def command_queuing(self) -> bool:
        return self.queue_depth is None or self.queue_depth > 1


@dataclass(frozen=True)
class GuestLimits:
    """The guest's view of one block device, read from sysfs.

    ``scsi_queue_depth`` is ``/sys/block/X/device/queue_depth`` (None on virtio-blk and NVMe),
    ``can_queue``/``cmd_per_lun`` are the SCSI host's values, ``nr_hw_queues`` counts
    ``/sys/block/X/mq/*``.
    """

    name: str
    nr_requests: int
    max_sectors_kb: int
    max_hw_sectors_kb: int
    logical_block_size: int
    physical_block_size: int
    optimal_io_size: int
    write_cache: str  # "write back" / "write through"
    discard_max_bytes: int
    nr_hw_queues: int
    rotational: int
    scsi_queue_depth: int | None = None
    can_queue: int | None = None
    cmd_per_lun: int | None = None
    driver: str = ""
    read_ahead_kb: int | None = None
    fua: int | None = None  # /sys/block/X/queue/fua: 1 if the guest sends FUA writes
    #: /sys/block/X/queue/max_segments: scatter-gather entries one request may carry
    max_segments: int | None = None
    #: /sys/block/X/queue/io_timeout: the command timeout in ms (None: the driver has no timeout
    #: handler, as Linux 6.1's virtio_blk, or a kernel before 5.0)
    io_timeout_ms: int | None = None

    @property
    def effective_queue_depth(self) -> int:
        """How many requests the guest lets reach the device at once."""
        if self.scsi_queue_depth is not None:
            return min(self.scsi_queue_depth, self.nr_requests)
        return self.nr_requests


_INT_FIELDS = {f.name for f in fields(GuestLimits) if f.name not in ("name", "write_cache", "driver")}


def parse_guest_limits(text: str) -> GuestLimits:
    """Parse ``key=value`` lines, one per field of GuestLimits (the guest's sysfs tool prints them:
    guest/tools/sysfs.py)."""
    values: dict[str, object] = {}
    for line in text.splitlines():
        key, sep, val = line.strip().partition("=")
        if not sep:
            continue
        if key in _INT_FIELDS:
            try:
                values[key] = int(val)
            except ValueError:
                raise ParseError(f"guest limits: {key}={val!r} is not an integer") from None
        elif key in ("name", "write_cache", "driver"):
            values[key] = val
    required = [f.name for f in fields(GuestLimits) if f.default is MISSING and f.name not in values]
    if required:
        raise ParseError(f"guest limits: sysfs gave no {', '.join(required)} (is the disk name right?)")
    return GuestLimits(**values)  # type: ignore[arg-type]


@dataclass(frozen=True)
class IoMax:
    """One cgroup v2 ``io.max`` entry for the disk: the cgroup (relative to the cgroup2 mount) and
    its limits (``riops=500 rbps=max ...``: None where ``max``)."""

    cgroup: str
    riops: int | None = None
    rbps: int | None = None
    wiops: int | None = None
    wbps: int | None = None

    def read_iops_cap(self, bs_bytes: int) -> float | None:
        """The read IOPS this entry allows requests of ``bs_bytes``; None if it does not limit reads."""
        caps = [float(x) for x in (self.riops,) if x is not None]
        caps += [self.rbps / bs_bytes] if self.rbps is not None else []
        return min(caps) if caps else None

    def text(self) -> str:
        said = " ".join(f"{k}={v}" for k, v in (("riops", self.riops), ("rbps", self.rbps), ("wiops", self.wiops),
                                                ("wbps", self.wbps)) if v is not None)
        return f"io.max {said} in cgroup {self.cgroup}"


@dataclass(frozen=True)
class DepthLimit:
    """A guest setting on a disk's I/O path that caps the requests in flight at once: its file,
    its value now, and the value the driver gave it when the disk was found (None: unknown)."""

    path: str  # "/sys/block/vda/queue/nr_requests"
    value: int
    driver_value: int | None = None

    @property
    def name(self) -> str:
        """The setting's short name: "queue/nr_requests", "device/queue_depth", "hostN/can_queue"."""
        return "/".join(self.path.split("/")[-2:])


@dataclass(frozen=True)
class GuestPathLimits:
    """What the guest's own configuration lets be in flight on one disk's I/O path, read when a
    rule runs (after faults and --guest-setup): the block layer's ``queue/nr_requests`` (per
    hardware queue), a SCSI disk's ``device/queue_depth``, its SCSI host's ``can_queue``, the I/O
    scheduler and its ``iosched/async_depth`` (which throttles writes and async requests, never
    synchronous reads), and the cgroup v2 ``io.max`` entries for the disk along the cgroup of the
    guest's commands (fio's). ``cgroup`` is "" where the guest has no cgroup v2 mounted."""

    disk: str
    dev: str = ""  # "254:0"
    nr_requests: int | None = None
    scsi_queue_depth: int | None = None
    scsi_host: str = ""
    can_queue: int | None = None
    scheduler: str = ""
    async_depth: int | None = None
    cgroup: str = ""
    io_max: tuple[IoMax, ...] = ()

    def depth_limits(self, probed: GuestLimits | None) -> tuple[DepthLimit, ...]:
        """The settings that cap the depth of reads, with the driver's values from ``probed`` (the
        limits when the disk was found, before any fault or --guest-setup)."""
        block = f"/sys/block/{self.disk}"
        out = []
        if self.nr_requests is not None:
            out.append(DepthLimit(f"{block}/queue/nr_requests", self.nr_requests, probed.nr_requests if probed else None))
        if self.scsi_queue_depth is not None:
            out.append(DepthLimit(f"{block}/device/queue_depth", self.scsi_queue_depth,
                                  probed.scsi_queue_depth if probed else None))
        if self.can_queue is not None:
            out.append(DepthLimit(f"/sys/class/scsi_host/{self.scsi_host or 'host?'}/can_queue", self.can_queue,
                                  probed.can_queue if probed else None))
        return tuple(out)


_IO_MAX_KEYS = ("riops", "rbps", "wiops", "wbps")


def _io_max(cgroup: str, text: str) -> IoMax:
    values: dict[str, int | None] = {}
    for word in text.split():
        key, _, val = word.partition("=")
        if key in _IO_MAX_KEYS:
            try:
                values[key] = None if val == "max" else int(val)
            except ValueError:
                raise ParseError(f"io.max in {cgroup}: {word!r} is neither a number nor max") from None
    return IoMax(cgroup, **values)


def parse_guest_path_limits(text: str, disk: str) -> GuestPathLimits:
    """The ``key=value`` lines the guest's sysfs tool prints (guest/tools/sysfs.py PATH_SCRIPT);
    ``io_max=<cgroup> <limits>`` once per io.max entry for the disk. A setting the kernel does not
    show is None."""
    ints: dict[str, int] = {}
    texts: dict[str, str] = {}
    io_max = []
    for line in text.splitlines():
        key, sep, val = line.strip().partition("=")
        if not sep:
            continue
        if key == "io_max":
            cgroup, _, limits = val.partition(" ")
            io_max.append(_io_max(cgroup, limits))
        elif key in ("nr_requests", "queue_depth", "can_queue", "async_depth"):
            try:
                ints[key] = int(val)
            except ValueError:
                raise ParseError(f"{disk}: {key}={val!r} is not an integer") from None
        elif key in ("dev", "scsi_host", "scheduler", "cgroup"):
            texts[key] = val.strip()
    scheduler = texts.get("scheduler", "")
    if "[" in scheduler:  # "mq-deadline kyber [bfq] none": the active one is bracketed
        scheduler = scheduler.split("[", 1)[1].split("]", 1)[0]
    return GuestPathLimits(disk, texts.get("dev", ""), ints.get("nr_requests"), ints.get("queue_depth"),
                           texts.get("scsi_host", ""), ints.get("can_queue"), scheduler, ints.get("async_depth"),
                           texts.get("cgroup", ""), tuple(io_max))
