"""Fixtures for the vSphere backend's tests: a real vcsim, a real SSH server, a backend wired to both."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from hypervisors.base import Guest, GuestRequest
from hypervisors.cleanup import CleanupStack
from hypervisors.vsphere.backend import VSphereBackend
from model.types import DiskSpec
from tests.vsphere.vsphere_sim import (
    EsxiFactory,
    Sim,
    SimBackend,
    SimGuestSshd,
    fake_esxi_dir,
    sim_config,
    start_sim,
    stop_sim,
)
from tests.vsphere.vsphere_sshd import LoopbackSshd
from transport.ssh import generate_run_key


@pytest.fixture(scope="session")
def vcsim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sim]:
    try:
        sim = start_sim(tmp_path_factory.mktemp("vcsim"))
    except FileNotFoundError as e:
        pytest.fail(str(e), pytrace=False)
    yield sim
    stop_sim(sim)


@pytest.fixture(scope="session")
def guest_sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimGuestSshd]:
    """The "guest": it trusts exactly the keys the backend handed to the last booted clone through guestinfo."""
    server = SimGuestSshd(tmp_path_factory.mktemp("guest-sshd"))
    yield server
    server.stop()


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """A run directory holding the run key, as the suite's session fixture makes it."""
    generate_run_key(tmp_path)
    return tmp_path


@pytest.fixture
def run_pubkey(run_dir: Path) -> str:
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_ssh_private_key((run_dir / "id_ed25519").read_bytes(), password=None)
    return key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                         serialization.PublicFormat.OpenSSH).decode().split()[1]


@pytest.fixture
def cleanup() -> Iterator[CleanupStack]:
    stack = CleanupStack()
    yield stack
    stack.run()


@pytest.fixture
def backend(vcsim: Sim, guest_sshd: SimGuestSshd, cleanup: CleanupStack) -> Iterator[VSphereBackend]:
    """A backend on the simulator with the default template preparation (cloud-init)."""
    b = SimBackend(cleanup, sim_config(vcsim, guest_sshd), guest_sshd, run_id=f"t{uuid.uuid4().hex[:8]}")
    yield b
    cleanup.run()
    b.close()


@pytest.fixture
def one_disk_guest(backend: VSphereBackend, run_dir: Path, run_pubkey: str) -> Guest:
    """A guest with one pvscsi disk (instance scsi1:0: the template has scsi0)."""
    return backend.start_guest(GuestRequest("vs", (DiskSpec("pvscsi"),), run_dir, run_pubkey, boot_timeout_s=20))


@pytest.fixture
def make_esxi(tmp_path: Path, backend: VSphereBackend, one_disk_guest: Guest, run_pubkey: str) -> Iterator[EsxiFactory]:
    """Starts the "ESXi host": a real SSH server trusting the run key, with or without a vscsiStats on its PATH."""
    servers: list[LoopbackSshd] = []

    def make(with_vscsistats: bool) -> tuple[LoopbackSshd, Path]:
        root = fake_esxi_dir(tmp_path / "esxi", backend.vm_name(one_disk_guest), with_vscsistats)
        servers.append(LoopbackSshd(tmp_path, lambda user: [run_pubkey], path_prepend=[root / "bin"]))
        return servers[-1], root

    yield make
    for server in servers:
        server.stop()
