"""write-cache on real guests: the embedded guest on virtio-scsi and virtio-blk passes with the suite's own
cache modes (QEMU's writeback on the null-co disk under test, none on the file-backed scratch disk) and with
``--disk cache=writethrough``; ``--inject wce-lie`` ("write through" in each disk's queue/write_cache over the
host's write-back cache) fails it on both, blamed on the guest's configuration; a QEMU that drops the
guest's flushes nobody asked it to drop (a wrapper around the host's QEMU turns ``no-flush`` on in the
file-backed nodes libvirt opens) fails it, blamed on the hypervisor."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.suite_run import SuiteRun, run_suite_at
from tests.e2e.conftest import qemu_wrapper

SCSI, BLK = "write-cache[libvirt:virtio-scsi:latency5ms]", "write-cache[libvirt:virtio-blk:latency5ms]"
ARGS = ("--controllers", "virtio-scsi,virtio-blk", "-k", "write_cache", "--with-rules", "write-cache", "--store", "none")


@pytest.fixture
def flushes_dropped() -> Iterator[Path]:
    """libvirt opens the scratch disks' file and format nodes with ``"cache":{"direct":true,"no-flush":false}``."""
    with qemu_wrapper("qemu-no-flush", rewrite=(('"no-flush":false', '"no-flush":true'),)) as w:
        yield w


def healthy_figures(healthy: SuiteRun) -> None:
    """The healthy guest passes with the suite's cache modes: checked on the one healthy run of the rules
    outside the default suite (tests/e2e/test_opt_in_healthy.py)."""
    assert {c: o for c, o in healthy.outcomes().items() if c in (SCSI, BLK)} == {SCSI: "passed", BLK: "passed"}, \
        healthy.output[-3000:]
    scsi = SuiteRun.props(healthy.cases()[SCSI])
    assert (scsi["dut_host_cache_mode"], scsi["scratch_host_cache_mode"]) == ("writeback", "none")
    assert scsi["scratch_fsyncs"] == scsi["scratch_flushes_guest"] == scsi["scratch_flushes_host"] == "49", scsi


def test_a_guest_told_write_through_fails(tmp_path: Path) -> None:
    run = run_suite_at(tmp_path / "fault", *ARGS, "--inject", "wce-lie")
    assert run.returncode == 1, run.output[-3000:]
    assert run.outcomes() == {SCSI: "failed", BLK: "failed"}, run.output[-3000:]
    for case in (SCSI, BLK):
        props = SuiteRun.props(run.cases()[case])
        assert props["blame"] == "guest configuration", props
        assert props["dut_guest_write_cache"] == "write through" and props["dut_host_writeback"] == "1", props
        assert props["dut_flushes_guest"] == "0" and props["dut_flushes_host"] == "0", props
        assert "the guest believes write through over a host write-back cache" in SuiteRun.failure_text(run.cases()[case])
    assert run.left_behind == []


def test_writethrough_passes_and_a_host_dropping_flushes_fails(flushes_dropped: Path, tmp_path: Path) -> None:
    through = run_suite_at(tmp_path / "writethrough", *ARGS, "--disk", "cache=writethrough")
    cases = {c.replace(":cache=writethrough]", "]"): o for c, o in through.outcomes().items()}
    assert through.returncode == 0 and cases == {SCSI: "passed", BLK: "passed"}, through.output[-3000:]
    blk = SuiteRun.props(through.cases()[BLK.replace("]", ":cache=writethrough]")])
    assert (blk["dut_guest_write_cache"], blk["dut_host_cache_mode"], blk["dut_flushes_guest"]) == (
        "write through", "writethrough", "0"), blk

    run = run_suite_at(tmp_path / "no-flush", *ARGS, "--emulator", str(flushes_dropped))
    assert run.returncode == 1 and run.outcomes() == {SCSI: "failed", BLK: "failed"}, run.output[-3000:]
    for case in (SCSI, BLK):
        props = SuiteRun.props(run.cases()[case])
        assert props["blame"] == "hypervisor" and props["scratch_host_no_flush"] == "1", props
        assert props["dut_host_no_flush"] == "0", props  # the null-co disk's node has no cache options to rewrite
        assert "the host drops the guest's flushes" in SuiteRun.failure_text(run.cases()[case])
    assert through.left_behind == [] and run.left_behind == []
