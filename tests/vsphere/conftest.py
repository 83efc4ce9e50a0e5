"""Fixtures for the vSphere backend's tests: a real vcsim, a real SSH server, a backend wired to both."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from vsphere_sim import CLUSTER, DATASTORE, TEMPLATE, Sim, start_sim, stop_sim
from vsphere_sshd import LoopbackSshd

from hypervisors.cleanup import CleanupStack
from hypervisors.vsphere.backend import VSphereBackend
from hypervisors.vsphere.config import Secret, VSphereConfig
from transport.ssh import generate_run_key

DATA = Path(__file__).resolve().parents[1] / "data" / "vsphere"


@pytest.fixture(scope="session")
def vcsim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sim]:
    try:
        sim = start_sim(tmp_path_factory.mktemp("vcsim"))
    except FileNotFoundError as e:
        pytest.fail(str(e), pytrace=False)
    yield sim
    stop_sim(sim)


@pytest.fixture(scope="session")
def guest_sshd(vcsim: Sim, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoopbackSshd]:
    """The "guest": it trusts exactly the keys the backend handed to VMs through guestinfo."""
    server = LoopbackSshd(tmp_path_factory.mktemp("guest-sshd"), vcsim.authorized_keys)
    yield server
    server.stop()


def sim_config(sim: Sim, sshd: LoopbackSshd, **overrides: object) -> VSphereConfig:
    """A config for the simulator whose guests answer SSH on ``sshd``."""
    values: dict[str, object] = dict(
        host="127.0.0.1", port=sim.port, user="vioconform@vsphere.local", template=TEMPLATE,
        datastore=DATASTORE, cluster=CLUSTER, insecure=True, guest_host_key=sshd.host_key_line,
        guest_ssh_port=sshd.port, simulate_guest_ip="127.0.0.1", ip_timeout_s=5.0, connect_timeout_s=10.0,
        task_timeout_s=30.0)
    values.update(overrides)
    return VSphereConfig(password=Secret(sim.password), **values)  # type: ignore[arg-type]


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
def backend(vcsim: Sim, guest_sshd: LoopbackSshd, cleanup: CleanupStack) -> Iterator[VSphereBackend]:
    b = VSphereBackend(cleanup, sim_config(vcsim, guest_sshd), run_id=f"t{uuid.uuid4().hex[:8]}")
    yield b
    cleanup.run()
    b.close()
