"""write-cache (docs/rules/write-cache.md): on each disk of a controller, buffered 4 KiB writes each
followed by an fsync, counted whole on both sides (fio's fsyncs, the guest's flushes in /proc/diskstats,
the host's flush counter or trace); then the guest's ``queue/write_cache`` and ``queue/fua`` against the
host's cache as its block layer has it (QEMU: ``query-block``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures.options import SuiteOptions
from guest.tools.diskstats import ProcDiskStats
from guest.tools.fio import FioJob
from hypervisors.base import HostCacheUnavailable
from measure.counted import host_flushes, run_counted
from measure.disk import GuestDisk
from model.judging.verdict import RuleVerdict
from model.rules.write_cache import REGION_BYTES, WRITES, DiskCache, Flushes, GuestCache, judge_write_cache
from reports.records import Record
from reports.store.baseline import StoredBaseline
from suites.assertions import judge_rule

#: The rule's workload (model/rules/write_cache.py's WRITES, REGION_BYTES).
FSYNC_JOB = FioJob("fsync4k", rw="randwrite", bs_bytes=4096, iodepth=1, io_bytes=4096 * WRITES, size_bytes=REGION_BYTES,
                   randseed=1, runtime_s=120, direct=False, ioengine="psync", fsync_every=1)


def _evidence(d: GuestDisk, raw: Path) -> DiskCache:
    """One disk's fsync run counted on both sides, and both sides' cache after it."""
    stats = d.tool(ProcDiskStats)
    before = stats.snapshot().of(d.kernel_name)
    run = run_counted(d, FSYNC_JOB, trace=True, raw_dir=raw)
    after = stats.snapshot().of(d.kernel_name)
    now = d.read_limits()
    host = d.backend.host_cache(d.guest, d.attached)
    guest_flushes = None if after.flushes_completed is None or before.flushes_completed is None else \
        after.flushes_completed - before.flushes_completed
    (raw / f"{d.attached.spec.role}-{d.kernel_name}-write-cache.txt").write_text(
        f"/proc/diskstats before: {before}\n/proc/diskstats after: {after}\nhost: {host.text()} ({host.said_by})\n"
        f"host flushes: counter {run.host.flushes}, traced "
        f"{sum(r.is_flush for r in run.host_trace.requests) if run.host_trace is not None else 'not traced'}\n")
    return DiskCache(d.attached.spec.role, GuestCache(d.kernel_name, d.advertised_limits.write_cache, now.write_cache,
                                                      now.fua),
                     host, Flushes(run.fio.jobs[0].sync.io_count, guest_flushes, host_flushes(run)),
                     d.attached.spec.settings.cache)


@pytest.mark.rule("write-cache")
def test_write_cache(disk: GuestDisk, scratch_disk: GuestDisk, suite_options: SuiteOptions,
                     record: Record, stored_baseline: StoredBaseline | None) -> None:
    try:
        disk.backend.host_cache(disk.guest, disk.attached)
    except HostCacheUnavailable as e:
        pytest.skip(f"write-cache: {e}")
    if not disk.backend.counts_flushes:
        pytest.skip(f"write-cache: the {disk.backend.name} backend's host counters do not count flushes")

    def once(raw: Path) -> RuleVerdict:
        raw.mkdir(parents=True, exist_ok=True)
        return judge_write_cache([_evidence(d, raw) for d in (disk, scratch_disk)])

    # Flushes are counted exactly: every repeat must pass.
    judge_rule(record, suite_options, once, exact=True, baseline=stored_baseline, disks=(disk, scratch_disk))
