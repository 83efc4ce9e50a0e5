"""block-size (docs/rules/block-size.md): the logical and physical block sizes the guest saw of each
disk of a controller when it probed it, against what the suite asked for and what the device
advertises; and three O_DIRECT reads per disk (one fio run, a job each) (one logical block at 0, half a block at 0, one block
at half a block), of which the guest must refuse the two below the logical block with EINVAL."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures.options import SuiteOptions
from guest.tools.direct_reads import DirectReads
from measure.disk import GuestDisk
from model.judging.verdict import RuleVerdict
from model.rules.block_size import judge_block_size, probes_for, probes_from_fio
from reports.records import Record
from reports.store.baseline import StoredBaseline
from suites.assertions import judge_rule


def _uncarried(d: GuestDisk) -> str | None:
    """Why the disk's device cannot carry the physical block size asked of it, or None."""
    cfg, adv = d.attached.configured, d.advertised
    if adv is None or cfg.physical_block_bytes == cfg.logical_block_bytes:
        return None
    why = adv.unsaid.get("physical_block_bytes")
    return None if why is None else (f"block-size: {d.label} cannot carry a physical block size of "
                                     f"{cfg.physical_block_bytes} on its {cfg.logical_block_bytes}-byte logical "
                                     f"blocks: {why}")


@pytest.mark.rule("block-size")
def test_block_size(disk: GuestDisk, scratch_disk: GuestDisk, suite_options: SuiteOptions,
                    record: Record, stored_baseline: StoredBaseline | None) -> None:
    for d in (disk, scratch_disk):
        reason = _uncarried(d)
        if reason:
            pytest.skip(reason)

    def once(raw: Path) -> RuleVerdict:
        raw.mkdir(parents=True, exist_ok=True)
        disks = []
        for d in (disk, scratch_disk):
            probed = d.advertised_limits
            reads = probes_for(probed.logical_block_size)
            out = d.tool(DirectReads).read(d.device_path, reads)
            (raw / f"{d.attached.spec.role}-{d.kernel_name}-direct-reads.json").write_text(out.stdout)
            probes = probes_from_fio(out.stdout, reads, f"fio's direct reads of {d.label}")
            disks.append((d.attached.spec.role, d.attached.configured, probed, d.advertised, probes))
        return judge_block_size(disks)

    judge_rule(record, suite_options, once, exact=True, baseline=stored_baseline, disks=(disk, scratch_disk))
