"""Bad input gives a clear error within 30 s and leaves no clone behind (against vcsim)."""

from __future__ import annotations

import re
import secrets
import socket
import time
from dataclasses import replace
from pathlib import Path

import pytest

from hypervisors.base import GuestRequest
from hypervisors.cleanup import CleanupStack
from hypervisors.vsphere.backend import VSphereBackend
from hypervisors.vsphere.vcenter import VCenter
from model.errors import HypervisorError
from model.secret import Secret
from model.types import DiskSpec
from tests.vsphere.frames import shown_locals
from tests.vsphere.vsphere_sim import Sim, closed_port, sim_config
from tests.vsphere.vsphere_sshd import LoopbackSshd

#: The issue's bound for every bad-input error.
ERROR_WITHIN_S = 30.0


def start_with(backend: VSphereBackend, run_dir: Path, run_pubkey: str) -> tuple[float, str]:
    """Start a one-disk guest, expecting failure; return the seconds it took to fail and the message."""
    t0 = time.monotonic()
    with pytest.raises(HypervisorError) as info:
        backend.start_guest(GuestRequest("bad", (DiskSpec("pvscsi"),), run_dir, run_pubkey, boot_timeout_s=5))
    return time.monotonic() - t0, str(info.value)


@pytest.mark.parametrize(("change", "message"), [
    ({"password": Secret("wrong-password-5e1f")},
     r"rejected the login of 'vioconform@vsphere.local'.*VIOCONFORM_VCENTER_PASSWORD"),
    ({"port": 0}, r"vCenter 127.0.0.1:\d+ is unreachable"),
    ({"template": "no-such-template"}, r"template 'no-such-template' not found.*existing: .*DC0_C0_RP0_VM0"),
    ({"datastore": "no-such-ds"}, r"datastore 'no-such-ds' not found.*LocalDS_0"),
    ({"cluster": "no-such-cluster"}, r"cluster 'no-such-cluster' not found.*DC0_C0"),
    ({"network": "no-such-net"}, r"network 'no-such-net' not found.*VM Network"),
], ids=["bad-credentials", "unreachable", "template", "datastore", "cluster", "network"])
def test_bad_input_fails_fast_without_a_clone(vcsim: Sim, guest_sshd: LoopbackSshd, cleanup: CleanupStack,
                                              run_dir: Path, run_pubkey: str, change: dict[str, object],
                                              message: str) -> None:
    if change.get("port") == 0:
        change = {"port": closed_port()}
    before = vcsim.vms("vioconform-")
    backend = VSphereBackend(cleanup, replace(sim_config(vcsim, guest_sshd), **change),  # type: ignore[arg-type]
                             run_id="bad")
    try:
        elapsed, text = start_with(backend, run_dir, run_pubkey)
    finally:
        backend.close()
    assert elapsed < ERROR_WITHIN_S
    assert re.search(message, text), text
    assert vcsim.password not in text
    assert cleanup.run() == []
    assert vcsim.vms("vioconform-") == before


def test_unresponsive_vcenter_times_out_within_the_bound(vcsim: Sim, guest_sshd: LoopbackSshd,
                                                         cleanup: CleanupStack, run_dir: Path,
                                                         run_pubkey: str) -> None:
    """A port that accepts TCP but never answers (a firewall half-open, a hung proxy)."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)
    try:
        cfg = replace(sim_config(vcsim, guest_sshd), port=silent.getsockname()[1], connect_timeout_s=3.0)
        elapsed, text = start_with(VSphereBackend(cleanup, cfg, run_id="silent"), run_dir, run_pubkey)
    finally:
        silent.close()
    assert elapsed < ERROR_WITHIN_S
    assert "unreachable" in text and "waited at most 3 s" in text, text


def test_failed_login_keeps_no_frame_that_held_the_password(vcsim: Sim, guest_sshd: LoopbackSshd) -> None:
    """pyVmomi's frames below the login hold the password (its arguments, the SOAP body): the error
    chains to none of them, so no traceback option can show them."""
    wrong = f"wrong-{secrets.token_hex(8)}"
    with pytest.raises(HypervisorError, match="rejected the login") as info:
        VCenter(replace(sim_config(vcsim, guest_sshd), password=Secret(wrong)))
    assert info.value.__context__ is None and info.value.__cause__ is None
    assert wrong not in shown_locals(info.value)
