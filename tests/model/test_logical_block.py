"""Rules on a disk whose logical block is not 512 bytes (``--disk logical_block_size=4096``, a 4Kn disk):
the guest refuses O_DIRECT below the logical block (EINVAL), so a rule's direct I/O sizes start at it."""

from __future__ import annotations

import pytest

from model.rules.alignment import partition_start
from model.rules.data_integrity import PLAN, plan_for
from model.rules.direct_io import write_sizes
from model.rules.discard import RANGES, ranges_for


@pytest.mark.parametrize(("logical", "sizes"), [(512, (1024, 4096)), (4096, (4096,)), (8192, (8192,))])
def test_direct_io_writes_no_smaller_than_the_logical_block(logical: int, sizes: tuple[int, ...]) -> None:
    assert write_sizes(logical) == sizes


@pytest.mark.parametrize(("misaligned", "logical", "sector"), [(False, 512, 2048), (False, 4096, 256), (True, 512, 63),
                                                                (True, 4096, 63)])
def test_the_alignment_partition_starts_in_the_disks_own_sectors(misaligned: bool, logical: int, sector: int) -> None:
    """fdisk and sfdisk count the disk's logical sectors: 1 MiB is sector 256 of a 4Kn disk, not 2048."""
    assert partition_start(misaligned, logical) == sector


def test_the_discard_ranges_stay_on_the_logical_block() -> None:
    """BLKDISCARD refuses a range off the logical block (EINVAL): the unaligned range moves by whole blocks."""
    assert ranges_for(512) == RANGES
    aligned, unaligned, beyond = ranges_for(4096)
    assert (aligned, beyond) == (RANGES[0], RANGES[2])
    assert unaligned.offset_bytes % 4096 == 0 and unaligned.length_bytes % 4096 == 0
    assert unaligned.offset_bytes % (64 << 10) and unaligned.length_bytes % (64 << 10)  # still off a larger granularity


def test_the_data_integrity_plan_writes_no_direct_block_below_the_logical_block() -> None:
    assert plan_for(512) == PLAN
    plan = plan_for(4096)
    assert [p.generation for p in plan] == [p.generation for p in PLAN]
    assert all(p.bs_bytes >= 4096 for p in plan if p.direct)
    assert [p.name for p in plan] == ["seq128k", "rand4k", "rand1k-as-4k", "buffered64k", "buffered4k"]
    assert len({p.name for p in plan}) == len(plan)  # fio's job names stay unique
