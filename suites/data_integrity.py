"""One run of the data-integrity rule (suites/test_data_integrity.py), apart from its test function so
that the project's tests drive it against a scripted guest: the guards read, the plan written and
read back in the guest (through the lba-shift target where asked, removed after, also on error),
fio's output kept and read, the host's check and the verdict."""

from __future__ import annotations

import contextlib
import logging
import secrets
from pathlib import Path

from guest.tools.data_integrity import READBACK_JOB, DeviceMapper, IntegrityWrites
from guest.tools.fio import FioOutput
from guest.tools.system import PageCache
from hypervisors.base import BackingStore
from measure.disk import GuestDisk
from model.errors import FioError, ParseError
from model.faults import LBA_SHIFT_SECTORS
from model.judging.verdict import RuleVerdict
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
    plan_for,
)

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
    plan = plan_for(disk.advertised_limits.logical_block_size)  # no O_DIRECT write below the logical block
    run_id = secrets.randbits(32) | 1
    disk.tool(PageCache).drop()  # nothing of an earlier rule still on its way to the disk
    guards = (store.read(region.window_start_bytes, region.guard_bytes), store.read(region.end_bytes, region.guard_bytes))
    writer = disk.tool(IntegrityWrites)
    target, mapping = disk.device_path, ""
    log.info("%s (%s): %s run %08x: %d passes over %s, then read back; the host reads %s", disk.config_id,
             disk.kernel_name, RULE, run_id, len(plan), region.describe(), store.where)
    if mapper is None:
        out = writer.run(target, plan, region, run_id)
    else:
        target = mapper.create_linear(SHIFT_TARGET, disk.kernel_name, LBA_SHIFT_SECTORS)
        mapping = (f"device-mapper target {SHIFT_TARGET} ({target}: linear over {disk.device_path} from sector "
                   f"{LBA_SHIFT_SECTORS})")
        try:
            out = writer.run(target, plan, region, run_id)
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
    host = check_backing(store.read(region.window_start_bytes, region.window_bytes), guards, region, plan, run_id,
                         store.where)
    return judge_data_integrity(host, guest, region, plan, run_id, writes, mapping)
