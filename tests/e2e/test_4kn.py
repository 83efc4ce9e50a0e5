"""The rules that make small or unaligned I/O on a 4Kn disk (``--disk logical_block_size=4096``, the embedded
guest on virtio-scsi): direct-io, alignment, discard and data-integrity make none below the disk's logical
block, which the guest refuses with EINVAL, and pass (before: direct-io, alignment and data-integrity ended as
errors, EINVAL and a partition at the wrong sector, and discard failed on its unaligned range)."""

from __future__ import annotations

from tests.e2e.conftest import SuiteRun

RULES = ("alignment", "data-integrity", "direct-io", "discard")


def test_the_rules_that_write_small_blocks_pass_on_a_4kn_disk(run_suite) -> None:  # type: ignore[no-untyped-def]
    run: SuiteRun = run_suite("--controllers", "virtio-scsi", "--disk", "logical_block_size=4096",
                              "-k", "direct_io or alignment or discard or data_integrity")
    assert run.returncode == 0, run.output[-3000:]
    config = "libvirt:virtio-scsi:latency5ms:logical_block_size=4096"
    assert run.outcomes() == {f"{r}[{config}]": "passed" for r in RULES}, run.output[-3000:]
    direct = SuiteRun.props(run.cases()[f"direct-io[{config}]"])
    assert "w4k_guest_writes" in direct and "w1k_guest_writes" not in direct, direct
    integrity = SuiteRun.props(run.cases()[f"data-integrity[{config}]"])
    assert "rand1k-as-4k_writes" in integrity, integrity
    assert run.left_behind == []
