"""The hypervisor under test on real guests: --emulator (a wrapper around the host's QEMU, as a
QEMU build under test would be given), --machine q35, and the fingerprint every run records."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.suite_run import active_vioconform_domains, run_suite_at
from tests.e2e.conftest import qemu_wrapper

BLK = "libvirt:virtio-blk:latency5ms"
SCSI = "libvirt:virtio-scsi:latency5ms"


@pytest.fixture(scope="module")
def wrapper() -> Iterator[Path]:
    """An emulator at a path of its own. libvirt runs it as the QEMU user, so it lives in a
    directory that user can read (not pytest's root-only tmp_path)."""
    with qemu_wrapper("qemu-under-test") as w:
        yield w


def test_a_given_emulator_runs_the_guest_and_the_fingerprint_says_so(wrapper: Path, tmp_path: Path) -> None:
    run = run_suite_at(tmp_path / "r", "--controllers", "virtio-blk", "-k", "limits", "--emulator", str(wrapper))
    assert run.returncode == 0, run.output[-3000:]
    props = run.suite_properties()
    assert props["qemu.emulator"] == str(wrapper)
    assert props["qemu.machine"].startswith("pc-i440fx-")  # "pc" as libvirt resolved it
    assert props["qemu.accel"] in ("kvm", "tcg") and props["qemu.version"][0].isdigit()
    assert props["libvirt.version"].count(".") == 2 and props["libvirt.daemon_version"].count(".") == 2
    assert props["host.kernel"] and props["vioconform_revision"]
    options = json.loads(props["options"])
    assert options["emulator"] == str(wrapper) and options["machine"] == "pc"
    assert f"<td>qemu.emulator</td><td>{wrapper}</td>" in (run.results / "report.html").read_text()


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
