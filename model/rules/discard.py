"""The discard rule (docs/rules/discard.md): the space a guest frees reaches the host.

On the scratch disk the guest fills a region with data, then discards known byte ranges of it with
``blkdiscard``: one aligned to the device's discard granularity, one that is not, and one larger than
the guest's ``discard_max_bytes`` (which the block layer must split). For each range the host must see
the same bytes discarded: the device's unmap counters (QMP ``query-blockstats``) must grow by the
range's bytes, in no more requests than the guest's split allows, and the backing file's allocated
bytes in the range must drop to what the range's partial granules keep. The verdict lists every range
the guest discarded and the host did not see, or saw split or rounded beyond the granularity, and says
whether the device advertised discard at all.

Example::

    v = judge_discard(limits, [RangeSeen(DiscardRange("aligned", 512 << 20, 1 << 20), "", 1, 1 << 20, 0,
                                         1 << 20, 0, 2 << 30)], "the backing file ... on this machine")
    v.passed  # True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from model.rules.figures import ByteRange, RangeFigure, RangeLane
from model.rules.spec import PARAM, Metrics, MetricSpec
from model.rules.verdict import Number, RuleVerdict

RULE = "discard"

#: The host file system's allocation unit the suite assumes: 4 KiB, ext4's and XFS's default block. A
#: punched hole that does not cover whole blocks leaves its partial blocks allocated (zeroed).
HOST_BLOCK_BYTES = 4096
#: Partial granules a discarded range may leave at its ends: one at its start and one at its end. A
#: device (or the guest) may round a range in to its discard granularity, and the host's file system to
#: its block, so the host may see up to two granules fewer than asked, and keep up to two blocks.
EDGE_GRANULES = 2
#: Requests the guest may add to a range's split: the block layer splits a discard at multiples of the
#: granularity (Linux 6.1's bio_discard_limit), so a range that starts off a granule may take one more
#: request than its length over ``discard_max_bytes``.
EXTRA_SPLIT_REQUESTS = 1

#: What the rule records (model/rules/spec.py): the disk's discard limits and, per range, where it was,
#: what the guest answered and what the host saw. Every number is exact (a count, a setting, a size):
#: none is a measured quantity with a better direction.
_RANGE = r"(aligned|unaligned|beyond_max)_"
METRICS: Metrics = (
    (r"discard_(granularity|max|max_hw)_bytes|discard_advertised|discard_disk", MetricSpec("", PARAM)),
    (_RANGE + r"(offset|length|host|device|allocated_before|allocated_after|guest_max)_bytes", MetricSpec("B", PARAM)),
    (_RANGE + r"(host_requests|host_failed|guest_discarded|device_requests)", MetricSpec("", PARAM)),
)
#: Nothing the rule records is a measured quantity: no minimum effect to measure.
MIN_EFFECTS: Mapping[str, float] = {}


@dataclass(frozen=True)
class DiscardLimits:
    """The disk's discard limits as the guest's block layer has them (``/sys/block/<disk>/queue``)."""

    granularity_bytes: int  # discard_granularity
    max_bytes: int  # discard_max_bytes: the largest discard the guest sends (0: it sends none)
    max_hw_bytes: int  # discard_max_hw_bytes: what the device advertised (0: no discard)

    @property
    def advertised(self) -> bool:
        return self.max_hw_bytes > 0


@dataclass(frozen=True)
class DiscardRange:
    """A byte range of the disk the guest discards; ``name`` is "aligned", "unaligned" or "beyond_max"."""

    name: str
    offset_bytes: int
    length_bytes: int

    @property
    def end_bytes(self) -> int:
        return self.offset_bytes + self.length_bytes

    def describe(self) -> str:
        return f"{self.name} range [{self.offset_bytes}, {self.end_bytes}) ({self.length_bytes} bytes)"


@dataclass(frozen=True)
class RangeSeen:
    """One range as both sides saw it: the guest's answer, the host's discard counters over the discard
    (``host_*``: what reached the backing file, where the hypervisor counts it there, else what the device
    counted; ``device_*``: the device's own count, None where it is the same source), the backing store's
    allocated bytes in the range before and after (None: not read)."""

    range: DiscardRange
    guest_error: str  # "" where blkdiscard succeeded, else its last line of error
    host_requests: int
    host_bytes: int
    host_failed: int
    allocated_before_bytes: int | None
    allocated_after_bytes: int | None
    guest_max_bytes: int  # the guest's discard_max_bytes while the range was discarded
    device_requests: int | None = None
    device_bytes: int | None = None


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def edge_bytes(limits: DiscardLimits) -> int:
    """What a range's ends may lose to rounding: EDGE_GRANULES granules (or host blocks, if larger)."""
    return EDGE_GRANULES * max(limits.granularity_bytes, HOST_BLOCK_BYTES)


def allowed_requests(seen: RangeSeen) -> int:
    """The most requests the host may see for the range: its split by the guest's ``discard_max_bytes``,
    plus EXTRA_SPLIT_REQUESTS."""
    per = seen.guest_max_bytes if seen.guest_max_bytes > 0 else seen.range.length_bytes
    return _ceil_div(seen.range.length_bytes, per) + EXTRA_SPLIT_REQUESTS


def _range_problems(limits: DiscardLimits, seen: RangeSeen, where: str) -> list[str]:
    r, edge = seen.range, edge_bytes(limits)
    what = r.describe()
    if seen.guest_error:
        said = (f"the guest's discard_max_bytes is {seen.guest_max_bytes}: the guest passes no discard on"
                if seen.guest_max_bytes == 0 else f"the guest's discard_max_bytes is {seen.guest_max_bytes}")
        return [(f"{what}: the guest could not discard it ({seen.guest_error}) although the device advertises "
                f"discard (discard_max_hw_bytes {limits.max_hw_bytes}); {said}")]
    problems = []
    if seen.host_failed:
        problems.append(f"{what}: the host failed {seen.host_failed} of its discard requests")
    if seen.host_requests == 0:
        problems.append(f"{what}: the guest discarded it and the host saw no discard (unmap_operations did not grow)")
        return problems
    short = r.length_bytes - seen.host_bytes
    if short > edge or short < 0:
        problems.append(f"{what}: the host saw {seen.host_bytes} bytes discarded, {abs(short)} "
                        f"{'fewer' if short > 0 else 'more'} than the guest discarded; at most {edge} fewer are "
                        f"allowed ({EDGE_GRANULES} granules of {max(limits.granularity_bytes, HOST_BLOCK_BYTES)} "
                        "bytes, one at each end)")
    most = allowed_requests(seen)
    if seen.host_requests > most:
        problems.append(f"{what}: the host saw it as {seen.host_requests} discard requests, more than the "
                        f"{most} the guest's discard_max_bytes {seen.guest_max_bytes} allows (one per "
                        f"discard_max_bytes, plus {EXTRA_SPLIT_REQUESTS} for a start off the granularity)")
    if seen.allocated_after_bytes is not None and seen.allocated_after_bytes > edge:
        problems.append(f"{what}: {where} still holds {seen.allocated_after_bytes} bytes of data in the range after "
                        f"the discard ({seen.allocated_before_bytes} before); at most {edge} may stay (its partial "
                        "granules at the ends)")
    return problems


def judge_discard(limits: DiscardLimits, ranges: Sequence[RangeSeen], where: str, disk: str = "") -> RuleVerdict:
    """``limits``: the disk's discard limits before the rule changed any; ``ranges``: each range discarded,
    as both sides saw it; ``where``: the backing store in messages."""
    props: dict[str, Number] = {
        "discard_granularity_bytes": limits.granularity_bytes, "discard_max_bytes": limits.max_bytes,
        "discard_max_hw_bytes": limits.max_hw_bytes, "discard_advertised": int(limits.advertised),
        "discard_disk": disk,
    }
    lines = [(f"{disk or 'the disk'}: the device {'advertises' if limits.advertised else 'does not advertise'} "
             f"discard (discard_max_hw_bytes {limits.max_hw_bytes}, granularity {limits.granularity_bytes}); the "
             f"guest's discard_max_bytes is {limits.max_bytes}; the host's side is {where}")]
    problems: list[str] = []
    notes: list[str] = []
    uncounted: list[str] = []
    if not limits.advertised:
        problems.append(f"{disk or 'the disk'}: the device does not advertise discard (discard_max_hw_bytes 0): "
                        "the space the guest frees can never reach the host")
    for seen in ranges:
        r = seen.range
        p = f"{r.name}_"
        props.update({p + "offset_bytes": r.offset_bytes, p + "length_bytes": r.length_bytes,
                      p + "guest_discarded": int(not seen.guest_error), p + "guest_max_bytes": seen.guest_max_bytes,
                      p + "host_requests": seen.host_requests, p + "host_bytes": seen.host_bytes,
                      p + "host_failed": seen.host_failed})
        alloc = "allocation not read"
        if seen.allocated_before_bytes is not None and seen.allocated_after_bytes is not None:
            props[p + "allocated_before_bytes"] = seen.allocated_before_bytes
            props[p + "allocated_after_bytes"] = seen.allocated_after_bytes
            alloc = f"allocated {seen.allocated_before_bytes} -> {seen.allocated_after_bytes} bytes"
            if seen.allocated_before_bytes < r.length_bytes - edge_bytes(limits):
                notes.append(f"{r.describe()}: the fill left only {seen.allocated_before_bytes} bytes allocated "
                             "before the discard: the allocation's drop says little")
        guest = "discarded" if not seen.guest_error else f"refused ({seen.guest_error})"
        device = ""
        if seen.device_requests is not None and seen.device_bytes is not None:
            props[p + "device_requests"] = seen.device_requests
            props[p + "device_bytes"] = seen.device_bytes
            device = f" (the device counted {seen.device_requests} requests, {seen.device_bytes} bytes)"
            if seen.device_requests == 0 and seen.host_requests > 0:
                uncounted.append(r.name)
        lines.append(f"{r.describe()}: guest {guest} (discard_max_bytes {seen.guest_max_bytes}); host file "
                     f"{seen.host_requests} requests, {seen.host_bytes} bytes{device}; {alloc}")
        if limits.advertised:
            problems.extend(_range_problems(limits, seen, where))
    if uncounted:
        notes.append(f"the device's own unmap counters (query-blockstats unmap_operations) did not count the "
                     f"{', '.join(uncounted)} discards that reached the file: this device does not account discards")
    if any(s.allocated_after_bytes is None for s in ranges):
        notes.append(f"{where}: the backing store's allocation was not read (only the device's counters were)")
    return RuleVerdict(RULE, tuple(lines), tuple(problems), tuple(notes), props,
                       (range_figure(limits, ranges, where),))


def range_figure(limits: DiscardLimits, ranges: Sequence[RangeSeen], where: str) -> RangeFigure:
    """The ranges as both sides saw them, in lanes: where the guest discarded (a range it refused is
    drawn as an outline), how many bytes the host's discard counters grew by over each range, and
    (where read) how much of each range's allocation the backing store freed; the device's own count
    too, where the hypervisor counts it apart from the file's. The host's lanes are amounts, drawn
    from each range's start: the counters and the allocation say how much, not where."""
    guest = tuple(ByteRange(s.range.name, s.range.offset_bytes, s.range.length_bytes,
                            "refused" if s.guest_error else "", failed=bool(s.guest_error)) for s in ranges)
    lanes = [RangeLane("guest: discarded", "guest", guest),
             RangeLane("host: discards counted", "host", tuple(
                 ByteRange(s.range.name, s.range.offset_bytes, s.host_bytes, _requests(s.host_requests))
                 for s in ranges), placed=False)]
    device = tuple(ByteRange(s.range.name, s.range.offset_bytes, n_bytes, _requests(n))
                   for s, n, n_bytes in ((s, s.device_requests, s.device_bytes) for s in ranges)
                   if n is not None and n_bytes is not None)
    if device:
        lanes.append(RangeLane("host: device counted", "host", device, placed=False))
    read = [(s, s.allocated_before_bytes, s.allocated_after_bytes) for s in ranges]
    freed = tuple(ByteRange(s.range.name, s.range.offset_bytes, max(before - after, 0), f"{after} bytes kept")
                  for s, before, after in read if before is not None and after is not None)
    if freed:
        lanes.append(RangeLane("host: allocation freed", "host", freed, placed=False))
    if not ranges:
        note = ("no range was discarded: the device does not advertise discard" if not limits.advertised
                else "no range was discarded")
    else:
        note = (f"The host's lanes are amounts ({where}: its discard counters over each range"
                f"{' and its allocation in the range' if freed else ''}), each drawn from its range's start: "
                f"they say how much, not where. Up to {edge_bytes(limits)} bytes may be missing at a range's "
                "ends (its partial granules).")
    return RangeFigure(f"discarded ranges: guest and host ({len(ranges)} range(s))", tuple(lanes), note)


def _requests(n: int) -> str:
    return f"{n} request{'s' if n != 1 else ''}"


MIB = 1024 * 1024
#: The region the guest fills with data before discarding in it: 8 MiB from 512 MiB into the scratch disk
#: (1 GiB), apart from what the other rules write (data-integrity's 4 MiB at 256 MiB, the others at its
#: start); a multiple of every granularity.
FILL_OFFSET_BYTES = 512 * MIB
FILL_LENGTH_BYTES = 8 * MIB
#: The guest's discard_max_bytes while the beyond_max range is discarded, where the device allows larger
#: discards: the devices here advertise 1 GiB (scsi-hd) to 2 GiB (virtio-blk), more than a range can be
#: filled in a few seconds under TCG, so the rule lowers the guest's limit to make the range larger than it.
SPLIT_MAX_BYTES = 256 * 1024
#: The ranges, apart by at least a granule so that no two share one.
RANGES = (
    DiscardRange("aligned", FILL_OFFSET_BYTES, MIB),
    # three sectors in and five past a MiB: off every granularity above 512 bytes at both ends
    DiscardRange("unaligned", FILL_OFFSET_BYTES + 2 * MIB + 3 * 512, MIB + 5 * 512),
    # 2 MiB: eight discards of SPLIT_MAX_BYTES
    DiscardRange("beyond_max", FILL_OFFSET_BYTES + 5 * MIB, 2 * MIB),
)


def split_max_bytes(limits: DiscardLimits) -> int | None:
    """What the guest's discard_max_bytes is set to for the beyond_max range: SPLIT_MAX_BYTES rounded up
    to the granularity, or None where the guest's limit is already at most that (or 0: nothing to lower)."""
    g = max(limits.granularity_bytes, 512)
    want = _ceil_div(SPLIT_MAX_BYTES, g) * g
    if limits.max_bytes <= want:
        return None
    return want
