"""Sweeping what killed runs left is an explicit call the suite makes, never a side effect.

Each test leaves on this host what a run killed with SIGKILL leaves: a running ``vioconform-<pid>``
domain whose owner process is gone, libvirt's QEMU log of it and a run directory. Making a backend
(as the suite and the tools do) and the record command (pointed at a user's host) must leave all
three alone; ``sweep_leftovers()``, the session's explicit call, removes all three.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import libvirt
import pytest

from hypervisors.cleanup import OWNER_FILE, RUN_DIR_PREFIX, CleanupStack
from hypervisors.libvirt.backend import LibvirtBackend
from hypervisors.libvirt.leftovers import METADATA_NS, destroy
from hypervisors.libvirt.machine import DEFAULT_MACHINE
from hypervisors.libvirt.qemulog import log_path
from tests.e2e.conftest import ROOT

#: Not beside other tests (tox's parallel lane): its leftovers of dead runs would be swept by any other run started meanwhile.
pytestmark = pytest.mark.serial

URI = "qemu:///system"


@dataclass
class Leftovers:
    conn: libvirt.virConnect
    domain: str
    run_dir: Path

    def present(self) -> dict[str, bool]:
        running = [d.name() for d in self.conn.listAllDomains(libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE)]
        return {"domain": self.domain in running, "QEMU log": log_path(self.domain).exists(),
                "run directory": self.run_dir.exists()}


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    assert not Path(f"/proc/{proc.pid}").exists()
    return proc.pid


@pytest.fixture
def leftovers() -> Iterator[Leftovers]:
    """A killed run's domain (an idle BIOS, 32 MiB: no kernel needed), its QEMU log, its run directory."""
    pid = dead_pid()
    name = f"vioconform-{pid}"
    run_dir = Path(tempfile.gettempdir()) / f"{RUN_DIR_PREFIX}sweeptest-{pid}"
    run_dir.mkdir()
    (run_dir / OWNER_FILE).write_text(f"{pid}\n")
    conn = libvirt.open(URI)
    try:
        conn.createXML(f"""<domain type='qemu'><name>{name}</name>
  <metadata><vioc:run xmlns:vioc='{METADATA_NS}' pid='{pid}' dir='{run_dir}'/></metadata>
  <memory unit='MiB'>32</memory><vcpu>1</vcpu><os><type arch='x86_64' machine='pc'>hvm</type></os>
  <devices><memballoon model='none'/></devices></domain>""", 0)
        left = Leftovers(conn, name, run_dir)
        assert all(left.present().values()), left.present()
        yield left
    finally:
        with contextlib.suppress(libvirt.libvirtError):  # gone already where the test swept it
            destroy(conn.lookupByName(name))
        log_path(name).unlink(missing_ok=True)
        shutil.rmtree(run_dir, ignore_errors=True)
        conn.close()


def test_making_a_backend_sweeps_nothing(leftovers: Leftovers) -> None:
    cleanup = CleanupStack()
    try:
        LibvirtBackend(cleanup, URI).close()
        opts = SimpleNamespace(libvirt_uri=URI, accel="tcg", guest_kernel_deb=None, guest_kernel=None, vcenter=None, image=None,
                               firmware="bios", controllers=(), emulator=None, machine=DEFAULT_MACHINE,
                               host_dir="/var/tmp/vioconform")
        LibvirtBackend.from_options(cleanup, opts).close()  # the suite's way (the image is cached: no build)
    finally:
        cleanup.run()
    assert all(leftovers.present().values()), leftovers.present()


def test_the_record_command_sweeps_nothing(leftovers: Leftovers) -> None:
    """Pointed at the leftover domain itself: it finds no such disk, and the domain still runs."""
    r = subprocess.run([sys.executable, "-m", "hypervisors.libvirt.record", "--domain", leftovers.domain,
                        "--disk", "vda", "--seconds", "1"], cwd=ROOT, capture_output=True, text=True, timeout=60,
                       check=False)
    assert r.returncode == 2 and f"domain {leftovers.domain} has no disk 'vda'" in r.stderr, r.stderr
    assert all(leftovers.present().values()), leftovers.present()


def test_the_explicit_sweep_removes_all_of_it(leftovers: Leftovers) -> None:
    cleanup = CleanupStack()
    backend = LibvirtBackend(cleanup, URI)
    try:
        backend.sweep_leftovers()
    finally:
        backend.close()
    assert not any(leftovers.present().values()), leftovers.present()
