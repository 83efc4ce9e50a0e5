"""Linux ``/proc/diskstats``: the guest block layer's counters, and iostat's figures between two snapshots.

This is the guest-observed side of the queue-depth and I/O-size rules: the weighted I/O
time gives iostat's ``aqu-sz`` (the average number of requests the block layer had in flight),
and sectors per request give the request size the guest really issued.

Field layout (Documentation/admin-guide/iostats.rst): 14 fields up to kernel 4.18,
18 with the discard fields (4.18+), 20 with the flush fields (5.5+, as in Debian 12's 6.1).
Sectors are always 512 bytes, whatever the device's block size.

Example::

    before = parse_diskstats(text_before)["vdb"]
    after = parse_diskstats(text_after)["vdb"]
    DiskStatsDelta.between(before, after, elapsed_ms=2000).avg_queue_size
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from model.errors import ParseError

SECTOR_BYTES = 512
_FIELD_COUNTS = (14, 18, 20)


@dataclass(frozen=True)
class DiskStats:
    """One line of /proc/diskstats: cumulative counters of one block device since boot.

    The discard and flush counters are None when the kernel does not report them.
    """

    major: int
    minor: int
    name: str
    reads_completed: int
    reads_merged: int
    sectors_read: int
    read_time_ms: int
    writes_completed: int
    writes_merged: int
    sectors_written: int
    write_time_ms: int
    in_flight: int
    io_time_ms: int
    weighted_io_time_ms: int
    discards_completed: int | None = None
    discards_merged: int | None = None
    sectors_discarded: int | None = None
    discard_time_ms: int | None = None
    flushes_completed: int | None = None
    flush_time_ms: int | None = None


_COUNTER_NAMES = [f.name for f in fields(DiskStats)][3:]


def parse_diskstats(text: str, source: str = "/proc/diskstats") -> dict[str, DiskStats]:
    """Parse the whole of /proc/diskstats into a map from device name (vda, sdb, nvme0n1) to counters."""
    result: dict[str, DiskStats] = {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) not in _FIELD_COUNTS:
            raise ParseError(f"{source} line {lineno}: {len(parts)} fields, expected one of {_FIELD_COUNTS} "
                             f"(is this /proc/diskstats?): {line.strip()!r}")
        try:
            numbers = [int(p) for p in parts[:2] + parts[3:]]
        except ValueError:
            raise ParseError(f"{source} line {lineno}: a counter is not an integer: {line.strip()!r}") from None
        if any(n < 0 for n in numbers):
            raise ParseError(f"{source} line {lineno}: negative counter: {line.strip()!r}")
        counters = dict(zip(_COUNTER_NAMES, numbers[2:], strict=False))
        result[parts[2]] = DiskStats(major=numbers[0], minor=numbers[1], name=parts[2], **counters)
    if not result:
        raise ParseError(f"{source}: no devices (empty output?)")
    return result


def diskstats_for(text: str, device: str, source: str = "/proc/diskstats") -> DiskStats:
    """The counters of one device; ParseError listing the devices present if it is absent."""
    stats = parse_diskstats(text, source)
    if device not in stats:
        raise ParseError(f"{source}: no device {device!r}; devices are {sorted(stats)}")
    return stats[device]


@dataclass(frozen=True)
class DiskStatsDelta:
    """What one device did between two snapshots, with iostat's derived figures.

    Counters are differences; ``flushes_completed`` is None if a snapshot lacks flush fields.
    """

    device: str
    elapsed_ms: float
    reads_completed: int
    writes_completed: int
    flushes_completed: int | None
    sectors_read: int
    sectors_written: int
    read_time_ms: int
    write_time_ms: int
    io_time_ms: int
    weighted_io_time_ms: int

    @classmethod
    def between(cls, before: DiskStats, after: DiskStats, elapsed_ms: float) -> DiskStatsDelta:
        """The difference ``after - before`` over ``elapsed_ms`` of wall time.

        Raises ParseError if the snapshots are of different devices, the interval is not
        positive, or a counter went backwards (wrapped, or the device was re-created).
        """
        if before.name != after.name:
            raise ParseError(f"diskstats: snapshots are of different devices ({before.name} then {after.name})")
        if elapsed_ms <= 0:
            raise ParseError(f"diskstats {before.name}: elapsed_ms must be positive, got {elapsed_ms}")

        def diff(field: str) -> int:
            a, b = getattr(before, field), getattr(after, field)
            if b < a:
                raise ParseError(f"diskstats {before.name}: {field} went backwards ({a} -> {b}); the counter "
                                 "wrapped or the device was re-created between snapshots: take them again")
            return int(b - a)

        flushes = None
        if before.flushes_completed is not None and after.flushes_completed is not None:
            flushes = diff("flushes_completed")
        return cls(
            device=before.name,
            elapsed_ms=elapsed_ms,
            reads_completed=diff("reads_completed"),
            writes_completed=diff("writes_completed"),
            flushes_completed=flushes,
            sectors_read=diff("sectors_read"),
            sectors_written=diff("sectors_written"),
            read_time_ms=diff("read_time_ms"),
            write_time_ms=diff("write_time_ms"),
            io_time_ms=diff("io_time_ms"),
            weighted_io_time_ms=diff("weighted_io_time_ms"),
        )

    @property
    def requests(self) -> int:
        """Reads plus writes completed."""
        return self.reads_completed + self.writes_completed

    @property
    def avg_queue_size(self) -> float:
        """iostat's ``aqu-sz``: mean number of requests in flight (Δweighted time / elapsed)."""
        return self.weighted_io_time_ms / self.elapsed_ms

    @property
    def avg_request_size_bytes(self) -> float:
        """Mean bytes per read or write request (0 with no requests)."""
        if not self.requests:
            return 0.0
        return (self.sectors_read + self.sectors_written) * SECTOR_BYTES / self.requests

    @property
    def read_iops(self) -> float:
        return self.reads_completed * 1000.0 / self.elapsed_ms

    @property
    def write_iops(self) -> float:
        return self.writes_completed * 1000.0 / self.elapsed_ms

    @property
    def util_pct(self) -> float:
        """iostat's ``%util``: share of the interval with at least one request in flight."""
        return self.io_time_ms * 100.0 / self.elapsed_ms

    @property
    def await_ms(self) -> float:
        """iostat's ``await`` over reads and writes: mean time per request, queueing included."""
        if not self.requests:
            return 0.0
        return (self.read_time_ms + self.write_time_ms) / self.requests


def inflight_in_window(text: str, start_ms: float, end_ms: float) -> tuple[int, ...]:
    """Requests in flight (reads + writes) from ``/sys/block/X/inflight`` samples taken between
    ``start_ms`` and ``end_ms`` of guest uptime. ``text`` has one ``<uptime s> <reads> <writes>``
    line per sample (the guest's in-flight sampler writes them); other lines (a sample cut short
    when the sampler stopped) are ignored."""
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and all(p.replace(".", "", 1).isdigit() for p in parts) \
                and start_ms <= float(parts[0]) * 1000.0 <= end_ms:
            out.append(int(parts[1]) + int(parts[2]))
    return tuple(out)
