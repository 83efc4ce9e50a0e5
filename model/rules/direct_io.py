"""Rule 3, direct-I/O fidelity and durability (the Oracle LGWR ``dd oflag=direct`` case).

Fidelity: small O_DIRECT writes (1 KiB, 4 KiB) reach the host one for one, at their size.
Durability: every O_DSYNC write and every fsync must reach the host as a flush (or a FUA
write, which QEMU's SCSI disk carries out and counts as a flush) whenever the device
advertises a volatile write cache. A missing flush is lost data: no tolerance.

Example::

    v = judge_direct_io([OneForOne(4096, 200, 200, 819200)], [Durability("O_DSYNC", 100, 0)],
                        volatile_cache=True, cache_source="configured write-back")
    v.passed  # False: 100 O_DSYNC writes, 0 host flushes
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from model.blame import BlameSettings
from model.judging.figures import Pair, Threshold, pair_figure
from model.judging.spec import LOWER, PARAM, Metrics, MetricSpec
from model.judging.verdict import Number, RuleVerdict, kib

RULE = "direct-io"
#: Writes per one-for-one run: enough that one lost or merged write is a visible 0.5 %, few enough to
#: take under a second each on a file-backed disk under TCG; the run's and the replay's.
WRITES = 200
#: The region written: random offsets in the first 64 MiB of the scratch disk.
REGION_BYTES = 64 << 20
#: The settings (model/blame.py's trail keys) the rule's verdict depends on.
BLAME = BlameSettings(frozenset({"write_cache"}))
#: Repeats without --repeats.
DEFAULT_REPEATS = 1
REPEATABLE = True
#: Which of its metrics follow the host CPU the guest gets (model/across/contention.py).
HOST_CPU_BOUND: tuple[str, ...] = ("latency_[a-z]+_[a-z0-9]+_us",)

#: Host writes per guest O_DIRECT write may differ from 1 by this fraction. Measured here
#: (QEMU 7.2 TCG, file-backed disk, 200 random writes at depth 1): exactly 200 host writes of
#: exactly the guest's size on virtio-scsi and virtio-blk, every run. 1 % (2 of 200) leaves room
#: for nothing but a stray write of somebody else and catches any merging or splitting.
ONE_FOR_ONE_TOLERANCE = 0.01

#: Host flushes per guest sync (O_DSYNC write or fsync) that make the writes durable. No
#: tolerance: a sync the host never saw as a flush (or FUA) is data a power loss takes.
MIN_FLUSHES_PER_SYNC = 1.0

#: The O_DIRECT write sizes the rule counts: 1 KiB (LGWR's redo writes) and 4 KiB (a page).
WRITE_SIZES = (1024, 4096)


def write_sizes(logical_block_bytes: int) -> tuple[int, ...]:
    """The write sizes on a disk with this logical block: each of :data:`WRITE_SIZES` raised to one logical
    block, since the guest refuses O_DIRECT below it (EINVAL): (1024, 4096) on 512-byte blocks, (4096,) on
    a 4Kn disk, whose smallest direct write is 4 KiB."""
    return tuple(sorted({max(size, logical_block_bytes) for size in WRITE_SIZES}))


_RUN = r"[a-z0-9]+_"  # each counted run's prefix (w1k_, w4k_, dsync_, fsync_)

#: What the rule records (model/judging/spec.py): the latency the host path adds is lower-better; the
#: write and flush counts are the evidence of the exact checks, parameters.
METRICS: Metrics = (
    (r"latency_(guest|host|added)_(p50|min)_us", MetricSpec("us", LOWER)),
    (_RUN + r"(guest|host)_writes|" + _RUN + r"guest_syncs|" + _RUN + r"host_flushes", MetricSpec("requests", PARAM)),
    (r"w\d+k_ratio", MetricSpec("x", PARAM)),  # host writes per guest write: 1 is right, either way is wrong
    (r"w\d+k_host_mean_bytes", MetricSpec("bytes", PARAM)),
    (r"volatile_write_cache", MetricSpec("bool", PARAM)),
)

#: compare's minimum effect per metric (model/across/moves.py's MIN_EFFECTS says how each is derived from
#: run-to-run noise). Each comment: the CV and the widest change between two healthy runs with 3 s / 2 s
#: windows, and the configuration each came from. Latencies of tens of microseconds under TCG jump
#: between runs (a vCPU's scheduling dominates them): far from normal, so the widest change decides.
MIN_EFFECTS: Mapping[str, float] = {
    "latency_added_p50_us": 9.211,  # CV 89.22 % / 36.08 %, widest 921.1 % / 234.0 % (virtio-blk / virtio-blk)
    "latency_guest_min_us": 9.047,  # CV 89.64 % / 107.08 %, widest 904.7 % / 608.7 % (virtio-scsi / virtio-blk)
    "latency_guest_p50_us": 1.474,  # CV 33.91 % / 15.61 %, widest 147.4 % / 73.0 % (virtio-blk / virtio-scsi)
    "latency_host_min_us": 0.873,  # CV 17.21 % / 18.80 %, widest 63.5 % / 87.3 % (virtio-blk / virtio-scsi)
    "latency_host_p50_us": 0.866,  # CV 15.64 % / 20.42 %, widest 60.3 % / 83.1 % (virtio-blk / virtio-scsi)
}


@dataclass(frozen=True)
class OneForOne:
    """One O_DIRECT write run of ``request_bytes`` writes, counted whole on both sides."""

    request_bytes: int
    guest_writes: int  # fio's completed writes
    host_writes: int  # the host's write counter over the run
    host_write_bytes: int

    @property
    def ratio(self) -> float:
        return self.host_writes / self.guest_writes if self.guest_writes else 0.0

    @property
    def host_mean_bytes(self) -> float:
        return self.host_write_bytes / self.host_writes if self.host_writes else 0.0


@dataclass(frozen=True)
class Durability:
    """One run of writes each of which must be durable when it returns."""

    kind: str  # "O_DSYNC writes", "fsync after each buffered write"
    guest_syncs: int  # O_DSYNC writes completed, or fsyncs fio issued
    host_flushes: int  # host flush requests over the run (QEMU: flush_operations, FUA included on SCSI)


@dataclass(frozen=True)
class LatencyFloor:
    """Depth-1 write latency on both sides: what the guest adds to the host's service time."""

    guest_p50_us: float
    host_p50_us: float
    guest_min_us: float
    host_min_us: float

    @property
    def added_p50_us(self) -> float:
        return self.guest_p50_us - self.host_p50_us


def latency_floor(guest_clat_percentiles_us: Mapping[float, float], guest_clat_mean_us: float,
                  host_write_latencies_us: Sequence[float]) -> LatencyFloor | None:
    """The latency floor of one depth-1 run of writes: fio's completion latency (its median, else its
    mean) against each write the host traced; None where either side has none."""
    if not host_write_latencies_us or not guest_clat_percentiles_us:
        return None
    return LatencyFloor(guest_p50_us=guest_clat_percentiles_us.get(50.0, guest_clat_mean_us),
                        host_p50_us=statistics.median(host_write_latencies_us),
                        guest_min_us=min(guest_clat_percentiles_us.values()), host_min_us=min(host_write_latencies_us))


def write_cache(said: bool | None, said_by: str, configured: bool | None, probed: str, now: str,
                fua: int | None) -> tuple[bool, str]:
    """Whether the device's write cache is volatile, and where that comes from: the hypervisor's word
    on what the device advertises (``said``, by ``said_by``), else what the suite asked for
    (``configured``), else the guest's probe (``probed``: "write back" or "write through"); the source
    says the guest's probe, its value ``now`` where it differs, and whether it sends FUA writes."""
    volatile = said if said is not None else bool(configured) if configured is not None else probed == "write back"
    if said is not None:
        source = f"the device advertises {'write back' if said else 'write through'} ({said_by})"
    elif configured is not None:
        source = (f"the suite asked for {'write back' if configured else 'write through'} (the hypervisor did "
                  "not say what the device advertises)")
    else:
        source = "unknown to the hypervisor"
    source += f"; guest probed {probed!r}"
    if now != probed:
        source += f", now {now!r}"
    if fua is not None:
        source += f"; guest sends FUA writes: {'yes' if fua else 'no (flushes instead)'}"
    return volatile, source


def judge_direct_io(fidelity: list[OneForOne], durability: list[Durability], volatile_cache: bool,
                    cache_source: str, latency: LatencyFloor | None = None,
                    durability_skipped: str | None = None) -> RuleVerdict:
    """Fidelity within ONE_FOR_ONE_TOLERANCE, durability exact where the cache is volatile.

    ``durability_skipped`` says why durability was not measured (a backend without a flush counter)."""
    lines: list[str] = []
    problems: list[str] = []
    notes: list[str] = []
    props: dict[str, Number] = {"volatile_write_cache": int(volatile_cache), "write_cache_source": cache_source}
    pairs: list[Pair] = []
    for f in fidelity:
        k = f"w{f.request_bytes // 1024}k"
        lines.append(f"{kib(f.request_bytes)} O_DIRECT writes: guest {f.guest_writes}, host {f.host_writes} "
                     f"(ratio {f.ratio:.3f}), host mean size {kib(f.host_mean_bytes)}")
        props.update({f"{k}_guest_writes": f.guest_writes, f"{k}_host_writes": f.host_writes,
                      f"{k}_ratio": round(f.ratio, 4), f"{k}_host_mean_bytes": round(f.host_mean_bytes)})
        pairs.append(Pair(f"{kib(f.request_bytes)} writes: guest / host", f.guest_writes, f.host_writes))
        if f.guest_writes == 0:
            problems.append(f"fio completed no {kib(f.request_bytes)} writes: nothing to compare")
        elif abs(f.ratio - 1.0) > ONE_FOR_ONE_TOLERANCE or abs(f.host_mean_bytes - f.request_bytes) > 0.5:
            problems.append(
                f"{f.guest_writes} O_DIRECT writes of {kib(f.request_bytes)} reached the host as {f.host_writes} "
                f"writes of {kib(f.host_mean_bytes)} on average; expected one for one (within "
                f"{ONE_FOR_ONE_TOLERANCE:.0%}) at {kib(f.request_bytes)}")
    lines.append(f"device write cache: {'volatile (write back)' if volatile_cache else 'write through'} "
                 f"({cache_source})")
    if durability_skipped:
        notes.append(f"durability not checked: {durability_skipped}")
    for d in durability:
        k = "dsync" if "DSYNC" in d.kind else "fsync"
        pairs.append(Pair(f"{'O_DSYNC' if k == 'dsync' else 'fsync'}: syncs / host flushes", d.guest_syncs,
                          d.host_flushes, threshold=Threshold(MIN_FLUSHES_PER_SYNC * d.guest_syncs)
                          if volatile_cache else None))
        lines.append(f"{d.kind}: guest {d.guest_syncs} syncs, host {d.host_flushes} flushes (FUA included)")
        props.update({f"{k}_guest_syncs": d.guest_syncs, f"{k}_host_flushes": d.host_flushes})
        if d.guest_syncs == 0:
            problems.append(f"{d.kind}: fio completed no syncs: nothing to compare")
        elif volatile_cache and d.host_flushes < MIN_FLUSHES_PER_SYNC * d.guest_syncs:
            lost = d.guest_syncs - d.host_flushes
            problems.append(
                f"{d.kind}: {d.guest_syncs} syncs returned to the application but the host saw only "
                f"{d.host_flushes} flushes: {lost} writes were acknowledged while still in a volatile write "
                f"cache ({cache_source}). A power loss loses them. Expected at least one flush or FUA write per sync.")
    if latency is not None:
        lines.append(f"latency floor (4 KiB O_DIRECT write, depth 1): guest p50 {latency.guest_p50_us:.0f} us, "
                     f"host p50 {latency.host_p50_us:.0f} us: the guest adds {latency.added_p50_us:.0f} us "
                     f"(min {latency.guest_min_us:.0f} vs {latency.host_min_us:.0f} us)")
        props.update({"latency_guest_p50_us": round(latency.guest_p50_us, 1),
                      "latency_host_p50_us": round(latency.host_p50_us, 1),
                      "latency_added_p50_us": round(latency.added_p50_us, 1),
                      "latency_guest_min_us": round(latency.guest_min_us, 1),
                      "latency_host_min_us": round(latency.host_min_us, 1)})
    return RuleVerdict(RULE, tuple(lines), tuple(problems), tuple(notes), props, pair_figure(*pairs))
