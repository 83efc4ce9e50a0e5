"""--emulator and --machine: which QEMU binary and machine type, checked before any guest starts,
and the suite's devices moved to q35's root bus."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from hypervisors.libvirt import machine
from model.errors import HypervisorError

QEMU = shutil.which("qemu-system-x86_64")
needs_qemu = pytest.mark.skipif(QEMU is None, reason="qemu-system-x86_64 is not installed (scripts/setup-host.sh)")


def _script(tmp_path: Path, body: str, name: str = "emu") -> Path:
    p = tmp_path / name
    p.write_text(f"#!/bin/sh\n{body}\n")
    p.chmod(0o755)
    return p


@needs_qemu
def test_a_real_qemu_and_a_wrapper_around_it_are_accepted(tmp_path: Path) -> None:
    assert QEMU is not None
    assert machine.check_emulator(Path(QEMU)).startswith("QEMU emulator version ")
    wrapper = _script(tmp_path, f'exec {QEMU} "$@"')
    assert machine.check_emulator(wrapper).startswith("QEMU emulator version ")
    types = machine.machine_types(wrapper)
    assert {"pc", "q35"} <= set(types) and any(t.startswith("pc-i440fx-") for t in types)
    machine.check_machine(wrapper, "q35", ("virtio-scsi", "virtio-blk"))
    machine.check_machine(wrapper, "pc", ("ide",))


@needs_qemu
def test_unknown_machines_and_ide_on_q35_are_refused_with_the_choices(tmp_path: Path) -> None:
    assert QEMU is not None
    with pytest.raises(HypervisorError, match=r"--machine pc-q99: .* has no such machine type; it offers: .*q35"):
        machine.check_machine(Path(QEMU), "pc-q99", ("virtio-blk",))
    with pytest.raises(HypervisorError, match=r"controller ide is the PIIX IDE .* use --controllers ahci"):
        machine.check_machine(Path(QEMU), "q35", ("virtio-blk", "ide"))


def test_bad_emulators_are_named_with_the_remedy(tmp_path: Path) -> None:
    with pytest.raises(HypervisorError, match="no such file"):
        machine.check_emulator(tmp_path / "missing")
    plain = tmp_path / "plain"
    plain.write_text("data")
    with pytest.raises(HypervisorError, match="not executable"):
        machine.check_emulator(plain)
    with pytest.raises(HypervisorError, match=r"does not say it is QEMU \(it said: Python 3"):
        machine.check_emulator(_script(tmp_path, "echo 'Python 3.11.7'", "python"))
    with pytest.raises(HypervisorError, match="did not answer within"):
        old, machine.PROBE_TIMEOUT_S = machine.PROBE_TIMEOUT_S, 0.5
        try:
            machine.check_emulator(_script(tmp_path, "sleep 5", "slow"))
        finally:
            machine.PROBE_TIMEOUT_S = old


def test_q35_moves_the_suites_devices_to_its_root_bus() -> None:
    args = ["-netdev", "user,id=n", "-device", "virtio-net-pci,netdev=n,bus=pci.0,addr=0x11",
            "-device", json.dumps({"driver": "virtio-blk-pci", "bus": "pci.0", "addr": "0x8"}),
            "-device", json.dumps({"driver": "scsi-hd", "bus": "vioc-hba-virtio-scsi.0"})]
    assert machine.on_root_bus(args, "pc") == args
    assert machine.on_root_bus(args, "pc-i440fx-7.2") == args
    moved = machine.on_root_bus(args, "q35")
    assert moved[3] == "virtio-net-pci,netdev=n,bus=pcie.0,addr=0x11"
    assert json.loads(moved[5])["bus"] == "pcie.0"
    assert json.loads(moved[7])["bus"] == "vioc-hba-virtio-scsi.0"  # a SCSI bus is not a PCI bus
    assert machine.root_bus("pc-q35-7.2") == "pcie.0"


@pytest.mark.parametrize("name", ["none", "isapc", "microvm"])
def test_machines_without_a_pci_bus_are_refused_before_any_guest(tmp_path: Path, name: str) -> None:
    """libvirt would only say "No PCI buses available" when the guest is defined; no emulator is asked."""
    with pytest.raises(HypervisorError, match=f"--machine {name}: .*with no PCI bus for the suite's disk controllers "
                                              "and network card; use pc \\(i440fx\\) or q35"):
        machine.check_machine(tmp_path / "never-run", name, ("virtio-blk",))


def test_an_emulator_that_only_prints_a_version_is_not_a_working_qemu(tmp_path: Path) -> None:
    liar = _script(tmp_path, "echo 'QEMU emulator version 7.2.0'", "liar")
    assert machine.check_emulator(liar) == "QEMU emulator version 7.2.0"  # --version alone cannot tell
    said = r"liar is not a working QEMU: '.*liar -machine help' listed no machine types \(it said: QEMU emulator version"
    with pytest.raises(HypervisorError, match=said):
        machine.check_machine(liar, "pc", ("virtio-blk",))
    chatty = _script(tmp_path, "echo 'QEMU emulator version 7.2.0'; echo 'Copyright (c) 2003-2022 Fabrice Bellard'",
                     "chatty")
    with pytest.raises(HypervisorError, match=r"is not a working QEMU: .*\| Copyright"):
        machine.check_machine(chatty, "pc", ("virtio-blk",))
    with pytest.raises(HypervisorError, match=r"on kvm7 is not a working QEMU: .*\(it said: nothing\)"):
        machine.machine_types_of("", "/usr/bin/qemu-system-x86_64 on kvm7")
    listed = machine.machine_types_of("Supported machines are:\npc    Standard PC (alias of pc-i440fx-7.2)\n", "q")
    assert listed == {"pc": "Standard PC (alias of pc-i440fx-7.2)"}
