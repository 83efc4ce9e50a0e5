"""The discard rule (docs/rules/discard.md).

On the scratch disk the guest fills a region, then discards known ranges of it with ``blkdiscard``
(aligned, unaligned, larger than its ``discard_max_bytes``); the host's side of each is the device's
unmap counters (QMP) and the backing file's allocation in the range. ``--inject discard-off`` sets the
guest's ``discard_max_bytes`` to 0 (model/faults.py): the guest then refuses every discard.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures.options import SuiteOptions
from guest.tools.discard import Discard
from guest.tools.sysfs import Sysfs
from hypervisors.base import DiscardObserver, DiscardUnavailable
from measure.disk import GuestDisk
from model.rules.discard import (
    FILL_LENGTH_BYTES,
    FILL_OFFSET_BYTES,
    RANGES,
    RULE,
    DiscardLimits,
    DiscardRange,
    RangeSeen,
    judge_discard,
    split_max_bytes,
)
from model.rules.verdict import RuleVerdict
from reports.baseline import StoredBaseline
from reports.per_test import Record
from suites.assertions import judge_repeated, raw_dir_for
from suites.needs import needed

#: The guest's setting the beyond_max range lowers for a while (and sets back).
MAX_SETTING = "queue/discard_max_bytes"


def _seen(disk: GuestDisk, tool: Discard, observer: DiscardObserver, r: DiscardRange, guest_max: int) -> RangeSeen:
    before = observer.allocated_bytes(r.offset_bytes, r.length_bytes)
    counted = observer.unmap()
    done = tool.discard(disk.device_path, r.offset_bytes, r.length_bytes)
    host = observer.unmap().since(counted)
    after = observer.allocated_bytes(r.offset_bytes, r.length_bytes)
    error = "" if done.ok else ((done.stderr.strip().splitlines() or [f"exit {done.exit_status}"])[-1])
    if host.file_operations is None or host.file_bytes is None:  # no file node's count: the device's
        return RangeSeen(r, error, host.operations, host.bytes, host.failed_operations, before, after, guest_max)
    return RangeSeen(r, error, host.file_operations, host.file_bytes, host.file_failed_operations or 0, before, after,
                     guest_max, host.operations, host.bytes)


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

    def once(_raw: Path) -> RuleVerdict:
        limits: DiscardLimits = tool.limits(disk.kernel_name)
        tool.fill(disk.device_path, FILL_OFFSET_BYTES, FILL_LENGTH_BYTES)
        seen = []
        for r in RANGES:
            lowered = split_max_bytes(limits) if r.name == "beyond_max" else None
            if lowered is None:
                seen.append(_seen(disk, tool, observer, r, limits.max_bytes))
                continue
            sysfs.write(disk.kernel_name, MAX_SETTING, str(lowered))
            try:
                seen.append(_seen(disk, tool, observer, r, lowered))
            finally:
                sysfs.write(disk.kernel_name, MAX_SETTING, str(limits.max_bytes))
        return judge_discard(limits, seen, observer.where, disk.kernel_name)

    # Every byte discarded is counted exactly: every repeat must pass.
    judge_repeated(record, disk.config_id, raw_dir_for(suite_options.results_dir, disk.config_id) / RULE,
                   suite_options.repeats_for(RULE), once, exact=True, baseline=stored_baseline, disks=(disk,))
