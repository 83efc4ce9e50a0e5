"""One run of the data-integrity rule (suites/test_data_integrity.py), apart from its test function so
that the project's tests drive it against a scripted guest: the guards read, the plan written and
read back in the guest (through the lba-shift target where asked, removed after, also on error),
fio's output kept and read, the host's check and the verdict."""

from __future__ import annotations

import contextlib
import logging
import secrets
from pathlib import Path

from guest.tools.data_integrity import DeviceMapper, IntegrityWrites
from guest.tools.system import PageCache
from hypervisors.base import BackingStore
from measure.disk import GuestDisk
from model.faults import LBA_SHIFT_SECTORS
from model.judging.verdict import RuleVerdict
from model.rules.data_integrity import RULE, SHIFT_TARGET, Region, plan_for, run_verdict

__all__ = ["SHIFT_TARGET", "once"]

log = logging.getLogger("vioconform.data-integrity")


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
    shift = LBA_SHIFT_SECTORS if mapper is not None else 0
    return run_verdict(out.stdout, out.stderr, out.exit_status, target, shift,
                     store.read(region.window_start_bytes, region.window_bytes), guards, region, plan, run_id,
                     store.where, mapping)
