"""A remote libvirt host, for real: ``--libvirt-uri qemu+ssh://root@127.0.0.1:PORT/system`` through
a private sshd on loopback with its own host key (bench/sshserver.py). libvirt's own connection and
the suite's (staging over SFTP, the guest's SSH through a direct-tcpip tunnel, the console and the
exact-trace log read back) both go through that sshd and check its key: the one in the URI's
``known_hosts=`` file only, with no ``command=`` in the URI (the suite gives libvirt's ssh one of its
own making). A host alias of ~/.ssh/config, with a ProxyJump, works for both connections too; the
run that shows it has a ~/.ssh of the test's own (a mount namespace: ssh reads the passwd
database's home directory, not $HOME).

The "remote" host is this machine, so the tests make sure the remote path does not quietly use
local files: the staging directory (``--host-dir``) is one the local path never uses, the guest's
files must appear there and not in the local run directory, and everything must be gone from both
at the end, also after a SIGKILL.
"""

from __future__ import annotations

import logging
import os
import pwd
import re
import shlex
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

from bench.sshserver import SshServer, private_sshd, write_known_hosts, write_ssh_wrapper
from bench.testimage import ensure_test_image
from guest.tools.fio import Fio, FioJob
from guest.tools.system import WorkDir
from hypervisors.cleanup import OWNER_FILE, RUN_DIR_PREFIX
from hypervisors.libvirt import backend as backend_module
from hypervisors.libvirt.host_checks import open_connection
from hypervisors.libvirt.qemulog import log_path
from measure.standalone import standalone_guest
from model.errors import HypervisorError
from model.parse.histogram import HistogramKind
from model.parse.vscsistats_csv import parse_vscsistats_csv
from model.types import DiskSpec
from tests.e2e.conftest import ROOT, Apart, SuiteRun, active_vioconform_domains, run_dirs_of, start_suite
from tests.e2e.test_image_boot import PATIENT, fingerprint
from tests.e2e.test_setup_errors import CLEAR_ERROR_WITHIN_S, assert_usage_error, run_timed


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
    """queue-depth (with the exact trace), limits, data-integrity (the scratch disk's file read back
    over SFTP) and resize (QMP block_resize through the remote libvirt) on virtio-scsi through qemu+ssh; the files are the host's, the fingerprint names the
    host's kernel, and nothing stays on either side."""
    results = tmp_path / "results"
    proc = start_suite(results, "--libvirt-uri", sshd.uri(), "--host-dir", str(host_dir),
                       "--controllers", "virtio-scsi", "-k", "queue_depth or limits or data_integrity or resize")
    watcher = Watcher(proc.pid, host_dir)
    try:
        out, _ = proc.communicate(timeout=600)
    finally:
        watcher.stop()
    assert proc.returncode == 0, out[-4000:]
    # pytest's counts, not the word: the live log quotes QEMU's KVM probe ("... Assertion ... failed")
    assert " passed" in out and not re.search(r"\b\d+ failed\b", out), out[-3000:]
    # QEMU's files were staged on the host side (the bzImage: the PVH ELF is local only), not made in the local run directory
    assert {"vmlinuz", "initrd.img", "console.log", "qemu-trace.log", OWNER_FILE} <= watcher.staged, watcher.staged
    assert not watcher.local & {"vmlinux", "vmlinuz", "initrd.img", "qemu-trace.log", "dut0.img"}, watcher.local
    # the trace was read over SFTP: queue-depth's host histograms are the exact ones
    junit = (results / "junit.xml").read_text()
    assert 'name="host.kernel"' in junit and "unknown" not in _prop(junit, "host.kernel")
    assert _prop(junit, "qd32_host_exact_source") == "exact (QEMU trace events)", junit[:2000]
    # the scratch disk's file, on the host, was read back over SFTP and checked sector by sector
    assert "dut1.img" in watcher.staged and _prop(junit, "host_sectors_checked") == "8192", junit[:2000]
    assert _prop(junit, "host_bad_sectors") == "0" and _prop(junit, "host_guard_sectors_checked") == "4096"
    # the remote host grew the disk and the guest saw the size it configured
    assert _prop(junit, "grow_guest_bytes") == _prop(junit, "grow_host_to_bytes") != "", junit[:2000]
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
    """The suite's connection trusts the key, libvirt's ssh does not (a user's command= that reads
    another known_hosts): refused, naming that command= as the place to fix."""
    empty = tmp_path / "libvirt_known_hosts"
    empty.write_text("")
    wrapper = write_ssh_wrapper(tmp_path / "ssh", empty)
    run, took = run_timed(run_suite, "--libvirt-uri", sshd.uri(wrapper=wrapper))
    assert_usage_error(run, took, "cannot connect to libvirt at ")
    assert "No ED25519 host key is known for" in run.output
    assert ("it is not in the known_hosts that the ssh of the URI's command= reads. Check the key's fingerprint"
            in run.output), run.output
    assert "Is libvirtd running" not in run.output


def _key_only_in(sshd: SshServer) -> None:
    """The sshd's key is in the URI's known_hosts file and in no file ssh reads by itself."""
    key = sshd.host_key_line().split()[1]
    home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    for path in (home / ".ssh" / "known_hosts", home / ".ssh" / "known_hosts2", Path("/etc/ssh/ssh_known_hosts"),
                 Path("/etc/ssh/ssh_known_hosts2")):
        assert not path.exists() or key not in path.read_text(), f"{path} holds the test sshd's key"
    assert key in sshd.known_hosts.read_text()


def test_a_remote_host_whose_key_is_only_in_the_uris_known_hosts(sshd: SshServer, host_dir: Path,
                                                                 tmp_path: Path) -> None:
    """``qemu+ssh://...?keyfile=KEY&known_hosts=FILE`` as a user writes it, no command=: both
    connections check the key in FILE, and a limits run passes. (libvirt's ssh, left to itself,
    ignores known_hosts= and refuses the host: "Host key verification failed".)"""
    _key_only_in(sshd)
    uri = sshd.uri()
    assert "command=" not in uri
    run = SuiteRun(0, "", tmp_path / "results", 0)
    proc = start_suite(run.results, "--libvirt-uri", uri, "--host-dir", str(host_dir), "--controllers",
                       "virtio-blk", "-k", "limits")
    out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, out[-4000:]
    assert set(run.outcomes().values()) == {"passed"}, run.outcomes()
    assert list(host_dir.iterdir()) == []


def test_libvirts_connection_checks_the_uris_known_hosts(sshd: SshServer) -> None:
    """The key only in the URI's file, no command=: libvirt's own connection opens (no guest)."""
    _key_only_in(sshd)
    conn = open_connection(sshd.uri())
    try:
        assert conn.getType() == "QEMU"
    finally:
        conn.close()


def _other_key(tmp_path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "other")], check=True,
                   timeout=30)
    return " ".join((tmp_path / "other.pub").read_text().split()[:2])


@pytest.mark.parametrize("case", ["unknown key", "wrong key", "refused login"])
def test_libvirts_connection_errors_name_the_cause_and_remedy(sshd: SshServer, tmp_path: Path, case: str) -> None:
    """libvirt's own connection, alone (the suite's is checked first in a run: these are what libvirt
    says when only its own fails): each names the cause and what to do, in one line, within seconds."""
    if case == "unknown key":
        known = tmp_path / "known_hosts"
        known.write_text("")
        uri = sshd.uri(known_hosts=known)
        says = (f"libvirt's SSH connection did not accept 127.0.0.1's host key (No ED25519 host key is known for "
                f"[127.0.0.1]:{sshd.port}): it is not in known_hosts {known}. Check the key's fingerprint, then add "
                f"it (ssh-keyscan -p {sshd.port} 127.0.0.1 >> FILE)")
    elif case == "wrong key":
        known = write_known_hosts(tmp_path / "known_hosts", sshd.port, _other_key(tmp_path))
        uri = sshd.uri(known_hosts=known)
        says = (f"libvirt's SSH connection refused 127.0.0.1: it presented a host key other than the one in "
                f"known_hosts {known} (it presented ED25519 SHA256:")
    else:
        _other_key(tmp_path)
        uri = sshd.uri().replace(f"keyfile={sshd.client_key}", f"keyfile={tmp_path / 'other'}")
        says = ("127.0.0.1 refused libvirt's SSH login as root (Cannot recv data: root@127.0.0.1: Permission denied "
                "(publickey).: Connection reset by peer). Give the key with ?keyfile=PATH in the URI")
    t0 = time.monotonic()
    with pytest.raises(HypervisorError) as e:
        open_connection(uri)
    if case == "wrong key" and "host key" not in str(e.value):
        # Seen once in a CI run: libvirt reported a protocol error instead of ssh's words, so the
        # cause could not be named and the generic remedy was given (one line, no traceback).
        assert "Is libvirt's daemon running on 127.0.0.1" in str(e.value), e.value
    else:
        assert str(e.value).startswith(f"cannot connect to libvirt at '{uri}': {says}"), e.value
    assert "\n" not in str(e.value) and "Is libvirtd running" not in str(e.value)
    assert time.monotonic() - t0 < CLEAR_ERROR_WITHIN_S


def test_a_known_hosts_file_that_does_not_exist_is_a_clear_error(run_suite, sshd: SshServer,  # type: ignore[no-untyped-def]
                                                                 tmp_path: Path) -> None:
    missing = tmp_path / "no_known_hosts"
    uri = sshd.uri(known_hosts=missing)
    run, took = run_timed(run_suite, "--libvirt-uri", uri)
    assert_usage_error(run, took, f"--libvirt-uri {uri}: known_hosts={missing} does not exist; give the file that "
                                  "holds the host's key")


def test_a_host_that_is_down_is_a_clear_error(run_suite, sshd: SshServer) -> None:  # type: ignore[no-untyped-def]
    uri = sshd.uri().replace(f":{sshd.port}/", ":1/")
    run, took = run_timed(run_suite, "--libvirt-uri", uri)
    assert_usage_error(run, took, "libvirt host root@127.0.0.1:1 is unreachable")


def test_a_user_without_libvirt_rights_is_a_clear_error(run_suite, sshd: SshServer) -> None:  # type: ignore[no-untyped-def]
    """``postgres`` (Debian's postgresql package makes it, with a shell) may log in but not use libvirt."""
    uri = sshd.uri().replace("qemu+ssh://root@", "qemu+ssh://postgres@")
    run, took = run_timed(run_suite, "--libvirt-uri", uri)
    assert_usage_error(run, took, f"cannot connect to libvirt at '{uri}': postgres on 127.0.0.1 may not use libvirt's "
                                  "daemon (")
    assert "Log in as root (qemu+ssh://root@127.0.0.1/system) or add postgres to the libvirt group" in run.output


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
def test_your_own_image_boots_by_uefi_on_a_remote_host_and_tcq_off_fails_there(sshd: SshServer, host_dir: Path,
                                                                             tmp_path: Path) -> None:
    """``--image`` on a remote host, under UEFI: the image is uploaded once into the host's image
    cache, the overlay, seed and variable store are made in the staging directory (the user's
    file is never written); the staging directory goes, the cache stays for the next run of the same
    image. OVMF (Debian's ovmf) boots the disk through its EFI system partition (the healthy image run,
    tests/e2e/test_image_boot.py, boots it by BIOS), and on that one boot of a full distribution a fault
    still fails its rule, set through the image's ``sudo``: tcq-off, queue-depth on virtio-scsi, while
    limits passes on the same disk (tcq-off moves no other rule: docs/user-guide.md, "What each fault
    moves"; limits on virtio-blk runs in the healthy image run). Needs the suite's fio push: the test
    image has no fio."""
    image = _test_image_path()
    before = fingerprint(image)
    results = tmp_path / "results"
    proc = start_suite(results, "--libvirt-uri", sshd.uri(), "--host-dir", str(host_dir), "--image", str(image),
                       "--firmware", "uefi", "--controllers", "virtio-scsi", "--inject", "tcq-off",
                       "-k", "queue_depth or limits", *PATIENT)
    watcher = Watcher(proc.pid, host_dir)
    try:
        out, _ = proc.communicate(timeout=1500)
    finally:
        watcher.stop()
    assert proc.returncode == 1, out[-6000:]
    assert fingerprint(image) == before, "the user's image was written"
    run = SuiteRun(proc.returncode, out, results, proc.pid)
    assert run.outcomes() == {"queue-depth[libvirt:virtio-scsi:latency5ms]": "failed",
                              "limits[libvirt:virtio-scsi:latency5ms]": "passed"}, out[-6000:]
    assert "BdsDxe" in (results / "logs" / "console.log").read_text(errors="replace")  # OVMF booted it
    assert {"overlay.qcow2", "seed.iso", "OVMF_VARS.fd"} <= watcher.staged, watcher.staged
    assert not watcher.local & {"overlay.qcow2", "OVMF_VARS.fd"}, watcher.local
    cached = list((host_dir / "images").iterdir())
    assert [p.suffix for p in cached] == [".qcow2"] and cached[0].stat().st_size == image.stat().st_size
    assert [p.name for p in host_dir.iterdir()] == ["images"]
    assert f"vioconform-{proc.pid}" not in active_vioconform_domains()


def _test_image_path() -> Path:
    return ensure_test_image(logging.getLogger("vioconform.test").info).path


# -- ~/.ssh/config: a host alias and ProxyJump, for both connections -----------------------------------
#: The run's own /etc/hosts in the ProxyJump test: ``localhost`` is an address where nothing listens,
#: so the host named ``localhost`` in ~/.ssh/config is reached only through the jump host, whose sshd
#: (outside the run's namespace) resolves ``localhost`` to 127.0.0.1.
NOWHERE = "127.0.0.9"


def _own_ssh_dir(tmp_path: Path, sshd: SshServer, config: str, host_id: str = "[127.0.0.1]") -> Path:
    """A ~/.ssh for the run: ``config``, the sshd's key in known_hosts (as ``host_id``), the client key as id_test."""
    ssh_dir = tmp_path / "dot-ssh"
    ssh_dir.mkdir(mode=0o700)
    (ssh_dir / "config").write_text(config)
    (ssh_dir / "known_hosts").write_text(f"[127.0.0.1]:{sshd.port} {sshd.host_key_line()}\n"
                                         f"{host_id}:{sshd.port} {sshd.host_key_line()}\n")
    shutil.copyfile(sshd.client_key, ssh_dir / "id_test")
    (ssh_dir / "id_test").chmod(0o600)
    return ssh_dir


def run_with_ssh_dir(ssh_dir: Path, results: Path, *args: str, hosts: Path | None = None,
                     timeout: float = 900) -> SuiteRun:
    """The suite, as start_suite runs it, with ``ssh_dir`` as the user's ~/.ssh (and ``hosts`` as
    /etc/hosts): for it and for the ssh libvirt runs, and for nothing else. ssh reads ~ from the passwd
    database, not $HOME (``HOME=/tmp/x ssh -G`` still reads /root/.ssh/config), so a temporary HOME
    would not do: the run has a mount namespace of its own (util-linux unshare, as root) in which
    ``ssh_dir`` is bind-mounted on ~/.ssh. The user's own ~/.ssh is neither read nor written; the
    mounts go with the run's process."""
    mount_point = Path(pwd.getpwuid(os.getuid()).pw_dir) / ".ssh"
    if os.getuid() != 0 or not mount_point.is_dir() or shutil.which("unshare") is None:
        pytest.skip(f"a run with a ~/.ssh of its own needs root, util-linux unshare and {mount_point} to mount on")
    mounts = [(ssh_dir, mount_point)] + ([(hosts, Path("/etc/hosts"))] if hosts else [])
    script = " && ".join([*(f"mount --bind {shlex.quote(str(a))} {shlex.quote(str(b))}" for a, b in mounts),
                          'exec "$@"'])
    proc = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "sh",
                             sys.executable, "-m", "pytest", "suites", "-p", "no:cacheprovider", "--results-dir",
                             str(results), "--store", f"sqlite:///{results.parent / 'vioconform.db'}", *args],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.terminate()
        out, _ = proc.communicate(timeout=60)
        raise AssertionError(f"the suite did not finish in {timeout} s:\n{out[-3000:]}") from None
    return SuiteRun(proc.returncode, out, results, proc.pid)


def test_a_host_alias_with_a_proxyjump_works_for_both_connections(sshd: SshServer, host_dir: Path,
                                                                   tmp_path: Path) -> None:
    """``--libvirt-uri qemu+ssh://vc-target/system``: no user, port, key or known_hosts in the URI, all
    from ~/.ssh/config, through a jump host (the same sshd). The run's /etc/hosts puts ``localhost``
    where nothing listens (NOWHERE), so only a connection through the jump host reaches vc-target
    (HostName localhost): libvirt's ssh and the suite's connection (staging, the guest's SSH tunnelled
    through both hops) both take it, and limits passes."""
    ssh_dir = _own_ssh_dir(tmp_path, sshd, (
        f"Host vc-jump\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User root\n  IdentityFile ~/.ssh/id_test\n"
        f"Host vc-target\n  HostName localhost\n  Port {sshd.port}\n  User root\n  IdentityFile ~/.ssh/id_test\n"
        "  ProxyJump vc-jump\n"), host_id="[localhost]")
    hosts = tmp_path / "hosts"
    hosts.write_text(f"{NOWHERE} localhost\n")
    run = run_with_ssh_dir(ssh_dir, tmp_path / "results", "--libvirt-uri", "qemu+ssh://vc-target/system",
                           "--host-dir", str(host_dir), "--controllers", "virtio-blk", "-k", "limits", hosts=hosts)
    assert run.returncode == 0, run.output[-4000:]
    assert set(run.outcomes().values()) == {"passed"}, run.outcomes()
    assert list(host_dir.iterdir()) == []
    assert run.left_behind == []


def test_without_its_proxyjump_the_alias_is_unreachable(sshd: SshServer, tmp_path: Path) -> None:
    """The check of the test above: with the same /etc/hosts and no ProxyJump, vc-target is not reached."""
    ssh_dir = _own_ssh_dir(tmp_path, sshd, f"Host vc-target\n  HostName localhost\n  Port {sshd.port}\n"
                                           "  User root\n  IdentityFile ~/.ssh/id_test\n", host_id="[localhost]")
    hosts = tmp_path / "hosts"
    hosts.write_text(f"{NOWHERE} localhost\n")
    t0 = time.monotonic()
    run = run_with_ssh_dir(ssh_dir, tmp_path / "results", "--libvirt-uri", "qemu+ssh://vc-target/system",
                           hosts=hosts, timeout=120)
    assert_usage_error(run, time.monotonic() - t0, f"libvirt host root@localhost:{sshd.port} is unreachable: "
                                                   f"[Errno 111] Connection refused")


def test_a_proxyjump_host_that_is_down_is_a_clear_error(sshd: SshServer, tmp_path: Path) -> None:
    ssh_dir = _own_ssh_dir(tmp_path, sshd, f"Host vc-target\n  HostName 127.0.0.1\n  Port {sshd.port}\n"
                                           "  User root\n  IdentityFile ~/.ssh/id_test\n"
                                           "  ProxyJump root@127.0.0.1:1\n")
    t0 = time.monotonic()
    run = run_with_ssh_dir(ssh_dir, tmp_path / "results", "--libvirt-uri", "qemu+ssh://vc-target/system",
                           timeout=120)
    assert_usage_error(run, time.monotonic() - t0, "ProxyJump host root@127.0.0.1:1 (~/.ssh/config's ProxyJump "
                                                   "root@127.0.0.1:1 for vc-target) is unreachable: [Errno 111] "
                                                   "Connection refused")
