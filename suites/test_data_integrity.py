"""Rule 8, data integrity: the guest writes a range of the scratch disk in five passes whose every
sector names itself (fio's verify header: its LBA, its pass, checksums), flushes and reads it back
verifying; the host reads the disk's backing file itself and checks every sector: at the LBA it
names, of the last pass that wrote there, whole, and nothing changed around the range.
``--inject lba-shift`` makes the guest write and read through a device-mapper target that starts
a few sectors into the disk."""

from __future__ import annotations

import contextlib
import logging
import secrets
from pathlib import Path

import pytest

from fixtures.options import SuiteOptions
from guest.tools.fio import FioOutput
from guest.tools.integrity import READBACK_JOB, DeviceMapper, IntegrityWrites
from guest.tools.system import PageCache
from hypervisors.base import BackingStore, BackingUnreadable
from measure.disk import GuestDisk
from model.errors import FioError, ParseError
from model.faults import LBA_SHIFT_SECTORS
from model.parse.fio_json import FioResult, fio_messages, parse_fio_json
from model.parse.fio_verify import SECTOR_BYTES, parse_verify_failures
from model.rules.data_integrity import (
    PLAN,
    RULE,
    GuestCheck,
    Region,
    check_backing,
    guest_bad_blocks,
    judge_data_integrity,
)
from model.rules.verdict import RuleVerdict
from reports.baseline import StoredBaseline
from reports.per_test import Record
from suites.assertions import judge_repeated, raw_dir_for
from suites.needs import needed

log = logging.getLogger("vioconform.data-integrity")

#: The device-mapper target lba-shift writes through (the suite's own name; removed after each repeat).
SHIFT_TARGET = "vioc-lba-shift"
#: fio's job error when what it read failed to verify (EILSEQ): the verdict's, not the harness's.
VERIFY_ERROR = 84


def _results(out: FioOutput, target: str) -> tuple[FioResult, dict[str, int]]:
    """fio's results and the writes each pass completed; FioError where a pass failed or fio gave no
    results (the range was not written: nothing to judge). The read-back's verify error is kept for the verdict."""
    said = fio_messages(out.stdout, out.stderr)
    try:
        result = parse_fio_json(out.stdout, f"fio {RULE} on {target}")
    except ParseError as e:
        raise FioError(f"fio {RULE} on {target}: exit status {out.exit_status}, no results ({e}); fio said: "
                       f"{said[-1500:] or '(nothing)'}", out.exit_status, said) from None
    failed = [j for j in result.jobs if j.error and not (j.name == READBACK_JOB and j.error == VERIFY_ERROR)]
    if failed or len(result.jobs) != len(PLAN) + 1:
        jobs = "; ".join(f"job {j.name}: error {j.error}" for j in failed) or f"{len(result.jobs)} jobs"
        raise FioError(f"fio {RULE} on {target} failed ({jobs}); fio said: {said[-1500:] or '(nothing else)'}",
                       out.exit_status, said)
    return result, {j.name: j.write.io_count for j in result.jobs if j.name != READBACK_JOB}


def once(disk: GuestDisk, store: BackingStore, mapper: DeviceMapper | None, raw: Path) -> RuleVerdict:
    """One run: a fresh run id, the guards read before, the plan written and read back in the guest
    (through the shifted target under lba-shift, removed after, also on error), the host's check."""
    region = Region()
    run_id = secrets.randbits(32) | 1
    disk.tool(PageCache).drop()  # nothing of an earlier rule still on its way to the disk
    guards = (store.read(region.window_start_bytes, region.guard_bytes), store.read(region.end_bytes, region.guard_bytes))
    writer = disk.tool(IntegrityWrites)
    target, mapping = disk.device_path, ""
    if mapper is None:
        out = writer.run(target, PLAN, region, run_id)
    else:
        target = mapper.create_linear(SHIFT_TARGET, disk.kernel_name, LBA_SHIFT_SECTORS)
        mapping = (f"device-mapper target {SHIFT_TARGET} ({target}: linear over {disk.device_path} from sector "
                   f"{LBA_SHIFT_SECTORS})")
        try:
            out = writer.run(target, PLAN, region, run_id)
        except BaseException:
            with contextlib.suppress(Exception):  # the error in flight is the one to report
                mapper.remove(SHIFT_TARGET, check=False)
            raise
        mapper.remove(SHIFT_TARGET)
    raw.mkdir(parents=True, exist_ok=True)
    (raw / f"{RULE}-{disk.kernel_name}.fio.json").write_text(out.stdout)
    if out.stderr:
        (raw / f"{RULE}-{disk.kernel_name}.fio.stderr").write_text(out.stderr)
    result, writes = _results(out, target)
    readback = result.job(READBACK_JOB)
    shift = LBA_SHIFT_SECTORS * SECTOR_BYTES if mapper is not None else 0
    guest = GuestCheck(target, readback.read.io_bytes, guest_bad_blocks(parse_verify_failures(out.stderr), shift),
                       failed=readback.error == VERIFY_ERROR)
    host = check_backing(store.read(region.window_start_bytes, region.window_bytes), guards, region, PLAN, run_id,
                         store.where)
    return judge_data_integrity(host, guest, region, PLAN, run_id, writes, mapping)


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
    judge_repeated(record, disk.config_id, raw_dir_for(suite_options.results_dir, disk.config_id) / RULE,
                   suite_options.repeats_for(RULE), lambda raw: once(disk, store, mapper, raw), exact=True,
                   baseline=stored_baseline, disks=(disk,))
