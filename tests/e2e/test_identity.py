"""identity on real guests: the embedded guest on virtio-scsi and virtio-blk sees every disk's serial,
WWN and size as configured; a QEMU that gives the disk under test another WWN (virtio-scsi) or a
serial longer than virtio-blk's 20 bytes (a wrapper around the host's QEMU rewrites the device
property, which the suite never sees) fails it, blamed on the hypervisor, the cut serial named as
truncation."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.suite_run import SuiteRun, run_suite_at
from tests.e2e.conftest import qemu_wrapper

SCSI, BLK = "identity[libvirt:virtio-scsi:latency5ms]", "identity[libvirt:virtio-blk:latency5ms]"
#: The suite's WWN of the virtio-scsi disk under test (0x5000c50015ea7100, as QEMU's JSON -device takes it)
#: and the one the wrapper gives it instead (0x5000c50015ea71ff).
SUITE_WWN, OTHER_WWN = "5764824127192592640", "5764824127192592895"
#: The virtio-blk disk under test (the third disk of the guest) and the 24-byte serial the wrapper gives it.
BLK_SERIAL, LONG_SERIAL = "vioc-dut2", "vioc-dut2-cut-by-the-bus"


@pytest.fixture
def other_identity() -> Iterator[Path]:
    with qemu_wrapper("qemu-other-identity", rewrite=((SUITE_WWN, OTHER_WWN),
                                                      (f'"{BLK_SERIAL}"', f'"{LONG_SERIAL}"'))) as w:
        yield w


def healthy_figures(healthy: SuiteRun) -> None:
    """The healthy guest passes: checked on the one healthy run of the rules outside the default suite
    (tests/e2e/test_opt_in_healthy.py)."""
    assert {c: o for c, o in healthy.outcomes().items() if c in (SCSI, BLK)} == {SCSI: "passed", BLK: "passed"}, \
        healthy.output[-3000:]
    assert SuiteRun.props(healthy.cases()[SCSI])["dut_wwn_guest"] == "5000c50015ea7100"


def test_another_identity_from_the_host_fails(other_identity: Path, tmp_path: Path) -> None:
    args = ("--controllers", "virtio-scsi,virtio-blk", "-k", "identity", "--with-rules", "identity")
    run = run_suite_at(tmp_path / "fault", *args, "--emulator", str(other_identity))
    assert run.returncode == 1, run.output[-3000:]
    assert run.outcomes() == {SCSI: "failed", BLK: "failed"}, run.output[-3000:]
    scsi, blk = SuiteRun.props(run.cases()[SCSI]), SuiteRun.props(run.cases()[BLK])
    assert scsi["blame"] == "hypervisor" and blk["blame"] == "hypervisor", (scsi, blk)
    assert scsi["dut_wwn_guest"] == "5000c50015ea71ff" and scsi["dut_wwn_configured"] == "5000c50015ea7100"
    assert "WWN: the suite configured '5000c50015ea7100', the device has '5000c50015ea71ff'" in \
        SuiteRun.failure_text(run.cases()[SCSI])
    assert blk["dut_serial_guest"] == "vioc-dut2-cut-by-the" and blk["dut_serial_device"] == LONG_SERIAL
    assert "truncated to 20 bytes, what virtio-blk carries of a serial" in SuiteRun.failure_text(run.cases()[BLK])
    assert run.left_behind == []
