"""A pool of libvirt hosts from one run, spread over pytest-xdist workers, for real: this machine's
daemon (``qemu:///system``) and a "remote" host through a private sshd on loopback
(bench/sshserver.py, the same daemon reached over SSH with staging in its own directory).

One JUnit file, one report, one store run; each test id and environment entry names its host;
a host that fails fails only its own tests; a killed worker leaves nothing on either "host".
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from bench.sshserver import SshServer, private_sshd
from hypervisors.cleanup import RUN_DIR_PREFIX
from tests.e2e.conftest import (
    Apart,
    active_vioconform_domains,
    orphaned_domains,
    run_dirs_of,
    run_suite_at,
    start_suite,
)


@pytest.fixture(scope="module")
def sshd() -> Iterator[SshServer]:
    with private_sshd() as server:
        yield server


@pytest.fixture
def host_dir() -> Iterator[Path]:
    top = Path(tempfile.mkdtemp(prefix="vioconform-test-pool-", dir="/var/tmp"))
    top.chmod(0o755)
    yield top / "staging"
    shutil.rmtree(top, ignore_errors=True)


def _inventory(path: Path, sshd: SshServer, host_dir: Path, remote_uri: str | None = None) -> Path:
    path.write_text(f'[[host]]\nname = "here"\nuri = "qemu:///system"\n\n'
                    f'[[host]]\nname = "loop"\nuri = "{remote_uri or sshd.uri()}"\nhost_dir = "{host_dir}"\n')
    return path


def _mine(pids: set[int], tmpdir: Path = Path("/tmp")) -> list[str]:
    """Domains, local run directories (in ``tmpdir``, the runs' $TMPDIR) of the given processes."""
    return ([d for d in active_vioconform_domains() if any(d.startswith(f"vioconform-{p}") for p in pids)]
            + [str(d) for d in run_dirs_of(pids, tmpdir)])


def test_two_hosts_on_two_workers_merge_into_one_run(sshd: SshServer, host_dir: Path, tmp_path: Path) -> None:
    inv = _inventory(tmp_path / "hosts.toml", sshd, host_dir)
    results = tmp_path / "results"
    run = run_suite_at(results, "--hosts", str(inv), "--controllers", "virtio-blk,virtio-scsi", "-k", "limits",
                       "-n", "2", timeout=600)
    assert run.returncode == 0, run.output[-4000:]
    assert "2 workers [4 items]" in run.output, run.output[:2000]
    outcomes = run.outcomes()
    assert sorted(outcomes) == sorted(f"limits[{h}-libvirt:{c}:latency5ms]" for h in ("here", "loop")
                                      for c in ("virtio-blk", "virtio-scsi")), outcomes
    assert set(outcomes.values()) == {"passed"}, outcomes
    props = run.suite_properties()
    assert props["here:host.kernel"] == props["loop:host.kernel"] == os.uname().release
    assert props["here:qemu.version"] and props["loop:qemu.version"]
    assert "vioconform_revision" in props
    # one report, one store run with all four verdicts
    assert (results / "report.html").exists()
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'vioconform.db'}")
    with engine.connect() as c:
        runs = c.execute(sa.text("select id from runs")).fetchall()
        verdicts = c.execute(sa.text("select count(*) from verdicts")).scalar()
    assert len(runs) == 1 and verdicts == 4, (runs, verdicts)
    # each host's guest logs, per worker
    logs = {p.relative_to(results / "logs").parts[0] for p in (results / "logs").rglob("console.log")}
    assert logs == {"here", "loop"}, logs
    assert not list(host_dir.iterdir())
    assert orphaned_domains() == []  # the workers have exited: a guest of theirs still up was leaked


def test_a_host_that_fails_fails_only_its_own_tests(sshd: SshServer, host_dir: Path, tmp_path: Path) -> None:
    """The "remote" host is down (its port closed): its tests error with the reason, the local host's pass."""
    down = sshd.uri().replace(f":{sshd.port}/", ":1/")
    inv = _inventory(tmp_path / "hosts.toml", sshd, host_dir, remote_uri=down)
    t0 = time.monotonic()
    run = run_suite_at(tmp_path / "results", "--hosts", str(inv), "--controllers", "virtio-blk", "-k", "limits",
                       timeout=600)
    assert run.returncode == 10, run.output[-4000:]  # harness errors, no rule failed (reports/exitcodes.py)
    outcomes = run.outcomes()
    assert outcomes["limits[here-libvirt:virtio-blk:latency5ms]"] == "passed", outcomes
    assert outcomes["limits[loop-libvirt:virtio-blk:latency5ms]"] == "error", outcomes
    assert "host loop: libvirt host root@127.0.0.1:1 is unreachable" in run.output
    assert time.monotonic() - t0 < 300
    assert run.left_behind == []


def test_a_killed_worker_leaves_nothing_on_either_host(sshd: SshServer, host_dir: Path, tmp_path: Path,
                                                       apart: Apart) -> None:
    """SIGKILL the worker whose guest runs on the "remote" host: the run ends (that test an error,
    the others run), and what the worker left is gone from both hosts by the end of the run. The
    run is ``apart`` (another host name, its own $TMPDIR): the other tests' runs beside it cannot
    sweep the worker's leftovers before this run removes them itself."""
    inv = _inventory(tmp_path / "hosts.toml", sshd, host_dir)
    for attempt in (1, 2):
        results = tmp_path / f"results{attempt}"
        proc = start_suite(results, "--hosts", str(inv), "--controllers", "virtio-blk",
                           "-k", "limits or direct_io", "-n", "2", env=apart.env, machine=apart.machine)
        victim = _remote_guests_worker(proc)
        if victim is not None:
            break
        # the run stopped itself: a worker that never started (fixtures/workerstart.py, an
        # execnet start-up hang seen 2 times in about 15 runs); the run says so, and one more
        # start shows what this test is about
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode != 0 and "not started within" in out, out[-3000:]
        assert _mine({proc.pid}, apart.tmpdir) == [], _mine({proc.pid}, apart.tmpdir)
    assert victim is not None, "no guest on the second host in two runs"
    staged = list(host_dir.glob(f"{RUN_DIR_PREFIX}*"))
    assert staged, "the remote guest's staging directory"
    assert _mine({victim}, apart.tmpdir), "the worker's domain and local run directory, before the kill"
    os.kill(victim, signal.SIGKILL)
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 10, out[-3000:]  # harness errors, no rule failed (reports/exitcodes.py)
    assert "crashed while running" in out, out[-3000:]
    assert list(host_dir.iterdir()) == [] or all(not p.exists() for p in staged), list(host_dir.iterdir())
    assert _mine({victim, proc.pid}, apart.tmpdir) == [], _mine({victim, proc.pid}, apart.tmpdir)
    root = ET.parse(results / "junit.xml").getroot()
    assert len(root.findall(".//testcase")) >= 3


def _remote_guests_worker(proc: subprocess.Popen[str]) -> int | None:
    """The pid of the worker whose guest runs on the pool's second host (its domain is
    vioconform-<worker pid>-1); None if the run ended first. A run that starts no such guest
    within 300 s is stopped (the suite removes what it started, as on Ctrl-C) and fails the test."""
    deadline = time.monotonic() + 300
    while proc.poll() is None:
        if time.monotonic() > deadline:
            proc.terminate()
            pytest.fail(f"no guest on the second host within 300 s:\n{proc.communicate(timeout=120)[0][-3000:]}")
        for name in active_vioconform_domains():
            worker = name.split("-")[1]
            # a worker of this run's (other tests' pool runs may be up beside it)
            if name.endswith("-1") and worker.isdigit() and _parent(int(worker)) == proc.pid:
                return int(worker)
        time.sleep(0.2)
    return None


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])
