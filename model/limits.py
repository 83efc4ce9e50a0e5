"""Device limits: what the hypervisor configured, and what the guest sees.

Pure data (no hypervisor or SSH import): the limits-advertisement rule compares the two,
and the queue-depth rule takes its expected depth from the configured side.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, fields

from model.errors import ParseError


@dataclass(frozen=True)
class ConfiguredLimits:
    """What the virtual device offers, as the hypervisor configured it.

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
