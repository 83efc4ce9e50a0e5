"""The discard rule (docs/rules/discard.md).

On the scratch disk the guest fills a region, then discards known ranges of it with ``blkdiscard``
(aligned, unaligned, larger than its ``discard_max_bytes``); the host's side of each is the device's
unmap counters (QMP) and the backing file's allocation in the range. Then ext4 over the disk's first
64 MiB: a file written, deleted and trimmed (``fstrim``), the host's side the same; the filesystem is
taken off again (unmounted, its superblock zeroed), also when the rule fails or errors. Then, where the disk
advertises it, write-zeroes of a range filled with data (``blkdiscard -z``), read back in the guest,
the host's side its block layer's writes (a trace event). ``--inject discard-off`` sets the guest's
``discard_max_bytes`` to 0 (model/faults.py): the guest then refuses every discard, fstrim's too.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest

from fixtures.options import SuiteOptions
from guest.tools.discard import Discard
from guest.tools.ext4 import Ext4, Fstrim
from guest.tools.sysfs import Sysfs
from guest.tools.tool import ToolMissing
from hypervisors.base import DiscardObserver, DiscardUnavailable
from measure.disk import GuestDisk
from model.judging.verdict import RuleVerdict
from model.parse.backend_writes import writes_in
from model.parse.filesystem import parse_fstrim
from model.rules.discard import (
    FILL_LENGTH_BYTES,
    FILL_OFFSET_BYTES,
    FSTRIM_FILE_BYTES,
    FSTRIM_FS_BYTES,
    MAX_SETTING,
    MOUNT,
    RULE,
    TRIM_FILE,
    ZEROES_RANGE,
    DiscardLimits,
    DiscardRange,
    RangeSeen,
    TrimSeen,
    ZeroesSeen,
    judge_discard,
    ranges_for,
    split_max_bytes,
)
from reports.records import Record
from reports.store.baseline import StoredBaseline
from suites.assertions import judge_rule
from suites.needs import needed


def _seen(disk: GuestDisk, tool: Discard, observer: DiscardObserver, r: DiscardRange, guest_max: int) -> RangeSeen:
    before = observer.allocated_bytes(r.offset_bytes, r.length_bytes)
    counted = observer.unmap()
    done = tool.discard(disk.device_path, r.offset_bytes, r.length_bytes)
    host = observer.unmap().since(counted)
    after = observer.allocated_bytes(r.offset_bytes, r.length_bytes)
    error = "" if done.ok else done.error_line()
    if host.file_operations is None or host.file_bytes is None:  # no file node's count: the device's
        return RangeSeen(r, error, host.operations, host.bytes, host.failed_operations, before, after, guest_max)
    return RangeSeen(r, error, host.file_operations, host.file_bytes, host.file_failed_operations or 0, before, after,
                     guest_max, host.operations, host.bytes)


def _trim(disk: GuestDisk, observer: DiscardObserver, ext4: Ext4, fstrim: Fstrim) -> TrimSeen:
    """ext4 over the disk's first FSTRIM_FS_BYTES (mkfs discarding them first, so that nothing earlier
    rules left there is given back now), a file written and deleted, then fstrim, as both sides saw it.
    The filesystem is taken off afterwards (unmounted, its superblock zeroed), whatever happened."""
    try:
        ext4.make_mounted(disk.device_path, MOUNT, FSTRIM_FS_BYTES, discard=True, written=(TRIM_FILE, FSTRIM_FILE_BYTES))
        before = observer.allocated_bytes(0, FSTRIM_FS_BYTES)
        counted = observer.unmap()
        started = time.monotonic()
        done = fstrim.trim(MOUNT)
        seconds = time.monotonic() - started
        host = observer.unmap().since(counted)
        after = observer.allocated_bytes(0, FSTRIM_FS_BYTES)
    finally:
        ext4.take_off(disk.device_path, MOUNT)
    error = "" if done.ok else done.error_line(stdout_too=True)
    said = parse_fstrim(done.stdout) if done.ok else None
    if host.file_operations is None or host.file_bytes is None:  # no file node's count: the device's
        return TrimSeen(FSTRIM_FS_BYTES, FSTRIM_FILE_BYTES, error, said, host.operations, host.bytes,
                        host.failed_operations, before, after, seconds)
    return TrimSeen(FSTRIM_FS_BYTES, FSTRIM_FILE_BYTES, error, said, host.file_operations, host.file_bytes,
                    host.file_failed_operations or 0, before, after, seconds, host.operations, host.bytes)


def _zeroes(disk: GuestDisk, tool: Discard, observer: DiscardObserver) -> ZeroesSeen:
    """Write-zeroes of ZEROES_RANGE, filled with data first, where the disk advertises it: the guest's
    answer and read-back, the host block layer's writes in the range over it and the device's write counters."""
    r = ZEROES_RANGE
    most = tool.prepare_zeroes(disk.kernel_name, disk.device_path, r.offset_bytes, r.length_bytes)
    if most == 0:
        return ZeroesSeen(r, 0)
    trace = observer.write_trace()
    written = observer.written_bytes()
    if trace is not None:
        trace.start()
    try:
        done = tool.zero(disk.device_path, r.offset_bytes, r.length_bytes)
    except BaseException:
        if trace is not None:
            trace.abort()
        raise
    writes = trace.stop() if trace is not None else None
    device = observer.written_bytes() - written
    if done.unable:
        return ZeroesSeen(r, most, unable=f"the guest cannot ask for it: {done.unable}")
    if writes is None:
        return ZeroesSeen(r, most, "", done.error, done.nonzero_bytes, device_write_bytes=device)
    seen = writes_in(writes, r.offset_bytes, r.length_bytes)
    return ZeroesSeen(r, most, "", done.error, done.nonzero_bytes, seen.zero_requests, seen.zero_bytes,
                      seen.data_bytes, device)


@pytest.mark.rule("discard")
def test_discard(scratch_disk: GuestDisk, suite_options: SuiteOptions, record: Record,
                 stored_baseline: StoredBaseline | None) -> None:
    disk = scratch_disk
    try:
        observer = disk.backend.discard_observer(disk.guest, disk.attached)
    except DiscardUnavailable as e:
        pytest.skip(f"{RULE} cannot run on {disk.config_id}: {e}")
    tool = needed(disk, Discard, RULE)
    sysfs = disk.tool(Sysfs)
    try:
        ext4, fstrim = disk.tool(Ext4), disk.tool(Fstrim)
        no_trim = ""
    except ToolMissing as e:
        no_trim = f"fstrim on a filesystem not checked: {e}"

    def once(_raw: Path) -> RuleVerdict:
        limits: DiscardLimits = tool.limits(disk.kernel_name, fill=(disk.device_path, FILL_OFFSET_BYTES,
                                                                    FILL_LENGTH_BYTES))
        seen = []
        notes = [no_trim] if no_trim else []
        for r in ranges_for(disk.advertised_limits.logical_block_size):
            lowered = split_max_bytes(limits) if r.name == "beyond_max" else None
            if lowered is None:
                seen.append(_seen(disk, tool, observer, r, limits.max_bytes))
                continue
            # set back also when the discard fails or errors; Linux 6.12 refuses the value it showed on
            # virtio-blk, and takes the next multiple of the granularity instead (docs/rules/discard.md)
            with sysfs.changed(disk.kernel_name, MAX_SETTING, str(lowered)) as restored:
                seen.append(_seen(disk, tool, observer, r, lowered))
            notes.extend(n for n in (x.note() for x in restored) if n)
        trim = None if no_trim else _trim(disk, observer, ext4, fstrim)
        verdict = judge_discard(limits, seen, observer.where, disk.kernel_name, trim, _zeroes(disk, tool, observer))
        return dataclasses.replace(verdict, notes=(*verdict.notes, *notes)) if notes else verdict

    # Every byte discarded is counted exactly: every repeat must pass.
    judge_rule(record, suite_options, once, exact=True, baseline=stored_baseline, disks=(disk,))
