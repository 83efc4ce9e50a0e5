"""A remote libvirt host, for real: ``--libvirt-uri qemu+ssh://root@127.0.0.1:PORT/system`` through
a private sshd on loopback with its own host key (tests/sshserver.py). libvirt's own connection and
the suite's (staging over SFTP, the guest's SSH through a direct-tcpip tunnel, the console and the
exact-trace log read back) both go through that sshd and check its key.

The "remote" host is this machine, so the tests make sure the remote path does not quietly use
local files: the staging directory (``--host-dir``) is one the local path never uses, the guest's
files must appear there and not in the local run directory, and everything must be gone from both
at the end, also after a SIGKILL.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from guest.image.testimage import ensure_test_image
from guest.tools.fio import Fio, FioJob
from guest.tools.system import WorkDir
from hypervisors.cleanup import OWNER_FILE, RUN_DIR_PREFIX
from hypervisors.libvirt import backend as backend_module
from hypervisors.libvirt.qemulog import log_path
from measure.standalone import standalone_guest
from model.errors import HypervisorError
from model.histogram import HistogramKind
from model.types import DiskSpec
from model.vscsistats import parse_vscsistats_csv
from tests.e2e.conftest import ROOT, Apart, active_vioconform_domains, run_dirs_of, start_suite
from tests.e2e.test_image_boot import PATIENT, fingerprint
from tests.e2e.test_setup_errors import assert_usage_error, run_timed
from tests.sshserver import SshServer, private_sshd, write_known_hosts, write_ssh_wrapper


@pytest.fixture(scope="module")
def sshd() -> Iterator[SshServer]:
    with private_sshd() as server:
        yield server


@pytest.fixture
def host_dir() -> Iterator[Path]:
    """A staging directory the local path never uses, where QEMU's user can reach it (pytest's
    tmp_path is under a private directory: the suite refuses it, see below)."""
    top = Path(tempfile.mkdtemp(prefix="vioconform-test-host-", dir="/var/tmp"))
    top.chmod(0o755)
    path = top / "staging"
    yield path
    shutil.rmtree(path.parent, ignore_errors=True)


class Watcher:
    """Looks at both sides while the suite runs: what its run put in the staging directory on the
    "host" and in its local run directory."""

    def __init__(self, pid: int, host_dir: Path) -> None:
        self.pid, self.host_dir = pid, host_dir
        self.staged: set[str] = set()
        self.local: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            for d in self.host_dir.glob(f"{RUN_DIR_PREFIX}*"):
                self.staged |= {p.name for p in d.iterdir()}
            for d in run_dirs_of({self.pid}):
                self.local |= {p.name for p in d.iterdir()}

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def test_a_remote_host_runs_the_rules_end_to_end(sshd: SshServer, host_dir: Path, tmp_path: Path) -> None:
    """queue-depth (with the exact trace) and limits on virtio-scsi through qemu+ssh; the files are
    the host's, the fingerprint names the host's kernel, and nothing stays on either side."""
    results = tmp_path / "results"
    proc = start_suite(results, "--libvirt-uri", sshd.uri(), "--host-dir", str(host_dir),
                       "--controllers", "virtio-scsi", "-k", "queue_depth or limits")
    watcher = Watcher(proc.pid, host_dir)
    try:
        out, _ = proc.communicate(timeout=600)
    finally:
        watcher.stop()
    assert proc.returncode == 0, out[-4000:]
    assert " passed" in out and "failed" not in out, out[-3000:]
    # QEMU's files were staged on the host side (the bzImage: the PVH ELF is local only), not made in the local run directory
    assert {"vmlinuz", "initrd.img", "console.log", "qemu-trace.log", OWNER_FILE} <= watcher.staged, watcher.staged
    assert not watcher.local & {"vmlinux", "vmlinuz", "initrd.img", "qemu-trace.log", "dut0.img"}, watcher.local
    # the trace was read over SFTP: queue-depth's host histograms are the exact ones
    junit = (results / "junit.xml").read_text()
    assert 'name="host.kernel"' in junit and "unknown" not in _prop(junit, "host.kernel")
    assert _prop(junit, "qd32_host_exact_source") == "exact (QEMU trace events)", junit[:2000]
    # the console came back to the results
    assert (results / "logs" / "console.log").stat().st_size > 0
    # nothing left: staging directory, domain, QEMU log, local run directory
    assert list(host_dir.iterdir()) == []
    assert f"vioconform-{proc.pid}" not in active_vioconform_domains()
    assert not log_path(f"vioconform-{proc.pid}").exists()
    assert run_dirs_of({proc.pid}) == []


def _prop(junit: str, name: str) -> str:
    start = junit.index(f'name="{name}"')
    value = junit.index('value="', start) + len('value="')
    return junit[value:junit.index('"', value)]


def test_a_killed_remote_run_is_swept_by_the_next_and_only_it(sshd: SshServer, host_dir: Path, tmp_path: Path,
                                                              apart: Apart) -> None:
    """SIGKILL once the guest runs: its domain, staging directory, local run directory and QEMU log
    stay; the next run through the same host removes them, and leaves another machine's directory
    alone. Both runs are ``apart`` (another host name, their own $TMPDIR): the other tests' runs
    beside them leave the killed run's leftovers to the next run."""
    host_dir.mkdir()
    foreign = host_dir / f"{RUN_DIR_PREFIX}other"
    foreign.mkdir()
    (foreign / OWNER_FILE).write_text("another-machine 1\n")
    proc = start_suite(tmp_path / "killed", "--libvirt-uri", sshd.uri(), "--host-dir", str(host_dir),
                       "--controllers", "virtio-blk", "-k", "limits", env=apart.env, machine=apart.machine)
    name = f"vioconform-{proc.pid}"
    deadline = time.monotonic() + 300
    while name not in active_vioconform_domains():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0][-3000:]
        time.sleep(0.2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    assert name in active_vioconform_domains()
    assert any(p.name != foreign.name for p in host_dir.iterdir())
    assert log_path(name).exists() and run_dirs_of({proc.pid}, apart.tmpdir) != []
    next_run = start_suite(tmp_path / "next", "--libvirt-uri", sshd.uri(), "--host-dir", str(host_dir),
                           "--controllers", "virtio-blk", "-k", "limits", env=apart.env, machine=apart.machine)
    out, _ = next_run.communicate(timeout=600)
    assert next_run.returncode == 0, out[-3000:]
    assert name not in active_vioconform_domains()
    assert [p.name for p in host_dir.iterdir()] == [foreign.name]
    assert not log_path(name).exists()
    assert run_dirs_of({proc.pid}, apart.tmpdir) == []


def test_a_wrong_host_key_is_refused(run_suite, sshd: SshServer, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    other = subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "other")],
                           check=True, timeout=30)
    assert other.returncode == 0
    wrong = write_known_hosts(tmp_path / "known_hosts", sshd.port,
                              " ".join((tmp_path / "other.pub").read_text().split()[:2]))
    run, took = run_timed(run_suite, "--libvirt-uri", sshd.uri(known_hosts=wrong))
    assert_usage_error(run, took, f"libvirt host root@127.0.0.1:{sshd.port} presented a host key other than the "
                                  f"one in known_hosts {wrong}")


def test_an_unknown_host_key_is_refused_with_the_remedy(run_suite, sshd: SshServer, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    run, took = run_timed(run_suite, "--libvirt-uri", sshd.uri(known_hosts=empty))
    assert_usage_error(run, took, f"libvirt host [127.0.0.1]:{sshd.port} is not in known_hosts {empty}: its key "
                                  f"cannot be checked. Check the key's fingerprint, then add it")


def test_libvirts_own_connection_checks_the_key_too(run_suite, sshd: SshServer, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The suite's connection trusts the key, libvirt's ssh does not (another known_hosts): refused."""
    empty = tmp_path / "libvirt_known_hosts"
    empty.write_text("")
    wrapper = write_ssh_wrapper(tmp_path / "ssh", empty)
    run, took = run_timed(run_suite, "--libvirt-uri", sshd.uri(wrapper=wrapper))
    assert_usage_error(run, took, "cannot connect to libvirt at ")
    assert "Host key verification failed" in run.output


def test_a_host_that_is_down_is_a_clear_error(run_suite, sshd: SshServer) -> None:  # type: ignore[no-untyped-def]
    uri = sshd.uri().replace(f":{sshd.port}/", ":1/")
    run, took = run_timed(run_suite, "--libvirt-uri", uri)
    assert_usage_error(run, took, "libvirt host root@127.0.0.1:1 is unreachable")


def test_a_user_without_libvirt_rights_is_a_clear_error(run_suite, sshd: SshServer) -> None:  # type: ignore[no-untyped-def]
    """``postgres`` (Debian's postgresql package makes it, with a shell) may log in but not use libvirt."""
    uri = sshd.uri().replace("qemu+ssh://root@", "qemu+ssh://postgres@")
    run, took = run_timed(run_suite, "--libvirt-uri", uri)
    assert_usage_error(run, took, f"cannot connect to libvirt at '{uri}': ")


def test_a_host_without_the_emulator_is_a_clear_error(run_suite, sshd: SshServer) -> None:  # type: ignore[no-untyped-def]
    run, took = run_timed(run_suite, "--libvirt-uri", sshd.uri(), "--emulator", "/opt/qemu-under-test/bin/qemu-system-x86_64")
    assert_usage_error(run, took, "--emulator /opt/qemu-under-test/bin/qemu-system-x86_64: not an executable QEMU on "
                                  "127.0.0.1")


def test_an_unusable_host_dir_is_a_clear_error(run_suite, sshd: SshServer) -> None:  # type: ignore[no-untyped-def]
    run, took = run_timed(run_suite, "--libvirt-uri", sshd.uri(), "--host-dir", "/proc/vioconform")
    assert_usage_error(run, took, "--host-dir /proc/vioconform: cannot use it on 127.0.0.1")


def test_the_record_command_reads_a_remote_domains_trace(sshd: SshServer) -> None:
    """``python -m hypervisors.libvirt.record --uri qemu+ssh://...`` on a domain of the remote host
    while fio runs in it: the exact histograms come back, the trace directory goes."""
    specs = (DiskSpec("virtio-scsi", 0),)
    with standalone_guest(specs, "vioconform-remote-record", uri=sshd.uri()) as (_, disks):
        disk = disks[0]
        disk.tool(Fio).start(FioJob("record", iodepth=16, runtime_s=8), disk.device_path,
                             disk.tool(WorkDir).ensure(), "record")
        r = subprocess.run([sys.executable, "-m", "hypervisors.libvirt.record", "--uri", sshd.uri(),
                            "--domain", disk.guest.name, "--disk", disk.attached.spec.serial, "--seconds", "2"],
                           check=False, cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        depth = parse_vscsistats_csv(r.stdout)[0].get(HistogramKind.OUTSTANDING_IOS)
        assert depth.count > 100 and depth.percentile(50) >= 8, depth
        assert not list(Path("/var/tmp/vioconform").glob("vioconform-record-*"))


def test_a_host_dir_qemu_cannot_reach_is_a_clear_error(run_suite, sshd: SshServer, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """pytest's tmp_path sits under a 0700 directory: QEMU (libvirt-qemu) could not open its files."""
    run, took = run_timed(run_suite, "--libvirt-uri", sshd.uri(), "--host-dir", str(tmp_path / "staging"))
    assert_usage_error(run, took, f"--host-dir {tmp_path / 'staging'} on 127.0.0.1: QEMU's user libvirt-qemu "
                                  "cannot enter it (a parent directory is private)")


def test_a_forwarded_port_taken_on_the_host_is_retried_then_reported(sshd: SshServer,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Two runs (or workers) may pick the same port on the host between its choice and QEMU's bind:
    QEMU refuses it, and the suite takes another. A port that stays taken is reported, and the
    failed starts leave nothing."""
    busy = socket.create_server(("127.0.0.1", 0))
    taken = busy.getsockname()[1]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    try:
        ports = iter([taken, free])
        monkeypatch.setattr(backend_module, "remote_port", lambda: next(ports))
        with standalone_guest((DiskSpec("virtio-blk", 0),), "vioconform-port-test", uri=sshd.uri()) as (_, disks):
            assert disks[0].guest.ssh.port == free
        monkeypatch.setattr(backend_module, "remote_port", lambda: taken)
        t0 = time.monotonic()
        with pytest.raises(HypervisorError, match=f"Could not set up host forwarding rule 'tcp:127.0.0.1:{taken}-:22'"), \
                standalone_guest((DiskSpec("virtio-blk", 0),), "vioconform-port-test", uri=sshd.uri()):
            pass
        # QEMU refuses the port at start: no boot is waited for (a boot alone is 12 s idle, minutes loaded)
        assert time.monotonic() - t0 < 60
        assert "vioconform-port-test" not in active_vioconform_domains()
    finally:
        busy.close()


@pytest.mark.long
def test_your_own_image_boots_on_a_remote_host(sshd: SshServer, host_dir: Path, tmp_path: Path) -> None:
    """``--image`` on a remote host, under UEFI: the image is uploaded once into the host's image
    cache, the overlay, seed and variable store are made in the staging directory (the user's
    file is never written), limits runs on it; the staging directory goes, the cache stays for
    the next run of the same image."""
    image = _test_image_path()
    before = fingerprint(image)
    results = tmp_path / "results"
    proc = start_suite(results, "--libvirt-uri", sshd.uri(), "--host-dir", str(host_dir), "--image", str(image),
                       "--firmware", "uefi", "--controllers", "virtio-blk", "-k", "limits", *PATIENT)
    watcher = Watcher(proc.pid, host_dir)
    try:
        out, _ = proc.communicate(timeout=1500)
    finally:
        watcher.stop()
    assert proc.returncode == 0, out[-6000:]
    assert fingerprint(image) == before, "the user's image was written"
    assert {"overlay.qcow2", "seed.iso", "OVMF_VARS.fd"} <= watcher.staged, watcher.staged
    assert not watcher.local & {"overlay.qcow2", "OVMF_VARS.fd"}, watcher.local
    cached = list((host_dir / "images").iterdir())
    assert [p.suffix for p in cached] == [".qcow2"] and cached[0].stat().st_size == image.stat().st_size
    assert [p.name for p in host_dir.iterdir()] == ["images"]
    assert f"vioconform-{proc.pid}" not in active_vioconform_domains()


def _test_image_path() -> Path:
    return ensure_test_image(logging.getLogger("vioconform.test").info).path
