"""Rule 5, alignment (the vinum multi-stripe case).

The disk advertises 4 KiB physical blocks and a 64 KiB optimal I/O size. With a partition and
a filesystem on it, the host-observed requests of a workload on a file must start and end on
physical-block boundaries and must not touch more optimal-I/O units (stripes) than their size
needs. A partition at sector 63 shifts every request by 31.5 KiB: each one then covers part
of a physical block (a read-modify-write on 4K-sector media) and, like vinum's transfers,
spans one stripe more than it needs.

Example::

    c = count_boundary_crossings([(32256, 65536)], physical=4096, optimal=65536)
    c.misaligned, c.extra_stripe  # (1, 1)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from model.blame import Blame, BlameSettings
from model.judging.figures import Pair, Threshold, pair_figure
from model.judging.spec import LOWER, PARAM, Metrics, MetricSpec
from model.judging.verdict import Number, RuleVerdict, kib

RULE = "alignment"
#: The settings (model/blame.py's trail keys) the rule's verdict depends on.
BLAME = BlameSettings(frozenset({"logical_block_size", "physical_block_size", "optimal_io_size"}))
#: Repeats without --repeats.
DEFAULT_REPEATS = 1
REPEATABLE = True
#: Which of its metrics follow the host CPU the guest gets (model/across/contention.py).
HOST_CPU_BOUND: tuple[str, ...] = ()

#: Largest fraction of host requests that may cross a boundary. Measured here (Debian 6.1 guest,
#: TCG, ext4-driver ext2 with 4 KiB blocks, 64 KiB O_DIRECT random writes to a laid-out file, 300
#: requests): 0 crossing with the partition at 1 MiB, every data request crossing at sector 63.
#: 2 % leaves room for a few metadata writes of the filesystem and is 50x below the fault.
MAX_CROSSING_FRACTION = 0.02

#: The partition starts the rule creates: 1 MiB (what fdisk and parted do by default) and the
#: DOS-era sector 63 of the misaligned fault.
HEALTHY_START_SECTOR = 2048
MISALIGNED_START_SECTOR = 63
#: Linux's sysfs ``start`` of a partition counts 512-byte sectors whatever the logical block size.
SYSFS_SECTOR_BYTES = 512


def partition_start(misaligned: bool, logical_block_bytes: int) -> int:
    """The partition's first sector in the disk's own logical sectors, as fdisk and sfdisk count them: 1 MiB
    in (sector 2048 of 512 bytes, 256 of a 4Kn disk's 4 KiB), or the DOS-era sector 63 of the disk's own
    sectors (on a 4Kn disk 63 x 4 KiB: on the physical block, off the 64 KiB optimal I/O grid)."""
    if misaligned:
        return MISALIGNED_START_SECTOR
    return HEALTHY_START_SECTOR * SYSFS_SECTOR_BYTES // logical_block_bytes

#: What the rule records (model/judging/spec.py): fewer requests off the grid is better; the grid and
#: the partition's start are parameters.
METRICS: Metrics = (
    (r"misaligned_requests|extra_stripe_requests", MetricSpec("requests", LOWER)),
    (r"crossing_fraction", MetricSpec("fraction", LOWER)),
    (r"partition_start_bytes|physical_block_bytes|optimal_io_bytes", MetricSpec("bytes", PARAM)),
)

#: compare's minimum effect per metric (model/across/moves.py's MIN_EFFECTS says how each is derived from
#: run-to-run noise). Each comment: the CV and the widest change between two healthy runs with 3 s / 2 s
#: windows, and the configuration each came from. None moved (every request aligned): the 2 % floor.
MIN_EFFECTS: Mapping[str, float] = {
    "crossing_fraction": 0.020,  # CV 0.00 % / 0.00 %, widest 0.0 % / 0.0 % (virtio-blk / virtio-blk)
    "extra_stripe_requests": 0.020,  # CV 0.00 % / 0.00 %, widest 0.0 % / 0.0 % (virtio-blk / virtio-blk)
    "misaligned_requests": 0.020,  # CV 0.00 % / 0.00 %, widest 0.0 % / 0.0 % (virtio-blk / virtio-blk)
}


@dataclass(frozen=True)
class BoundaryCounts:
    requests: int
    misaligned: int  # start or end not on a physical-block boundary
    extra_stripe: int  # touches more optimal-I/O units than ceil(length / optimal)
    physical_block_bytes: int
    optimal_io_bytes: int

    @property
    def crossing(self) -> int:
        """The larger of the two counts (a request may be both)."""
        return max(self.misaligned, self.extra_stripe)

    @property
    def crossing_fraction(self) -> float:
        return self.crossing / self.requests if self.requests else 0.0


def count_boundary_crossings(requests: Iterable[tuple[int, int]], physical: int, optimal: int) -> BoundaryCounts:
    """Count host requests ``(offset_bytes, length_bytes)`` off the physical-block or optimal-I/O grid.
    ``optimal`` 0 means the device advertises none: only physical blocks are counted."""
    n = mis = extra = 0
    for off, length in requests:
        if length <= 0:
            continue
        n += 1
        if off % physical or (off + length) % physical:
            mis += 1
        if optimal:
            touched = (off + length - 1) // optimal - off // optimal + 1
            if touched > -(-length // optimal):
                extra += 1
    return BoundaryCounts(n, mis, extra, physical, optimal)


def judge_alignment(counts: BoundaryCounts, partition_start_bytes: int, workload: str,
                    host_source: str) -> RuleVerdict:
    lines = [(f"partition starts at {partition_start_bytes} bytes (sector {partition_start_bytes // 512}); "
              f"device physical block {counts.physical_block_bytes} B, optimal I/O {kib(counts.optimal_io_bytes)}"),
             (f"{workload}: host saw {counts.requests} data requests ({host_source}); {counts.misaligned} off the "
              f"physical-block grid, {counts.extra_stripe} spanning an extra optimal-I/O unit")]
    problems: list[str] = []
    hint = None
    if counts.requests == 0:
        problems.append("the host saw no data requests: the workload did not reach this disk")
    elif counts.crossing_fraction > MAX_CROSSING_FRACTION:
        why = ""
        if partition_start_bytes % counts.physical_block_bytes or (
                counts.optimal_io_bytes and partition_start_bytes % counts.optimal_io_bytes):
            grid = 'optimal I/O size' if counts.optimal_io_bytes else 'physical block'
            why = (f" The partition start ({partition_start_bytes} bytes) is not a multiple of the {grid}: every "
                   "filesystem block is shifted off the device's grid.")
            # where the partition lies is the guest's (its image's, its installer's) configuration
            hint = Blame("guest configuration", f"the partition starts at {partition_start_bytes} bytes, not a "
                                                f"multiple of the device's {grid}")
        problems.append(f"{counts.crossing} of {counts.requests} host requests ({counts.crossing_fraction:.0%}) "
                        f"cross a physical-block or optimal-I/O boundary; at most {MAX_CROSSING_FRACTION:.0%} "
                        f"may.{why}")
    props: dict[str, Number] = {
        "partition_start_bytes": partition_start_bytes, "physical_block_bytes": counts.physical_block_bytes,
        "optimal_io_bytes": counts.optimal_io_bytes, "host_requests": counts.requests,
        "misaligned_requests": counts.misaligned, "extra_stripe_requests": counts.extra_stripe,
        "crossing_fraction": round(counts.crossing_fraction, 4), "host_source": host_source}
    figures = pair_figure(Pair("host requests / crossing a boundary", counts.requests, counts.crossing,
                               threshold=Threshold(MAX_CROSSING_FRACTION * counts.requests, "at most")))
    return RuleVerdict(RULE, tuple(lines), tuple(problems), (), props, figures, hint)
