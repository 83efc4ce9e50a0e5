"""Rule 3, direct-I/O fidelity and durability (the Oracle LGWR ``dd oflag=direct`` case).

On the scratch disk (file-backed, so writes are real): small O_DIRECT writes (1 and 4 KiB, none below
the disk's logical block: a 4Kn disk gets 4 KiB only) must reach the
host one for one; O_DSYNC writes and fsyncs must reach it as flushes (or FUA) while the device
advertises a volatile write cache. Every run is counted whole on both sides, not sampled.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures.options import SuiteOptions
from guest.tools.fio import FioJob
from measure.counted import CountedRun, host_flushes, run_counted
from measure.disk import GuestDisk
from model.judging.verdict import RuleVerdict
from model.rules.direct_io import (
    REGION_BYTES,
    WRITES,
    Durability,
    LatencyFloor,
    OneForOne,
    judge_direct_io,
    latency_floor,
    write_cache,
    write_sizes,
)
from reports.records import Record
from reports.store.baseline import StoredBaseline
from suites.assertions import judge_rule


def _writes(name: str, bs: int, n: int, **kw: object) -> FioJob:
    return FioJob(name, rw="randwrite", bs_bytes=bs, iodepth=1, io_bytes=bs * n, size_bytes=REGION_BYTES,
                  randseed=1, runtime_s=120, **kw)  # type: ignore[arg-type]


def _latency_floor(run: CountedRun) -> LatencyFloor | None:
    if run.host_trace is None:
        return None
    w = run.fio.jobs[0].write
    return latency_floor(w.clat_percentiles_us, w.clat_mean_us, [r.latency_us for r in run.host_trace.requests
                                                                  if r.is_write])


@pytest.mark.rule("direct-io")
def test_direct_io_fidelity_and_durability(scratch_disk: GuestDisk, suite_options: SuiteOptions,
                                           record: Record, stored_baseline: StoredBaseline | None) -> None:
    disk = scratch_disk
    if not disk.backend.exact_counts:
        pytest.skip(f"the {disk.backend.name} backend's host counters are averages, not request counts: "
                    "one-for-one writes cannot be counted")

    def once(raw: Path) -> RuleVerdict:
        fidelity = []
        latency = None
        sizes = write_sizes(disk.advertised_limits.logical_block_size)  # none below the logical block
        page = sizes[-1]
        for bs in sizes:
            run = run_counted(disk, _writes(f"direct{bs // 1024}k", bs, WRITES), trace=bs == page, raw_dir=raw)
            fidelity.append(OneForOne(bs, run.fio.jobs[0].write.io_count, run.host.writes, run.host.wr_bytes))
            if bs == page:
                latency = _latency_floor(run)
        said = disk.advertised.write_cache if disk.advertised is not None else None
        said_by = disk.advertised.said_by.get("write_cache", "") if disk.advertised is not None else ""
        volatile, cache_source = write_cache(said, said_by, disk.attached.configured.write_cache,
                                             disk.advertised_limits.write_cache, disk.limits.write_cache, disk.limits.fua)
        durability = []
        skipped = None
        if not disk.backend.counts_flushes:
            skipped = f"the {disk.backend.name} backend's host counters do not count flushes"
        else:
            run = run_counted(disk, _writes(f"dsync{page // 1024}k", page, WRITES // 2, sync=True), trace=True, raw_dir=raw)
            durability.append(Durability("O_DSYNC writes", run.fio.jobs[0].write.io_count, host_flushes(run)))
            run = run_counted(disk, _writes(f"fsync{page // 1024}k", page, WRITES // 2, direct=False, ioengine="psync",
                                            fsync_every=1), trace=True, raw_dir=raw)
            durability.append(Durability("fsync after each buffered write", run.fio.jobs[0].sync.io_count,
                                         host_flushes(run)))
        return judge_direct_io(fidelity, durability, volatile, cache_source, latency, skipped)

    # One for one writes and flushes are exact conformance checks: every repeat must pass.
    judge_rule(record, suite_options, once, exact=True, baseline=stored_baseline, disks=(disk,))
