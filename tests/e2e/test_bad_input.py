"""Bad input gets a clear error and leaves nothing behind (real libvirt, real guests)."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.conftest import (
    SuiteRun,
    ctrl_c_once_the_guest_runs,
    left_behind_by,
    start_suite,
)


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


def test_under_xdist_the_checks_run_once_before_any_worker(run_suite) -> None:  # type: ignore[no-untyped-def]
    """fixtures/preflight.py: with -n N the controller checks the hosts before it starts a worker,
    so a bad URI is one usage error, and no worker was started to repeat it."""
    run: SuiteRun = run_suite("--libvirt-uri", "qemu:///nowhere", "--controllers", "virtio-blk,virtio-scsi", "-n", "2")
    assert run.returncode == 4, run.output
    assert run.output.count("cannot connect to libvirt at 'qemu:///nowhere'") == 1, run.output
    assert "workers" not in run.output, run.output  # xdist's "created: 2/2 workers" never came


def test_guest_that_never_reaches_ssh_shows_its_console(run_suite) -> None:  # type: ignore[no-untyped-def]
    run: SuiteRun = run_suite("--boot-timeout", "3", "--controllers", "virtio-blk")
    assert run.returncode == 10, run.output  # harness errors, no rule failed (reports/exitcodes.py)
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
    assert run.returncode == 10, run.output  # harness errors, no rule failed (reports/exitcodes.py)
    assert "--guest-setup command failed on vda" in run.output and "tunable-oops" in run.output
    assert run.left_behind == []


def test_ctrl_c_removes_the_guest_and_its_files(tmp_path: Path) -> None:
    proc = start_suite(tmp_path / "results", "--controllers", "virtio-blk")  # its store: tmp_path/vioconform.db
    out = ctrl_c_once_the_guest_runs(proc)
    assert proc.returncode == 2, out  # pytest's "interrupted"
    assert left_behind_by(proc.pid) == [], out  # its domain, its run directory, its QEMU log
