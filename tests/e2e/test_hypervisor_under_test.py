"""The hypervisor under test on real guests: --machine q35, and a bad --emulator or --machine ending the run
before any guest. (A given --emulator running the guest, with the fingerprint every run records, is
tests/e2e/test_qemu_build.py's, on its run of a QEMU build under test.)"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from bench.suite_run import active_vioconform_domains, run_suite_at

BLK = "libvirt:virtio-blk:latency5ms"
SCSI = "libvirt:virtio-scsi:latency5ms"


def test_q35_carries_the_default_controllers(tmp_path: Path) -> None:
    run = run_suite_at(tmp_path / "r", "--controllers", "virtio-scsi,virtio-blk", "--machine", "q35",
                       "-k", "limits or queue_depth")
    assert run.returncode == 0, run.output[-3000:]
    assert run.outcomes() == {f"{rule}[{c}]": "passed" for rule in ("limits", "queue-depth") for c in (SCSI, BLK)}
    assert run.suite_properties()["qemu.machine"].startswith("pc-q35-")


@pytest.mark.parametrize(("args", "said"), [
    (("--emulator", "/usr/bin/true"), "does not say it is QEMU"),
    (("--emulator", "/nonexistent/qemu"), "no such file"),
    (("--machine", "pc-q99"), "has no such machine type; it offers:"),
    (("--machine", "q35", "--controllers", "ide"), "does not exist on q35"),
])
def test_a_bad_emulator_or_machine_ends_the_run_before_any_guest(tmp_path: Path, args: tuple[str, ...],
                                                                 said: str) -> None:
    t0 = time.monotonic()
    run = run_suite_at(tmp_path / "r", "-k", "limits", *args)
    assert run.returncode == 4, run.output[-3000:]
    assert said in run.output and "PASSED" not in run.output
    assert f"vioconform-{run.pid}" not in active_vioconform_domains() and not run.left_behind
    assert time.monotonic() - t0 < 60
