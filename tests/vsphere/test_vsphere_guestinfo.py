"""What each clone is told through guestinfo before power-on, read back from the simulator's VMs.

cloud-init (the default): cloud-init's VMware datasource keys, base64, carrying the login user,
the run's public key and a host key made for that clone alone, whose public half is the key the
suite pins. rpctool (the fallback): the run's key in ``guestinfo.vioconform.authorized_key``,
root, and the template's host key.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from hypervisors.base import Guest, GuestRequest
from hypervisors.cleanup import CleanupStack
from hypervisors.vsphere.backend import KEY_PROPERTY, VSphereBackend
from images.cloudinit import DEFAULT_GUEST_USER
from model.errors import HypervisorError
from model.types import DiskSpec
from tests.vsphere.vsphere_sim import Sim, SimBackend, SimGuestSshd, cloud_init_documents, sim_config
from transport.ssh import SshTransport

CLOUD_INIT_KEYS = {"guestinfo.metadata", "guestinfo.metadata.encoding",
                   "guestinfo.userdata", "guestinfo.userdata.encoding"}


def start(backend: VSphereBackend, run_dir: Path, run_pubkey: str, name: str) -> Guest:
    return backend.start_guest(GuestRequest(name, (DiskSpec("pvscsi"),), run_dir, run_pubkey, boot_timeout_s=20))


def public_line(private_openssh: str) -> str:
    key = serialization.load_ssh_private_key(private_openssh.encode(), password=None)
    assert isinstance(key, Ed25519PrivateKey)
    return key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                         serialization.PublicFormat.OpenSSH).decode()


def echo(guest: Guest, prefix: str = "") -> str:
    ssh = SshTransport(guest.ssh, connect_timeout_s=10)
    try:
        return ssh.run(f"{prefix}echo guest-$((6*7))").stdout.strip()
    finally:
        ssh.close()


def test_each_clone_gets_its_cloud_init_guestinfo(backend: VSphereBackend, vcsim: Sim, run_dir: Path,
                                                  run_pubkey: str) -> None:
    seen: dict[str, tuple[str, str]] = {}  # clone -> (instance-id, pinned host key)
    for name in ("ci1", "ci2"):
        guest = start(backend, run_dir, run_pubkey, name)
        info = vcsim.guestinfo(backend.vm_name(guest))
        assert set(info) == CLOUD_INIT_KEYS, info  # nothing else: no rpctool key
        assert info["guestinfo.metadata.encoding"] == info["guestinfo.userdata.encoding"] == "base64"
        documents = cloud_init_documents(info)
        assert documents is not None
        user_data, meta_data = documents
        # the login: cloud-init's default user under the suite's name, passwordless sudo, the run's key only
        assert user_data["user"]["name"] == guest.ssh.user == DEFAULT_GUEST_USER
        assert user_data["user"]["sudo"] == "ALL=(ALL) NOPASSWD:ALL" and user_data["user"]["lock_passwd"] is True
        assert [k.split()[:2] for k in user_data["ssh_authorized_keys"]] == [["ssh-ed25519", run_pubkey]]
        assert guest.ssh.key_path == run_dir / "id_ed25519"
        # the host key pair: the private half in the user-data makes the public half the suite pins
        keys = user_data["ssh_keys"]
        assert public_line(keys["ed25519_private"]) == keys["ed25519_public"] == guest.ssh.host_key
        # no ssh_genkeytypes: cloud-init 22.4's schema rejects [] ("too short"), and it generates no
        # key anyway when ssh_keys gives one
        assert "ssh_genkeytypes" not in user_data and user_data["ssh_deletekeys"] is True
        assert meta_data["redact"] == ["userdata"]
        seen[name] = (meta_data["instance-id"], guest.ssh.host_key)
        # the simulated guest applied this clone's guestinfo: SSH as that user, pinning that key, works
        assert echo(guest) == "guest-42"
        assert echo(guest, "sudo -n ") == "guest-42"  # the user's passwordless sudo, as the suite uses it
    assert len({iid for iid, _ in seen.values()}) == 2, seen
    assert len({key for _, key in seen.values()}) == 2, seen


def test_rpctool_fallback_sets_its_key_and_pins_the_template_key(vcsim: Sim, guest_sshd: SimGuestSshd,
                                                                 cleanup: CleanupStack, run_dir: Path,
                                                                 run_pubkey: str) -> None:
    config = sim_config(vcsim, guest_sshd, "rpctool")
    backend = SimBackend(cleanup, config, guest_sshd, run_id="rpctool")
    try:
        guest = start(backend, run_dir, run_pubkey, "rp")
        info = vcsim.guestinfo(backend.vm_name(guest))
        assert info == {KEY_PROPERTY: run_pubkey}, info
        assert (guest.ssh.user, guest.ssh.host_key) == ("root", config.guest_host_key)
        assert guest.ssh.host_key == guest_sshd.host_key_line
        assert echo(guest) == "guest-42"
    finally:
        cleanup.run()
        backend.close()
    assert vcsim.vms("vioconform-rpctool-") == []


def test_template_without_cloud_init_fails_on_the_host_key(vcsim: Sim, guest_sshd: SimGuestSshd,
                                                           cleanup: CleanupStack, run_dir: Path,
                                                           run_pubkey: str) -> None:
    """cloud-init's default on a template that has no cloud-init: the clone keeps the template's host key."""
    backend = SimBackend(cleanup, sim_config(vcsim, guest_sshd), guest_sshd, run_id="nocloudinit",
                         has_cloud_init=False)
    t0 = time.monotonic()
    try:
        with pytest.raises(HypervisorError) as info:
            backend.start_guest(GuestRequest("nc", (DiskSpec("pvscsi"),), run_dir, run_pubkey, boot_timeout_s=5))
    finally:
        cleanup.run()
        backend.close()
    text = str(info.value)
    assert time.monotonic() - t0 < 30
    assert "host key other than the pinned one" in text and "VMware datasource" in text, text
    assert 'guest_prep = "rpctool"' in text and "\n" not in text, text
    assert vcsim.vms("vioconform-nocloudinit-") == []
