"""Finding and removing the clones of a run that died before its cleanup ran."""

from __future__ import annotations

from pathlib import Path

import pytest

from hypervisors.base import GuestRequest
from hypervisors.cleanup import CleanupStack
from hypervisors.vsphere import leftovers
from hypervisors.vsphere.backend import VSphereBackend
from model.secret import PASSWORD_ENV
from model.types import DiskSpec
from tests.vsphere.vsphere_sim import TEMPLATE, Sim, SimBackend, SimGuestSshd, write_target


def test_leftovers_of_one_run_are_listed_then_destroyed(backend: VSphereBackend, vcsim: Sim, run_dir: Path,
                                                        guest_sshd: SimGuestSshd,
                                                        run_pubkey: str, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    # a "killed" run: its cleanup stack never runs
    dead = SimBackend(CleanupStack(), backend.config, guest_sshd, run_id=f"{backend.run_id}dead")
    for name in ("a", "b"):
        dead.start_guest(GuestRequest(name, (DiskSpec("lsilogic"),), run_dir, run_pubkey, boot_timeout_s=20))
    dead.close()
    monkeypatch.setenv(PASSWORD_ENV, vcsim.password)
    target = str(write_target(tmp_path / "vc.toml", backend))
    prefix = f"vioconform-{dead.run_id}-"
    assert leftovers.main(["--target", target, "--run", dead.run_id]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[0] for line in listed] == [prefix + "a", prefix + "b"]
    assert all(f"vioconform run {dead.run_id}" in line for line in listed)
    assert vcsim.vms(prefix) == [prefix + "a", prefix + "b"]
    assert leftovers.main(["--target", target, "--run", dead.run_id, "--destroy"]) == 0
    assert vcsim.vms(prefix) == []
    assert TEMPLATE in vcsim.vms()
