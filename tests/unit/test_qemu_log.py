"""QEMU's logs under /var/log/libvirt/qemu: the one-line cause of a failed start, kept with the
run's results when the domain goes, and swept when their owner was killed (recorded real logs)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from hypervisors.libvirt.qemulog import keep_log, last_start, qemu_cause, sweep_logs

DATA = Path(__file__).resolve().parents[1] / "data"
MSR_CAUSE = "failed to set MSR 0x10a to 0x69; kvm_buf_set_msrs: Assertion `ret == cpu->kvm_msr_buf->nmsrs' failed."


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_cause_of_a_kvm_guest_that_qemu_aborted() -> None:
    # the KVM probe's log on this host (nested KVM), and libvirt's error for the session guest
    assert qemu_cause((DATA / "qemu-log-kvm-msr-assert.log").read_text()) == MSR_CAUSE
    assert qemu_cause((DATA / "libvirt-error-kvm-msr-assert.txt").read_text()) == MSR_CAUSE


def test_only_the_latest_start_of_a_name_is_read() -> None:
    """A retried start keeps its name: the earlier start's cause (the aborted KVM probe's, recorded)
    is above libvirtd's next "starting up" line and is not the later start's."""
    earlier = (DATA / "qemu-log-kvm-msr-assert.log").read_text()
    later = (DATA / "qemu-log-destroyed.log").read_text()
    assert qemu_cause(last_start(earlier + later)) is None and last_start(earlier + later) == later
    assert qemu_cause(last_start(later + earlier)) == MSR_CAUSE
    assert last_start("no header at all\n") == "no header at all\n"


def test_a_destroyed_guest_has_no_cause() -> None:
    # "terminating on signal 15 from pid ... (libvirtd)" is the suite's own destroy, not a cause
    assert qemu_cause((DATA / "qemu-log-destroyed.log").read_text()) is None


def test_keep_log_moves_the_log_into_the_run_directory(tmp_path: Path) -> None:
    logs, run_dir = tmp_path / "qemu", tmp_path / "run"
    logs.mkdir()
    run_dir.mkdir()
    (logs / "vioconform-42.log").write_text("QEMU said this")
    keep_log("vioconform-42", run_dir, logs)
    assert not (logs / "vioconform-42.log").exists()
    assert (run_dir / "vioconform-42.qemu.log").read_text() == "QEMU said this"
    (logs / "vioconform-43.log").write_text("x")
    keep_log("vioconform-43", None, logs)  # no run directory: removed all the same
    keep_log("vioconform-44", run_dir, logs)  # never written: nothing to do
    assert list(logs.iterdir()) == []


def test_sweep_removes_only_logs_of_dead_owners(tmp_path: Path) -> None:
    dead, alive = _dead_pid(), os.getpid()
    names = [f"vioconform-{dead}.log", f"vioconform-kvmprobe-{dead}.log", f"vioconform-{alive}.log",
             f"vioconform-kvmprobe-{alive}.log", f"vioconform-ctl-{dead}.log", "vioconform-bench-1763900000.log",
             "vioconform-gaprobe.log", f"other-{dead}.log", f"vioconform-{dead}.log.1"]
    for n in names:
        (tmp_path / n).write_text("log")
    swept = sweep_logs(tmp_path)
    assert sorted(p.name for p in swept) == sorted([f"vioconform-{dead}.log", f"vioconform-kvmprobe-{dead}.log"])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names[2:])


def test_sweep_keeps_the_log_of_a_domain_still_running(tmp_path: Path) -> None:
    """Another machine's run on a shared libvirt host: its domain's pid is no process here, and its
    domain runs (``leftovers.sweep_domains`` leaves it and names it): its log stays."""
    dead = _dead_pid()
    for n in (f"vioconform-{dead}.log", f"vioconform-{dead}-1.log"):
        (tmp_path / n).write_text("log")
    swept = sweep_logs(tmp_path, running={f"vioconform-{dead}-1"})
    assert [p.name for p in swept] == [f"vioconform-{dead}.log"]
    assert [p.name for p in tmp_path.iterdir()] == [f"vioconform-{dead}-1.log"]
