"""Rule 8, data integrity: every block the guest writes lands where it says, whole, and last.

The guest writes a range of its scratch disk in passes (``PLAN``: sequential and random, 1 KiB to
128 KiB, depth 1 to 16, O_DIRECT and buffered with fsync), each pass a generation that overwrites
part of the ones before, then flushes. Every 512-byte sector carries fio's verify header
(model/parse/fio_verify.py): the byte offset it was written at (its LBA), the pass's number (its
generation), a CRC32C of the header and an MD5 of the rest, which is a pattern of the run's id and
the generation. Two sides check it:

- the **host** reads the disk's backing file itself (:func:`check_backing`): every sector of the
  range must hold the block that names its own LBA (else a shifted or misplaced write), of the last
  generation that wrote there and of this run (else a lost write), whole (else a torn write); and
  every sector around the range must be as it was before the run (else a write outside the range);
- the **guest** reads the range back through the device it wrote and fio verifies each sector
  (header, offset, MD5): what the application would read.

A block wrong on the host's side only is one the guest reads back as written and the disk does
not hold: it moved or vanished below the guest's reads (a mapping in the guest's block layer, its
driver, or the hypervisor). There is no tolerance: one bad sector fails the rule.

Example::

    host = check_backing(window, guards_before, region, PLAN, run_id=0x1A2B3C4D)
    v = judge_data_integrity(host, guest, region, PLAN, 0x1A2B3C4D, writes)
    v.problems  # ('host (the backing file): 8192 sectors not at the LBA they name (a shifted ...',)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from model.blame import Blame, BlameSettings
from model.errors import FioError, ParseError
from model.judging.figures import Pair, Threshold, pair_figure
from model.judging.spec import PARAM, Metrics, MetricSpec
from model.judging.verdict import Number, RuleVerdict
from model.parse.fio_json import FioResult, fio_messages, parse_fio_json
from model.parse.fio_verify import SECTOR_BYTES, VerifyFailure, VerifySector, parse_sector, parse_verify_failures

RULE = "data-integrity"
#: The settings (model/blame.py's trail keys) the rule's verdict depends on. Where each block lands depends on no setting: its own evidence names the layer (a hint).
BLAME = BlameSettings(frozenset())
#: Repeats without --repeats.
DEFAULT_REPEATS = 1
REPEATABLE = True
#: Which of its metrics follow the host CPU the guest gets (model/across/contention.py).
HOST_CPU_BOUND: tuple[str, ...] = ()

MIB = 1 << 20

#: The range the guest writes: 4 MiB (8192 sectors), a few MiB as the rule's time allows (the whole
#: plan, read-back included, is one fio run of about 2.5 s under TCG, most of it fio's start of each
#: pass), enough for every pass to write hundreds of requests.
REGION_BYTES = 4 * MIB
#: Where it starts on the scratch disk: a quarter in, clear of the disk's first MiB (the partition
#: table the alignment rule writes) and of the direct-io rule's first 64 MiB, so that the guard
#: sectors around it hold only what this rule left there.
REGION_START_BYTES = 256 * MIB
#: The sectors checked unchanged before and after the range: 1 MiB each side, room for a write
#: shifted by up to 2048 sectors (1 MiB, the largest partition alignment in common use) to land in them.
GUARD_BYTES = 1 * MIB
#: How many bad sectors each finding names (the first, by LBA); the counts cover them all.
FIRST_SHOWN = 3
#: The read-back job's name in fio's output.
READBACK_JOB = "readback"
#: The read-back: 4 KiB O_DIRECT reads at depth 8. fio names the first bad sector of each read that
#: fails, so small reads name more of them; 1024 reads of the 4 MiB range take about 0.2 s under TCG.
READBACK_BS = 4096
READBACK_DEPTH = 8
#: fio's job error when what it read failed to verify (EILSEQ): the verdict's, not the harness's.
VERIFY_ERROR = 84
#: The device-mapper target ``--inject lba-shift`` writes through (the suite's own name; removed after
#: each repeat): linear over the disk from model.faults.LBA_SHIFT_SECTORS.
SHIFT_TARGET = "vioc-lba-shift"

Side = Literal["host", "guest"]
Kind = Literal["misplaced", "lost", "torn", "outside"]
KINDS: tuple[Kind, ...] = ("misplaced", "lost", "torn", "outside")
KIND_TEXT: dict[Kind, str] = {
    "misplaced": "not at the LBA they name (a shifted or misplaced write)",
    "lost": "not the last generation written (a lost write)",
    "torn": "with a broken checksum (a torn write)",
    "outside": "changed outside the range the guest wrote (a write that landed elsewhere)",
}


@dataclass(frozen=True)
class WritePass:
    """One generation of the plan: a fio job that writes ``length_bytes`` from ``start_bytes`` (from
    the range's start) once over, every block exactly once (sequential, or random with fio's random
    map). Its ``generation`` is its fio job number, which fio writes into every sector's header."""

    generation: int
    name: str
    rw: Literal["write", "randwrite"]
    bs_bytes: int
    iodepth: int
    direct: bool
    start_bytes: int
    length_bytes: int
    #: buffered passes: fsync after this many writes (0: only at the end)
    fsync_every: int = 0

    @property
    def writes(self) -> int:
        return self.length_bytes // self.bs_bytes

    def describe(self) -> str:
        how = "O_DIRECT" if self.direct else "buffered" + (f", fsync every {self.fsync_every}" if self.fsync_every
                                                             else ", fsync at the end")
        order = "sequential" if self.rw == "write" else "random"
        return (f"generation {self.generation} ({self.name}): {self.writes} {order} {_size(self.bs_bytes)} writes, "
                f"{how}, depth {self.iodepth}, at {_size(self.start_bytes)}-{_size(self.start_bytes + self.length_bytes)}")


def _size(n: int) -> str:
    """4096 -> "4 KiB", 1048576 -> "1 MiB", 0 -> "0"."""
    for div, unit in ((MIB, "MiB"), (1024, "KiB")):
        if n and n % div == 0:
            return f"{n // div} {unit}"
    return f"{n} B" if n else "0"


#: The writes, in order: each later pass overwrites part of the earlier ones, and every generation
#: is the last somewhere in the final range (0-0.5 MiB: 2, 0.5-1: 3, 1-1.5: 2, 1.5-2: 1, 2-3: 4,
#: 3-3.5: 5, 3.5-4: 4). The mix: large sequential O_DIRECT writes, 4 KiB random ones at depth 16,
#: 1 KiB random ones (below the 4 KiB physical block: the host emulates them by read-modify-write)
#: at depth 8, and buffered writes through the page cache with an fsync at the end and every 8 writes.
#: The last pass's fsync of the device is the flush after all of them.
PLAN: tuple[WritePass, ...] = (
    WritePass(1, "seq128k", "write", 128 << 10, 4, True, 0, 4 * MIB),
    WritePass(2, "rand4k", "randwrite", 4 << 10, 16, True, 0, 3 * MIB // 2),
    WritePass(3, "rand1k", "randwrite", 1 << 10, 8, True, MIB // 2, MIB // 2),
    WritePass(4, "buffered64k", "write", 64 << 10, 1, False, 2 * MIB, 2 * MIB),
    WritePass(5, "buffered4k", "randwrite", 4 << 10, 1, False, 3 * MIB, MIB // 2, fsync_every=8),
)


def plan_for(logical_block_bytes: int) -> tuple[WritePass, ...]:
    """:data:`PLAN` on a disk with this logical block: an O_DIRECT pass below it (the 1 KiB one) writes one
    logical block at a time instead (the guest refuses O_DIRECT below the logical block with EINVAL), named
    for it (``rand1k-as-4k`` on a 4Kn disk); every generation keeps its place."""
    out = []
    for p in PLAN:
        if p.direct and p.bs_bytes < logical_block_bytes:
            p = replace(p, bs_bytes=logical_block_bytes, name=f"{p.name}-as-{logical_block_bytes >> 10}k")
        out.append(p)
    return tuple(out)


@dataclass(frozen=True)
class Region:
    """The range the guest writes (bytes on the disk, as the guest's writes name them) and the guard
    sectors around it."""

    start_bytes: int = REGION_START_BYTES
    length_bytes: int = REGION_BYTES
    guard_bytes: int = GUARD_BYTES

    @property
    def end_bytes(self) -> int:
        return self.start_bytes + self.length_bytes

    @property
    def window_start_bytes(self) -> int:
        """Where the host starts reading: the guard before the range."""
        return self.start_bytes - self.guard_bytes

    @property
    def window_bytes(self) -> int:
        return self.length_bytes + 2 * self.guard_bytes

    @property
    def sectors(self) -> int:
        return self.length_bytes // SECTOR_BYTES

    def describe(self) -> str:
        return (f"LBA {self.start_bytes // SECTOR_BYTES}-{self.end_bytes // SECTOR_BYTES - 1} "
                f"({_size(self.length_bytes)} at {_size(self.start_bytes)})")


def pattern(run_id: int, generation: int) -> bytes:
    """The 8 bytes a pass's sectors repeat after their header: the run's id, then the generation
    (fio's ``--verify_pattern=0x<run id><generation>``, which fio writes in the order given)."""
    return run_id.to_bytes(4, "big") + generation.to_bytes(4, "big")


def last_pass(plan: Sequence[WritePass], offset_bytes: int) -> WritePass | None:
    """The last pass of ``plan`` that writes the byte at ``offset_bytes`` from the range's start."""
    for p in reversed(plan):
        if p.start_bytes <= offset_bytes < p.start_bytes + p.length_bytes:
            return p
    return None


@dataclass(frozen=True)
class BadBlock:
    """One sector that is not what the guest wrote, on one side: where (its LBA on the disk), what
    was expected there and what was found."""

    side: Side
    lba: int
    kind: Kind
    expected: str
    found: str

    def describe(self) -> str:
        return f"LBA {self.lba}: expected {self.expected}, found {self.found}"


@dataclass(frozen=True)
class HostCheck:
    """The backing file's sectors, checked (:func:`check_backing`)."""

    where: str  # the backing file and its host
    sectors_checked: int
    guard_sectors_checked: int
    bad: tuple[BadBlock, ...]  # by LBA
    #: the one distance (sectors) between where the misplaced blocks of this run lie and the LBA each
    #: names, when they all agree: a shifted mapping; None when there is none or they differ
    shift_sectors: int | None = None

    def count(self, kind: Kind) -> int:
        return sum(b.kind == kind for b in self.bad)


@dataclass(frozen=True)
class GuestCheck:
    """The guest's read-back of the range: fio read it through ``target`` and verified every sector.
    ``bad``: the sectors fio's messages name (a read whose header fails names its first bad sector
    only); ``failed``: fio's job ended with its verify error (EILSEQ), named sectors or not."""

    target: str
    bytes_read: int
    bad: tuple[BadBlock, ...]
    failed: bool = False

    @property
    def errors(self) -> int:
        return len({b.lba for b in self.bad})


def _named(s: VerifySector, run_id: int) -> str:
    """What a sector holds, in the verdict's words."""
    if s.zeros:
        return "zeros (never written)"
    if not s.magic:
        return "data that is no fio block"
    if not s.header_ok:
        return "a fio header whose CRC32C, type or length is broken"
    gen, run = int.from_bytes(s.pattern[4:], "big"), int.from_bytes(s.pattern[:4], "big")
    said = f"the block naming LBA {s.offset_bytes // SECTOR_BYTES}, generation {s.thread}"
    if run != run_id:
        said += f" of another run ({run:08x})"
    if not s.md5_ok:
        said += ", its MD5 broken"
    elif not s.pattern_whole or gen != s.thread:
        said += ", its data mixing two writes"
    return said


def _expected(lba: int, p: WritePass, run_id: int) -> str:
    return f"the block naming LBA {lba}, generation {p.generation} ({p.name}) of run {run_id:08x}"


def _classify(s: VerifySector, lba: int, p: WritePass, run_id: int) -> Kind | None:
    """The finding at a sector of the range where pass ``p`` wrote last; None: it holds that block."""
    if s.zeros or not s.magic:
        return "lost"
    if not s.header_ok or not s.md5_ok or not s.pattern_whole:
        return "torn"
    run = int.from_bytes(s.pattern[:4], "big")
    gen = int.from_bytes(s.pattern[4:], "big")
    if gen != s.thread:
        return "torn"  # the header of one write, the data of another
    if run != run_id:
        return "lost"  # an earlier run's block: this run's write never came
    if s.offset_bytes != lba * SECTOR_BYTES:
        return "misplaced"
    if gen < p.generation:
        return "lost"
    if gen > p.generation:
        return "misplaced"  # a later pass that never wrote here: its write landed here instead
    return None


def fio_args(target: str, plan: Sequence[WritePass], region: Region, run_id: int, fio: str = "fio") -> list[str]:
    """fio's command line that writes ``plan`` over ``region`` of ``target`` and reads it back verifying:
    global options, then one job per pass and the read-back (guest/tools/data_integrity.py runs it).

    fio's verify options (fio 3.33): ``--verify=md5 --verify_interval=512`` puts fio's header and an MD5
    in every 512-byte sector it writes, ``--verify_pattern`` fills the rest with the pass's
    :func:`pattern`, ``--do_verify=0`` leaves the verifying to the read-back, a plain read of the range
    that verifies what it reads (``--continue_on_error=verify``: every failing read is reported, and the
    job goes on); ``--verify_state_save=0`` leaves no state files in the guest. ``--stonewall`` runs the
    jobs one after the other, so each pass's number is the generation it writes last."""
    a = [fio, "--output-format=json", f"--filename={target}", "--verify=md5", "--do_verify=0",
         f"--verify_interval={SECTOR_BYTES}", "--verify_state_save=0", "--thread"]
    for p in plan:
        a += [f"--name={p.name}", f"--rw={p.rw}", f"--bs={p.bs_bytes}", f"--iodepth={p.iodepth}",
              f"--ioengine={'libaio' if p.direct else 'psync'}", f"--direct={int(p.direct)}",
              f"--offset={region.start_bytes + p.start_bytes}", f"--size={p.length_bytes}",
              f"--verify_pattern=0x{pattern(run_id, p.generation).hex()}"]
        if not p.direct:
            a += [*((f"--fsync={p.fsync_every}",) if p.fsync_every else ()), "--end_fsync=1"]
        a.append("--stonewall")
    a += [f"--name={READBACK_JOB}", "--rw=read", f"--bs={READBACK_BS}", f"--iodepth={READBACK_DEPTH}",
          "--ioengine=libaio", "--direct=1", f"--offset={region.start_bytes}", f"--size={region.length_bytes}",
          "--verify_fatal=0", "--continue_on_error=verify", "--stonewall"]
    return a


def fio_results(stdout: str, stderr: str, exit_status: int, target: str,
                plan: Sequence[WritePass] = PLAN) -> tuple[FioResult, dict[str, int]]:
    """fio's results of :func:`fio_args`' run and the writes each pass completed; FioError where a pass
    failed or fio gave no results (the range was not written: nothing to judge). The read-back's verify
    error is kept for the verdict."""
    said = fio_messages(stdout, stderr)
    try:
        result = parse_fio_json(stdout, f"fio {RULE} on {target}")
    except ParseError as e:
        raise FioError(f"fio {RULE} on {target}: exit status {exit_status}, no results ({e}); fio said: "
                       f"{said[-1500:] or '(nothing)'}", exit_status, said) from None
    failed = [j for j in result.jobs if j.error and not (j.name == READBACK_JOB and j.error == VERIFY_ERROR)]
    if failed or len(result.jobs) != len(plan) + 1:
        jobs = "; ".join(f"job {j.name}: error {j.error}" for j in failed) or f"{len(result.jobs)} jobs"
        raise FioError(f"fio {RULE} on {target} failed ({jobs}); fio said: {said[-1500:] or '(nothing else)'}",
                       exit_status, said)
    return result, {j.name: j.write.io_count for j in result.jobs if j.name != READBACK_JOB}


def run_verdict(stdout: str, stderr: str, exit_status: int, target: str, shift_sectors: int, window: bytes,
              guards_before: tuple[bytes, bytes], region: Region, plan: Sequence[WritePass], run_id: int,
              where: str, mapping: str = "") -> RuleVerdict:
    """One run judged from what fio said in the guest (:func:`fio_args`' run through ``target``, a
    mapping ``shift_sectors`` into the disk, 0 for the disk itself) and the backing file's ``window``
    read after it (:func:`check_backing`); FioError where fio did not write the range."""
    result, writes = fio_results(stdout, stderr, exit_status, target, plan)
    readback = result.job(READBACK_JOB)
    guest = GuestCheck(target, readback.read.io_bytes,
                       guest_bad_blocks(parse_verify_failures(stderr), shift_sectors * SECTOR_BYTES),
                       failed=readback.error == VERIFY_ERROR)
    host = check_backing(window, guards_before, region, plan, run_id, where)
    return judge_data_integrity(host, guest, region, plan, run_id, writes, mapping)


def check_backing(window: bytes, guards_before: tuple[bytes, bytes], region: Region, plan: Sequence[WritePass],
                  run_id: int, where: str = "the backing file") -> HostCheck:
    """Check the backing file after the run: ``window`` is its bytes from ``region.window_start_bytes``
    (``region.window_bytes`` of them), ``guards_before`` the guard before and the guard after the range
    as they were before the guest wrote."""
    if len(window) != region.window_bytes:
        raise ValueError(f"the window read is {len(window)} bytes, not {region.window_bytes}")
    if tuple(len(g) for g in guards_before) != (region.guard_bytes, region.guard_bytes):
        raise ValueError(f"the guards read before are {[len(g) for g in guards_before]} bytes, not {region.guard_bytes}")
    bad: list[BadBlock] = []
    shifts: Counter[int] = Counter()
    first = region.window_start_bytes // SECTOR_BYTES
    guard_sectors = region.guard_bytes // SECTOR_BYTES
    after_start = guard_sectors + region.sectors
    for i in range(region.window_bytes // SECTOR_BYTES):
        lba = first + i
        now = window[i * SECTOR_BYTES:(i + 1) * SECTOR_BYTES]
        if i < guard_sectors or i >= after_start:
            g = guards_before[0] if i < guard_sectors else guards_before[1]
            j = i if i < guard_sectors else i - after_start
            if now != g[j * SECTOR_BYTES:(j + 1) * SECTOR_BYTES]:
                s = parse_sector(now)
                bad.append(BadBlock("host", lba, "outside", "unchanged, as before the run", _named(s, run_id)))
                if s.whole and s.pattern[:4] == run_id.to_bytes(4, "big"):
                    shifts[lba - s.offset_bytes // SECTOR_BYTES] += 1
            continue
        s = parse_sector(now)
        p = last_pass(plan, lba * SECTOR_BYTES - region.start_bytes)
        if p is None:
            raise ValueError(f"no pass of the plan writes LBA {lba} of the range: the plan leaves a hole")
        kind = _classify(s, lba, p, run_id)
        if kind is None:
            continue
        bad.append(BadBlock("host", lba, kind, _expected(lba, p, run_id), _named(s, run_id)))
        if kind == "misplaced" and s.offset_bytes != lba * SECTOR_BYTES:
            shifts[lba - s.offset_bytes // SECTOR_BYTES] += 1
    shift = next(iter(shifts)) if len(shifts) == 1 else None
    return HostCheck(where, region.sectors, 2 * guard_sectors, tuple(bad), shift)


def guest_bad_blocks(failures: Sequence[VerifyFailure], offset_bytes: int = 0) -> tuple[BadBlock, ...]:
    """fio's verify failures as bad blocks; ``offset_bytes``: where the device the guest read through
    starts on the disk (a mapping's offset), so that each LBA is the disk's. fio names the first
    bad sector of each read it failed."""
    kinds: dict[str, Kind] = {"misplaced": "misplaced", "missing": "lost", "torn": "torn"}
    return tuple(BadBlock("guest", (f.offset_bytes + offset_bytes) // SECTOR_BYTES, kinds[f.kind],
                          f"the block fio wrote at offset {f.offset_bytes} of {f.file}", f"fio: {f.what}")
                 for f in failures)


#: What the rule records (model/judging/spec.py): counts of sectors and writes, the range and the run's
#: id. All parameters: the verdict is exact (any bad sector fails), and a count is evidence, not a level.
METRICS: Metrics = (
    (r"(host|guest)_(misplaced|lost|torn|outside|bad)_sectors|host_(guard_)?sectors_checked|host_shift_sectors"
     + r"|region_sectors", MetricSpec("sectors", PARAM)),
    (r"guest_bytes_read|region_start_bytes", MetricSpec("bytes", PARAM)),
    ("(" + "|".join(p.name for p in PLAN) + r")(-as-\d+k)?_writes", MetricSpec("requests", PARAM)),
    (r"run_id|mapping", MetricSpec("", PARAM)),
)
#: Nothing the rule records is a measured quantity: no minimum effect to measure.
MIN_EFFECTS: Mapping[str, float] = {}


def _finding(side_text: str, bad: Sequence[BadBlock], kind: Kind, extra: str = "") -> str:
    these = [b for b in bad if b.kind == kind]
    shown = "; ".join(b.describe() for b in these[:FIRST_SHOWN])
    more = f" (and {len(these) - FIRST_SHOWN} more)" if len(these) > FIRST_SHOWN else ""
    return f"{side_text}: {len(these)} sector(s) {KIND_TEXT[kind]}{extra}; first: {shown}{more}"


def judge_data_integrity(host: HostCheck, guest: GuestCheck, region: Region, plan: Sequence[WritePass], run_id: int,
                         writes: Mapping[str, int], mapping: str = "") -> RuleVerdict:
    """Every sector right on both sides. ``writes``: the writes fio completed, by pass name;
    ``mapping``: the guest's device-mapper target the guest wrote through ("" : the disk itself)."""
    lines = [f"range {region.describe()}, run {run_id:08x}, written by {len(plan)} passes, then read back:",
             *(f"  {p.describe()}: {writes.get(p.name, 0)} writes completed" for p in plan)]
    if mapping:
        lines.append(f"the guest wrote and read through {mapping}")
    host_bad = len({b.lba for b in host.bad})
    lines.append(f"host: {host.where}: {host.sectors_checked} sectors of the range and {host.guard_sectors_checked} "
                 f"around it checked, {host_bad} bad")
    lines.append(f"guest: fio read {_size(guest.bytes_read)} back through {guest.target} and verified every sector "
                 f"(header, offset, MD5): {guest.errors} bad" + (", its verify failed" if guest.failed else ""))
    problems: list[str] = []
    host_side = f"host ({host.where})"
    for kind in KINDS:
        if host.count(kind):
            extra = ""
            if kind in ("misplaced", "outside") and host.shift_sectors is not None:
                extra = (f" (every block of this run found out of place lies {host.shift_sectors:+d} sectors "
                         f"({host.shift_sectors * SECTOR_BYTES:+d} bytes) from the LBA it names: a shifted mapping)")
            problems.append(_finding(host_side, host.bad, kind, extra))
    guest_side = f"guest (fio verify through {guest.target})"
    for kind in KINDS:
        if any(b.kind == kind for b in guest.bad):
            problems.append(_finding(guest_side, guest.bad, kind))
    if guest.failed and not guest.bad:
        problems.append(f"{guest_side}: fio's read-back ended with its verify error and named no sector")
    for p in plan:
        if writes.get(p.name, 0) != p.writes:
            problems.append(f"pass {p.name} completed {writes.get(p.name, 0)} writes of the {p.writes} it issues: "
                            "the range was not written whole")
    if guest.bytes_read != region.length_bytes:
        problems.append(f"the guest read back {guest.bytes_read} bytes of the {region.length_bytes} written")
    notes: list[str] = []
    if host.bad and not guest.errors and not guest.failed:
        notes.append("the guest read back every sector as it wrote it, and the backing file holds something else: "
                     "the data moved or vanished below the guest's reads (a mapping in the guest's block layer, its "
                     "driver, or the hypervisor)")
    hint = None
    if problems:
        if mapping:
            hint = Blame("guest configuration", f"the guest wrote through {mapping}, a mapping of its own: its "
                         "offset moves every block it writes")
        else:
            guest_bad = guest.errors or guest.failed
            side = "both sides" if host.bad and guest_bad else "the host's side" if host.bad else "the guest's side"
            hint = Blame("unknown", f"bad sectors on {side}: the guest's block layer, its driver and the hypervisor "
                         "all carry the data, and no setting singles one out")
    props: dict[str, Number] = {
        "run_id": f"{run_id:08x}", "region_start_bytes": region.start_bytes, "region_sectors": region.sectors,
        "host_sectors_checked": host.sectors_checked, "host_guard_sectors_checked": host.guard_sectors_checked,
        "host_bad_sectors": host_bad, "guest_bad_sectors": guest.errors, "guest_bytes_read": guest.bytes_read,
        **{f"host_{k}_sectors": host.count(k) for k in KINDS},
        **{f"{p.name}_writes": writes.get(p.name, 0) for p in plan},
    }
    if host.shift_sectors is not None:
        props["host_shift_sectors"] = host.shift_sectors
    if mapping:
        props["mapping"] = mapping
    figure = pair_figure(Pair("sectors written / whole on the host", region.sectors, region.sectors - host.count("misplaced")
                              - host.count("lost") - host.count("torn"), "sectors", Threshold(region.sectors)),
                         Pair("bytes read back by the guest / verified", guest.bytes_read,
                              guest.bytes_read - guest.errors * SECTOR_BYTES, "bytes", Threshold(guest.bytes_read)))
    return RuleVerdict(RULE, tuple(lines), tuple(problems), tuple(notes), props, figure, hint)
