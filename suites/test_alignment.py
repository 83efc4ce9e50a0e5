"""Rule 5, alignment (the vinum multi-stripe case).

On the scratch disk (4 KiB physical blocks, 64 KiB optimal I/O size): a partition, a
filesystem with 4 KiB blocks, a laid-out file, then 4 KiB O_DIRECT random writes to it. Every
host request is checked against the physical-block and optimal-I/O grid. The partition starts
at 1 MiB; ``--inject misaligned`` starts it at sector 63, as DOS-era tools did.
"""

from __future__ import annotations

import pytest

from fixtures.options import SuiteOptions
from guest.tools.fio import FioJob
from measure.window import GuestDisk, run_counted
from model.rules.alignment import (
    HEALTHY_START_SECTOR,
    MISALIGNED_START_SECTOR,
    count_boundary_crossings,
    judge_alignment,
)
from reports.records import Record
from suites.assertions import conclude, raw_dir_for

FILE_BYTES = 32 << 20
WRITES = 400
MOUNT = "/mnt/vioc-align"


def partition_name(disk: str) -> str:
    """sdb -> sdb1, vdb -> vdb1, nvme0n1 -> nvme0n1p1."""
    return f"{disk}p1" if disk[-1].isdigit() else f"{disk}1"


def make_filesystem(disk: GuestDisk, start_sector: int) -> int:
    """One primary partition from ``start_sector`` to the end, ext2 (4 KiB blocks) on it, mounted
    at MOUNT with a laid-out file; returns the partition's start in bytes as the guest sees it."""
    dev, part = disk.device_path, partition_name(disk.kernel_name)
    disk.ssh.run(f"umount {MOUNT} 2>/dev/null; dd if=/dev/zero of={dev} bs=1M count=1 oflag=direct 2>/dev/null; "
                 f"printf 'o\\nn\\np\\n1\\n{start_sector}\\n\\nw\\n' | fdisk {dev} >/dev/null 2>&1; "
                 f"blockdev --rereadpt {dev}")
    disk.reapply_settings()  # the re-read revalidated the disk: faults and --guest-setup again
    start = int(disk.ssh.run(f"cat /sys/block/{disk.kernel_name}/{part}/start").stdout.strip())
    if start != start_sector:
        raise RuntimeError(f"fdisk made the partition of {dev} start at sector {start}, not {start_sector}")
    disk.ssh.run(f"mke2fs -q -F -b 4096 /dev/{part} && mkdir -p {MOUNT} && mount -o noatime /dev/{part} {MOUNT} && "
                 f"dd if=/dev/zero of={MOUNT}/data bs=1M count={FILE_BYTES >> 20} 2>/dev/null && sync")
    return start * 512


def remove_filesystem(disk: GuestDisk) -> None:
    disk.ssh.run(f"umount {MOUNT} 2>/dev/null; dd if=/dev/zero of={disk.device_path} bs=1M count=1 oflag=direct "
                 f"2>/dev/null; blockdev --rereadpt {disk.device_path}", check=False)
    disk.reapply_settings()


@pytest.mark.rule("alignment")
def test_alignment(scratch_disk: GuestDisk, suite_options: SuiteOptions, record: Record) -> None:
    disk = scratch_disk
    raw = raw_dir_for(suite_options.results_dir, disk.config_id) / "alignment"
    if not disk.backend.exact_counts:
        pytest.skip(f"the {disk.backend.name} backend's host side has histograms, not each request's offset: "
                    "alignment needs the offsets")
    if disk.backend.request_tracer(disk.guest, disk.attached) is None:
        pytest.skip(f"the {disk.backend.name} backend has no per-request host trace: alignment needs each "
                    "request's offset")
    start_sector = MISALIGNED_START_SECTOR if "misaligned" in suite_options.inject else HEALTHY_START_SECTOR
    try:
        start_bytes = make_filesystem(disk, start_sector)
        job = FioJob("align4k", rw="randwrite", bs_bytes=4096, iodepth=4, io_bytes=4096 * WRITES,
                     size_bytes=FILE_BYTES, randseed=1, runtime_s=120)
        run = run_counted(disk, job, trace=True, raw_dir=raw, target=f"{MOUNT}/data")
    finally:
        remove_filesystem(disk)
    if run.host_trace is None:
        pytest.skip(f"alignment needs each request's offset, and the host trace is incomplete: {run.host_trace_gap}")
    requests = [(r.offset_lbn * 512, r.length_bytes) for r in run.host_trace.requests if not r.is_flush]
    # The grid is the device's own (as the hypervisor configured it), whatever the guest was told.
    cfg, lim = disk.attached.configured, disk.advertised_limits
    counts = count_boundary_crossings(requests, max(cfg.physical_block_bytes, lim.physical_block_size),
                                      cfg.optimal_io_bytes or lim.optimal_io_size)
    verdict = judge_alignment(counts, start_bytes, f"{WRITES} x 4 KiB O_DIRECT random writes to a file on ext2",
                              run.host_trace.source)
    conclude(verdict, record, disk.config_id, raw)
