"""Rule 5, alignment (the vinum multi-stripe case).

On the scratch disk (4 KiB physical blocks, 64 KiB optimal I/O size): a partition, a
filesystem with 4 KiB blocks, a laid-out file, then 4 KiB O_DIRECT random writes to it. Every
host request is checked against the physical-block and optimal-I/O grid. The partition starts
at 1 MiB; ``--inject misaligned`` starts it at sector 63, as DOS-era tools did.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures.options import SuiteOptions
from guest.tools.fio import FioJob
from guest.tools.mkfs import Filesystem, FilesystemUnsupported
from guest.tools.partitioning import Partitioning, partition_name
from measure.counted import run_counted
from measure.disk import GuestDisk
from model.judging.verdict import RuleVerdict
from model.rules.alignment import SYSFS_SECTOR_BYTES, count_boundary_crossings, judge_alignment, partition_start
from reports.records import Record
from reports.store.baseline import StoredBaseline
from suites.assertions import judge_rule
from suites.needs import needed

FILE_BYTES = 32 << 20
WRITES = 400
MOUNT = "/mnt/vioc-align"


def make_filesystem(disk: GuestDisk, parts: Partitioning, fs: Filesystem, start_sector: int,
                    sector_bytes: int = SYSFS_SECTOR_BYTES) -> int:
    """One primary partition from ``start_sector`` (of ``sector_bytes``, the disk's logical block: what
    fdisk and sfdisk count in) to the end, ext2 or xfs (4 KiB blocks) on it, mounted at MOUNT with a laid-out
    file; returns the partition's start in bytes as the guest sees it."""
    fs.unmount_with_next(MOUNT)  # rides ahead of the new table
    start = parts.create_one(disk.kernel_name, start_sector, wipe_first=True)  # in sysfs' 512-byte sectors
    disk.reapply_settings()  # the re-read revalidated the disk: faults and --guest-setup again
    if start * SYSFS_SECTOR_BYTES != start_sector * sector_bytes:
        raise RuntimeError(f"{type(parts).__name__} made the partition of {disk.device_path} start at byte "
                           f"{start * SYSFS_SECTOR_BYTES}, not {start_sector * sector_bytes} (sector {start_sector} "
                           f"of {sector_bytes} bytes)")
    fs.make_mounted_file(f"/dev/{partition_name(disk.kernel_name)}", 4096, MOUNT, f"{MOUNT}/data", FILE_BYTES)
    return start * SYSFS_SECTOR_BYTES


def remove_filesystem(disk: GuestDisk, parts: Partitioning, fs: Filesystem) -> None:
    fs.unmount_with_next(MOUNT)  # rides ahead of the wipe
    parts.wipe(disk.kernel_name)
    disk.reapply_settings()


@pytest.mark.rule("alignment")
def test_alignment(scratch_disk: GuestDisk, suite_options: SuiteOptions, record: Record,
                   stored_baseline: StoredBaseline | None) -> None:
    disk = scratch_disk
    if not disk.backend.exact_counts:
        pytest.skip(f"the {disk.backend.name} backend's host side has histograms, not each request's offset: "
                    "alignment needs the offsets")
    if disk.backend.request_tracer(disk.guest, disk.attached) is None:
        pytest.skip(f"the {disk.backend.name} backend has no per-request host trace: alignment needs each "
                    "request's offset")
    parts, fs = needed(disk, Partitioning, "alignment"), needed(disk, Filesystem, "alignment")
    logical = disk.advertised_limits.logical_block_size
    start_sector = partition_start("misaligned" in suite_options.inject, logical)

    def once(raw: Path) -> RuleVerdict:
        try:
            start_bytes = make_filesystem(disk, parts, fs, start_sector, logical)
            job = FioJob("align4k", rw="randwrite", bs_bytes=4096, iodepth=4, io_bytes=4096 * WRITES,
                         size_bytes=FILE_BYTES, randseed=1, runtime_s=120)
            run = run_counted(disk, job, trace=True, raw_dir=raw, target=f"{MOUNT}/data")
        except FilesystemUnsupported as e:
            pytest.skip(f"alignment cannot run on this guest: {e}")
        finally:
            remove_filesystem(disk, parts, fs)
        if run.host_trace is None:
            pytest.skip(f"alignment needs each request's offset, and the host trace is incomplete: {run.host_trace_gap}")
        requests = [(r.offset_lbn * 512, r.length_bytes) for r in run.host_trace.requests if not r.is_flush]
        # The grid is the device's own (as the suite asked for it), whatever the guest was told.
        cfg, lim = disk.attached.configured, disk.advertised_limits
        counts = count_boundary_crossings(requests, max(cfg.physical_block_bytes, lim.physical_block_size),
                                          cfg.optimal_io_bytes or lim.optimal_io_size)
        return judge_alignment(counts, start_bytes, f"{WRITES} x 4 KiB O_DIRECT random writes to a file on {fs.kind}",
                               run.host_trace.source)

    # A misaligned request is an exact finding: every repeat must pass.
    judge_rule(record, suite_options, once, exact=True, baseline=stored_baseline, disks=(disk,))
