"""The discard rule (docs/rules/discard.md): the space a guest frees reaches the host.

On the scratch disk the guest fills a region with data, then discards known byte ranges of it with
``blkdiscard``: one aligned to the device's discard granularity, one that is not, and one larger than
the guest's ``discard_max_bytes`` (which the block layer must split). For each range the host must see
the same bytes discarded: the device's unmap counters (QMP ``query-blockstats``) must grow by the
range's bytes, in no more requests than the guest's split allows, and the backing file's allocated
bytes in the range must drop to what the range's partial granules keep. The verdict lists every range
the guest discarded and the host did not see, or saw split or rounded beyond the granularity, and says
whether the device advertised discard at all.

Then the same through a filesystem (:class:`TrimSeen`): the guest makes ext4, writes a file, deletes it
and runs ``fstrim``, and the host must see at least the file's bytes discarded and give back as many in
the filesystem's region. And write-zeroes (:class:`ZeroesSeen`), where the disk advertises it: the
range must read back as zeroes in the guest, and the host must have taken it as write-zeroes (QEMU's
``blk_co_pwritev`` trace: its counters count zeroes as writes).

Example::

    v = judge_discard(limits, [RangeSeen(DiscardRange("aligned", 512 << 20, 1 << 20), "", 1, 1 << 20, 0,
                                         1 << 20, 0, 2 << 30)], "the backing file ... on this machine")
    v.passed  # True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from model.blame import BlameSettings
from model.judging.figures import ByteRange, RangeFigure, RangeLane
from model.judging.spec import PARAM, Metrics, MetricSpec
from model.judging.verdict import Number, RuleVerdict

RULE = "discard"
#: The settings (model/blame.py's trail keys) the rule's verdict depends on. The guest's discard_max_bytes (0: it passes no discard on) is the one setting a discard depends on.
BLAME = BlameSettings(frozenset({"discard"}))
#: Repeats without --repeats.
DEFAULT_REPEATS = 1
REPEATABLE = True
#: Which of its metrics follow the host CPU the guest gets (model/across/contention.py).
HOST_CPU_BOUND: tuple[str, ...] = ()

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

#: What the rule records (model/judging/spec.py): the disk's discard limits and, per range, where it was,
#: what the guest answered and what the host saw. Every number is exact (a count, a setting, a size):
#: none is a measured quantity with a better direction.
_RANGE = r"(aligned|unaligned|beyond_max)_"
METRICS: Metrics = (
    (r"discard_(granularity|max|max_hw)_bytes|discard_advertised|discard_disk", MetricSpec("", PARAM)),
    (_RANGE + r"(offset|length|host|device|allocated_before|allocated_after|guest_max)_bytes", MetricSpec("B", PARAM)),
    (_RANGE + r"(host_requests|host_failed|guest_discarded|device_requests)", MetricSpec("", PARAM)),
    (r"fstrim_(fs|file|guest_trimmed|host|device|allocated_before|allocated_after)_bytes", MetricSpec("B", PARAM)),
    (r"fstrim_(guest_ok|host_requests|host_failed|device_requests)", MetricSpec("", PARAM)),
    (r"fstrim_s", MetricSpec("s", PARAM)),
    (r"zeroes_(offset|length|max|guest_nonzero|host_zero|host_data|device_write)_bytes", MetricSpec("B", PARAM)),
    (r"zeroes_(advertised|guest_zeroed|host_zero_requests)", MetricSpec("", PARAM)),
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


def judge_discard(limits: DiscardLimits, ranges: Sequence[RangeSeen], where: str, disk: str = "",
                  trim: TrimSeen | None = None, zeroes: ZeroesSeen | None = None) -> RuleVerdict:
    """``limits``: the disk's discard limits before the rule changed any; ``ranges``: each range discarded,
    as both sides saw it; ``where``: the backing store in messages; ``trim``: fstrim on a filesystem the
    guest filled and emptied; ``zeroes``: the write-zeroes range (None: not run)."""
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
    if trim is not None:
        trim_lines, trim_problems, trim_props = _trim_part(limits, trim, where, disk)
        lines, problems, props = lines + trim_lines, problems + trim_problems, props | trim_props
    if zeroes is not None:
        z_lines, z_problems, z_notes, z_props = _zeroes_part(limits, zeroes, disk)
        lines, problems, notes, props = lines + z_lines, problems + z_problems, notes + z_notes, props | z_props
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


#: The block the guest fills a range with data in (dd's ``bs``): 64 KiB, a multiple of every granularity
#: the suite's devices advertise.
FILL_BLOCK_BYTES = 64 * 1024
#: The guest's setting the beyond_max range lowers for a while (and sets back).
MAX_SETTING = "queue/discard_max_bytes"
#: Where fstrim's filesystem is mounted in the guest, and its file.
MOUNT = "/mnt/vioc-discard"
TRIM_FILE = f"{MOUNT}/freed"
#: fstrim's filesystem: ext4 over the disk's first 64 MiB (one block group of 4 KiB blocks; made in
#: about 0.1 s under TCG), apart from the ranges above.
FSTRIM_FS_BYTES = 64 * MIB
#: The file the guest writes there (O_DIRECT), deletes and trims: 8 MiB, as the ranges' fill.
FSTRIM_FILE_BYTES = 8 * MIB
#: The write-zeroes range: the MiB after the fill, filled with data of its own first.
def ranges_for(logical_block_bytes: int) -> tuple[DiscardRange, ...]:
    """:data:`RANGES` on a disk with this logical block: the unaligned range three blocks in and five past a
    MiB in the disk's own blocks (BLKDISCARD refuses a range off the logical block with EINVAL), so on a
    4Kn disk it is off every granularity above 4 KiB."""
    if logical_block_bytes <= 512:
        return RANGES
    aligned, _unaligned, beyond = RANGES
    shifted = DiscardRange("unaligned", FILL_OFFSET_BYTES + 2 * MIB + 3 * logical_block_bytes,
                           MIB + 5 * logical_block_bytes)
    return (aligned, shifted, beyond)


ZEROES_RANGE = DiscardRange("zeroes", FILL_OFFSET_BYTES + FILL_LENGTH_BYTES, MIB)


@dataclass(frozen=True)
class TrimSeen:
    """fstrim on an ext4 filesystem the guest made over the disk's first ``fs_bytes``, trimmed once,
    then filled with a file of ``file_bytes`` it deleted: the guest's answer to the second fstrim and
    the host's discard counters over it (as RangeSeen's), and the backing store's allocation in the
    filesystem's region after the delete (before that fstrim) and after it (None: not read)."""

    fs_bytes: int
    file_bytes: int
    guest_error: str  # "" where fstrim succeeded, else its last line of error
    guest_trimmed_bytes: int | None  # what fstrim -v said it trimmed (None: it said nothing)
    host_requests: int
    host_bytes: int
    host_failed: int
    allocated_before_bytes: int | None
    allocated_after_bytes: int | None
    seconds: float  # the fstrim command, as the host waited for it
    device_requests: int | None = None
    device_bytes: int | None = None


@dataclass(frozen=True)
class ZeroesSeen:
    """Write-zeroes (``blkdiscard -z``: BLKZEROOUT) of a range the guest filled with data first.
    ``max_bytes`` is the disk's write_zeroes_max_bytes (0: not advertised, nothing else was done);
    ``unable``: why the guest could not ask (its blkdiscard has no -z), nothing else was done either.
    ``nonzero_bytes``: bytes of the range that read back other than zero (O_DIRECT) afterwards. The host's
    side is the writes its block backend took in the range (``host_*``, None where it has no trace of
    them): write-zeroes and writes of data apart; ``device_write_bytes`` what the device's write
    counters grew by, which count both."""

    range: DiscardRange
    max_bytes: int
    unable: str = ""
    guest_error: str = ""
    nonzero_bytes: int | None = None
    host_zero_requests: int | None = None
    host_zero_bytes: int | None = None
    host_data_bytes: int | None = None
    device_write_bytes: int | None = None


def _trim_part(limits: DiscardLimits, trim: TrimSeen, where: str, disk: str) -> tuple[list[str], list[str],
                                                                                       dict[str, Number]]:
    """The fstrim part of the verdict: its lines, its problems (where the device advertises discard), its numbers."""
    edge = edge_bytes(limits)
    fs = f"fstrim on ext4 over the first {trim.fs_bytes} bytes of {disk or 'the disk'}"
    props: dict[str, Number] = {
        "fstrim_fs_bytes": trim.fs_bytes, "fstrim_file_bytes": trim.file_bytes, "fstrim_guest_ok": int(not trim.guest_error),
        "fstrim_host_requests": trim.host_requests, "fstrim_host_bytes": trim.host_bytes,
        "fstrim_host_failed": trim.host_failed, "fstrim_s": round(trim.seconds, 3)}
    if trim.guest_trimmed_bytes is not None:
        props["fstrim_guest_trimmed_bytes"] = trim.guest_trimmed_bytes
    if trim.device_requests is not None and trim.device_bytes is not None:
        props |= {"fstrim_device_requests": trim.device_requests, "fstrim_device_bytes": trim.device_bytes}
    drop = None
    if trim.allocated_before_bytes is not None and trim.allocated_after_bytes is not None:
        props |= {"fstrim_allocated_before_bytes": trim.allocated_before_bytes,
                  "fstrim_allocated_after_bytes": trim.allocated_after_bytes}
        drop = trim.allocated_before_bytes - trim.allocated_after_bytes
    guest = (f"trimmed {trim.guest_trimmed_bytes} bytes" if not trim.guest_error and trim.guest_trimmed_bytes is not None
             else "said nothing of what it trimmed" if not trim.guest_error else f"refused ({trim.guest_error})")
    alloc = ("allocation not read" if drop is None else
             f"allocated {trim.allocated_before_bytes} -> {trim.allocated_after_bytes} bytes (down {drop})")
    lines = [(f"{fs}, after a file of {trim.file_bytes} bytes was written and deleted: guest {guest} in "
              f"{trim.seconds:.2f} s; host file {trim.host_requests} requests, {trim.host_bytes} bytes; {alloc}")]
    if not limits.advertised:
        return lines, [], props
    what = f"{fs} after deleting a file of {trim.file_bytes} bytes"
    if trim.guest_error:
        return lines, [(f"{what}: fstrim failed ({trim.guest_error}) although the device advertises discard "
                        f"(discard_max_hw_bytes {limits.max_hw_bytes}); the guest's discard_max_bytes is "
                        f"{limits.max_bytes}")], props
    problems = []
    said = trim.guest_trimmed_bytes
    if said is not None and said < trim.file_bytes:
        problems.append(f"{what}: fstrim trimmed {said} bytes, fewer than the {trim.file_bytes} bytes the file freed")
    if trim.host_failed:
        problems.append(f"{what}: the host failed {trim.host_failed} of its discard requests")
    if trim.host_bytes < trim.file_bytes - edge:
        problems.append(f"{what}: the host saw {trim.host_bytes} bytes discarded ({trim.host_requests} requests), fewer "
                        f"than the {trim.file_bytes} bytes the file freed (at most {edge} fewer are allowed)")
    elif said is not None and abs(said - trim.host_bytes) > edge:
        problems.append(f"{what}: the host saw {trim.host_bytes} bytes discarded where fstrim trimmed {said}; at most "
                        f"{edge} apart are allowed")
    if drop is not None and drop < trim.file_bytes - edge:
        problems.append(f"{what}: {where} gave back {drop} bytes in the filesystem's region ({trim.allocated_before_bytes}"
                        f" -> {trim.allocated_after_bytes} allocated), fewer than the {trim.file_bytes} bytes the file "
                        f"held (at most {edge} fewer are allowed)")
    return lines, problems, props


def _zeroes_part(limits: DiscardLimits, z: ZeroesSeen, disk: str) -> tuple[list[str], list[str], list[str],
                                                                           dict[str, Number]]:
    """The write-zeroes part of the verdict: its lines, problems, notes and numbers."""
    r, edge = z.range, edge_bytes(limits)
    props: dict[str, Number] = {"zeroes_offset_bytes": r.offset_bytes, "zeroes_length_bytes": r.length_bytes,
                                "zeroes_max_bytes": z.max_bytes, "zeroes_advertised": int(z.max_bytes > 0)}
    name = disk or "the disk"
    if z.max_bytes == 0:
        return ([f"write-zeroes: {name} does not advertise it (write_zeroes_max_bytes 0)"], [],
                [f"write-zeroes not checked: {name} does not advertise it (write_zeroes_max_bytes 0)"], props)
    if z.unable:
        return ([f"write-zeroes: {name} advertises it (write_zeroes_max_bytes {z.max_bytes}); not asked: {z.unable}"],
                [], [f"write-zeroes not checked: {z.unable}"], props)
    props["zeroes_guest_zeroed"] = int(not z.guest_error)
    if z.nonzero_bytes is not None:
        props["zeroes_guest_nonzero_bytes"] = z.nonzero_bytes
    if z.device_write_bytes is not None:
        props["zeroes_device_write_bytes"] = z.device_write_bytes
    traced = z.host_zero_requests is not None and z.host_zero_bytes is not None and z.host_data_bytes is not None
    if traced:
        props |= {"zeroes_host_zero_requests": z.host_zero_requests or 0, "zeroes_host_zero_bytes": z.host_zero_bytes or 0,
                  "zeroes_host_data_bytes": z.host_data_bytes or 0}
    guest = "zeroed" if not z.guest_error else f"refused ({z.guest_error})"
    read = "" if z.nonzero_bytes is None else f", {z.nonzero_bytes} bytes not zero when read back"
    host = (f"host backend {z.host_zero_requests} write-zeroes of {z.host_zero_bytes} bytes and {z.host_data_bytes} bytes "
            "of data in the range" if traced else "host: no trace of its writes")
    device = "" if z.device_write_bytes is None else f" (the device's write counters grew by {z.device_write_bytes} bytes)"
    lines = [(f"write-zeroes of the {r.describe()} (write_zeroes_max_bytes {z.max_bytes}): guest {guest}{read}; "
             f"{host}{device}")]
    what = f"the {r.describe()}"
    if z.guest_error:
        return lines, [(f"{what}: the guest could not zero it ({z.guest_error}) although {name} advertises "
                        f"write-zeroes (write_zeroes_max_bytes {z.max_bytes})")], [], props
    problems, notes = [], []
    if z.nonzero_bytes:
        problems.append(f"{what}: {z.nonzero_bytes} bytes of it read back other than zero after the guest zeroed it")
    if not traced:
        notes.append(f"{what}: the host cannot tell write-zeroes from writes without its trace: only the device's write "
                     "counters were read, which count both")
    elif (z.host_zero_bytes or 0) < r.length_bytes - edge:
        plain = (f"; it took {z.host_data_bytes} bytes of data there instead: the guest wrote the zeroes out itself"
                 if z.host_data_bytes else "")
        problems.append(f"{what}: the host saw {z.host_zero_bytes} bytes of it as write-zeroes, fewer than the "
                        f"{r.length_bytes} the guest zeroed (at most {edge} fewer are allowed){plain}")
    return lines, problems, notes, props
