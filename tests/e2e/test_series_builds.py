"""One nightly series on two QEMU builds, on real guests: the host's QEMU, then a "build" that
advertises one command per LUN on virtio-scsi (a wrapper around the host's QEMU adding
``-global virtio-scsi-pci.cmd_per_lun=1``). ``compare --last 2`` follows the series across the
build change, names it first, and finds the queue-depth regression the build brought."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.suite_run import run_suite_at
from tests.e2e.conftest import qemu_wrapper

SCSI = "libvirt:virtio-scsi:latency5ms"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def one_per_lun() -> Iterator[Path]:
    """The build under test. libvirt runs it as the QEMU user, so it lives in a directory that user
    can read (not pytest's root-only tmp_path)."""
    with qemu_wrapper("qemu-one-per-lun", '-global virtio-scsi-pci.cmd_per_lun=1') as w:
        yield w


@pytest.mark.long
def test_one_series_on_two_qemu_builds_compares_with_last_2(one_per_lun: Path, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'nightly.db'}"
    args = ("--controllers", "virtio-scsi", "-k", "queue_depth", "--series", "qemu_nightly", "--store", store)
    first = run_suite_at(tmp_path / "night1", *args)
    assert first.returncode == 0, first.output[-3000:]
    second = run_suite_at(tmp_path / "night2", *args, "--emulator", str(one_per_lun))
    assert second.returncode == 1, second.output[-3000:]
    assert first.suite_properties()["series"] == second.suite_properties()["series"] == "qemu_nightly"
    old = first.suite_properties()["qemu.emulator"]
    done = subprocess.run([sys.executable, "-m", "reports.compare", "--store", store, "--last", "2"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    # the build change first (vioconform's own revision follows it if the checkout changed meanwhile)
    assert lines[0].startswith(f"run 1 -> 2: qemu.emulator {old} -> {one_per_lun}; "), lines[0]
    assert "; unchanged: qemu.version, qemu.machine, qemu.accel, libvirt.version" in lines[0], lines[0]
    assert f"Regressions (passed -> failed): 1\n  queue-depth[{SCSI}]: passed -> failed" in done.stdout
    assert lines[-1] == "1 regression(s)."
