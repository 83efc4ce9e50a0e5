"""block-size on real guests: the embedded guest on virtio-scsi and virtio-blk sees the block sizes
configured and refuses O_DIRECT reads below the logical block, with 512-byte logical blocks (512/512 on
the disk under test, 512e on the scratch disk: 512/4096) and with 4Kn (``--disk logical_block_size=4096``);
a QEMU that gives the disk under test a 4096-byte physical block where 512 was configured (a wrapper
around the host's QEMU rewrites the device property, which the suite never sees) fails it, blamed on the
hypervisor. The 4Kn run also runs the rules that make small or unaligned I/O on virtio-scsi: they pass on
a 4Kn disk (one boot of the 4Kn configuration for both proofs)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.suite_run import SuiteRun, run_suite_at
from tests.e2e.conftest import qemu_wrapper

ARGS = ("--controllers", "virtio-scsi,virtio-blk", "-k", "test_block_size", "--with-rules", "block-size")
SCSI, BLK = "block-size[libvirt:virtio-scsi:latency5ms", "block-size[libvirt:virtio-blk:latency5ms"


@pytest.fixture
def physical_4096() -> Iterator[Path]:
    """The disk under test's ``physical_block_size`` as the suite's JSON -device gives it, made 4096."""
    with qemu_wrapper("qemu-physical-4096", rewrite=(('"physical_block_size": 512', '"physical_block_size": 4096'),)) as w:
        yield w


def passes_with(run: SuiteRun, logical_block_size: str) -> None:
    """block-size passed on both controllers, and the disk under test showed ``logical_block_size``."""
    mine = {n: o for n, o in run.outcomes().items() if n.startswith((SCSI, BLK))}
    assert sorted(mine.values()) == ["passed", "passed"], run.output[-3000:]
    props = SuiteRun.props(next(c for n, c in run.cases().items() if n.startswith(SCSI)))
    assert props["dut_logical_block_size_guest"] == logical_block_size
    assert props["scratch_physical_block_size_guest"] == "4096"
    assert props["dut_direct_short"] == "EINVAL: Invalid argument" and props["dut_direct_aligned"] == "read"


def healthy_figures(healthy: SuiteRun) -> None:
    """512-byte sectors pass: checked on the one healthy run of the rules outside the default suite
    (tests/e2e/test_opt_in_healthy.py)."""
    passes_with(healthy, "512")


#: The rules that make small or unaligned I/O, on the 4Kn disk of virtio-scsi.
SMALL_BLOCKS = ("alignment", "data-integrity", "direct-io", "discard")
#: The 4Kn run: block-size on both controllers, and the rules of SMALL_BLOCKS on virtio-scsi.
ON_4KN = ("--controllers", "virtio-scsi,virtio-blk", "--with-rules", "block-size", "--disk", "logical_block_size=4096",
          "-k", "test_block_size or ((direct_io or alignment or discard or data_integrity) and virtio-scsi)")


def small_blocks_pass_on_4kn(run: SuiteRun) -> None:
    """direct-io, alignment, discard and data-integrity make no I/O below the disk's logical block, which the
    guest refuses with EINVAL, and pass (before: direct-io, alignment and data-integrity ended as errors,
    EINVAL and a partition at the wrong sector, and discard failed on its unaligned range)."""
    config = "libvirt:virtio-scsi:latency5ms:logical_block_size=4096"
    mine = {n: o for n, o in run.outcomes().items() if n.split("[", 1)[0] in SMALL_BLOCKS}
    assert mine == {f"{r}[{config}]": "passed" for r in SMALL_BLOCKS}, run.output[-3000:]
    direct = SuiteRun.props(run.cases()[f"direct-io[{config}]"])
    assert "w4k_guest_writes" in direct and "w1k_guest_writes" not in direct, direct
    integrity = SuiteRun.props(run.cases()[f"data-integrity[{config}]"])
    assert "rand1k-as-4k_writes" in integrity, integrity


def test_4kn_passes_and_a_device_advertising_another_physical_block_fails(physical_4096: Path,
                                                                          tmp_path: Path) -> None:
    run = run_suite_at(tmp_path / "4Kn", *ON_4KN)
    assert run.returncode == 0, run.output[-3000:]
    passes_with(run, "4096")
    small_blocks_pass_on_4kn(run)
    assert run.left_behind == []

    run = run_suite_at(tmp_path / "fault", *ARGS, "--emulator", str(physical_4096))
    assert run.returncode == 1, run.output[-3000:]
    cases = run.cases()
    for prefix in (SCSI, BLK):
        case = next(c for n, c in cases.items() if n.startswith(prefix))
        props = SuiteRun.props(case)
        assert props["blame"] == "hypervisor", SuiteRun.failure_text(case)
        assert props["dut_physical_block_size_advertised"] == "4096" and props["dut_physical_block_size_guest"] == "4096"
        assert "physical block size: the suite asked for 512, the device advertises 4096" in SuiteRun.failure_text(case)
    assert run.left_behind == []
