"""Rule 8, data integrity: the guest writes a range of the scratch disk in five passes whose every
sector names itself (fio's verify header: its LBA, its pass, checksums), flushes and reads it back
verifying; the host reads the disk's backing file itself and checks every sector: at the LBA it
names, of the last pass that wrote there, whole, and nothing changed around the range.
``--inject lba-shift`` makes the guest write and read through a device-mapper target that starts
a few sectors into the disk (suites/data_integrity.py runs each repeat)."""

from __future__ import annotations

import pytest

from fixtures.options import SuiteOptions
from guest.tools.data_integrity import DeviceMapper
from hypervisors.base import BackingUnreadable
from measure.disk import GuestDisk
from model.rules.data_integrity import RULE
from reports.records import Record
from reports.store.baseline import StoredBaseline
from suites.assertions import judge_rule
from suites.data_integrity import once
from suites.needs import needed


@pytest.mark.rule("data-integrity")
def test_data_integrity(scratch_disk: GuestDisk, suite_options: SuiteOptions, record: Record,
                        stored_baseline: StoredBaseline | None) -> None:
    disk = scratch_disk
    try:
        store = disk.backend.backing_store(disk.guest, disk.attached)
    except BackingUnreadable as e:
        pytest.skip(f"{RULE} cannot run on {disk.config_id}: the host must read back what the guest wrote, and {e}")
    mapper = None
    if "lba-shift" in suite_options.inject:
        mapper = needed(disk, DeviceMapper, f"{RULE} with --inject lba-shift")
        missing = mapper.missing_module()
        if missing:
            pytest.skip(f"{RULE} with --inject lba-shift cannot run on this guest: {missing}")
    # A bad sector is an exact finding: every repeat must pass.
    judge_rule(record, suite_options, lambda raw: once(disk, store, mapper, raw), exact=True,
               baseline=stored_baseline, disks=(disk,))
