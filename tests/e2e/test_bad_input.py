"""Bad input gets a clear error and leaves nothing behind (real libvirt, real guests)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.e2e.conftest import ROOT, SuiteRun, active_vioconform_domains


def test_unknown_controller_is_a_usage_error(run_suite) -> None:  # type: ignore[no-untyped-def]
    run: SuiteRun = run_suite("--controllers", "virtio-scsi,floppy")
    assert run.returncode == 4, run.output
    assert "unknown controller(s) floppy" in run.output and "virtio-blk" in run.output


def test_unknown_fault_and_bad_depths_are_usage_errors(run_suite) -> None:  # type: ignore[no-untyped-def]
    run: SuiteRun = run_suite("--inject", "gremlins")
    assert run.returncode == 4 and "unknown fault 'gremlins'" in run.output, run.output
    run = run_suite("--depths", "0,32")
    assert run.returncode == 4 and "--depths needs depths of 1 or more" in run.output, run.output


def test_bad_baseline_files_are_usage_errors_and_nothing_is_overwritten(run_suite, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    run: SuiteRun = run_suite("--baseline", str(bad))
    assert run.returncode == 4 and f"--baseline: baseline {bad}: not JSON" in run.output, run.output
    notes = tmp_path / "notes.txt"
    notes.write_text("my precious notes")
    run = run_suite("--save-baseline", str(notes))
    assert run.returncode == 4 and "exists and is not a baseline; refusing to overwrite it" in run.output, run.output
    assert notes.read_text() == "my precious notes"
    run = run_suite("--save-baseline", str(tmp_path / "no" / "such" / "dir.json"))
    assert run.returncode == 4 and "does not exist" in run.output, run.output


def test_unreachable_libvirt_uri(run_suite) -> None:  # type: ignore[no-untyped-def]
    run: SuiteRun = run_suite("--libvirt-uri", "qemu:///nowhere", "--controllers", "virtio-blk")
    assert run.returncode == 4, run.output  # known before any guest starts: a usage error
    assert "cannot connect to libvirt at 'qemu:///nowhere'" in run.output


def test_guest_that_never_reaches_ssh_shows_its_console(run_suite) -> None:  # type: ignore[no-untyped-def]
    run: SuiteRun = run_suite("--boot-timeout", "3", "--controllers", "virtio-blk")
    assert run.returncode == 1, run.output
    cause = f"guest vioconform-{run.pid} did not reach VIOCONFORM-READY within 3 s"
    assert run.reports.count(f"vioconform set-up failed: {cause}") == 1, run.output
    assert run.reports.count("--- guest console (last lines) ---") == 1, run.output  # shown once, not per test
    assert run.output.count(f"not run: {cause}") >= 6, run.output
    assert "Traceback" not in run.output, run.output
    assert (run.results / "logs" / f"vioconform-{run.pid}.qemu.log").exists()
    assert run.left_behind == []


def test_failing_guest_setup(run_suite) -> None:  # type: ignore[no-untyped-def]
    """(A guest whose fio is removed gets the suite's static one: tests/e2e/test_fio_push.py.)"""
    run: SuiteRun = run_suite("--controllers", "virtio-blk", "--guest-setup", "echo tunable-oops; exit 3")
    assert run.returncode == 1, run.output
    assert "--guest-setup command failed on vda" in run.output and "tunable-oops" in run.output
    assert run.left_behind == []


def test_ctrl_c_removes_the_guest_and_its_files(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "suites", "-p", "no:cacheprovider",
                             "--controllers", "virtio-blk", "--results-dir", str(tmp_path)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    name = f"vioconform-{proc.pid}"
    deadline = time.monotonic() + 60
    while name not in active_vioconform_domains():
        assert time.monotonic() < deadline and proc.poll() is None, "guest never started"
        time.sleep(0.2)
    run_dirs = set(Path("/tmp").glob("vioconform-run-*"))
    assert run_dirs
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 2, out  # pytest's "interrupted"
    assert name not in active_vioconform_domains(), out
    mine = [d for d in run_dirs if d.exists() and str(os.getpid()) not in d.name]
    assert not any((d / f"{name}.xml").exists() for d in mine), out
