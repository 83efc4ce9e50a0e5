"""The hypervisor under test: which QEMU binary (``--emulator``), which machine type (``--machine``),
and the environment a run records about them (its fingerprint, model/across/fingerprint.py).

- ``--emulator PATH`` must be an executable whose ``--version`` says it is QEMU; libvirt then runs
  the domain with it (``<devices><emulator>``). Without it libvirt picks the host's default
  (``/usr/bin/qemu-system-x86_64`` on Debian), and the run records which one it was.
- ``--machine TYPE`` must be one the emulator lists in ``-machine help`` (an alias such as ``pc``
  or ``q35``, or a versioned type such as ``pc-i440fx-7.2``). The run records the canonical type
  libvirt resolved it to (``pc`` -> ``pc-i440fx-7.2`` with QEMU 7.2).
- The suite's own ``-device`` arguments name the root PCI bus: ``pci.0`` on the i440fx machines,
  ``pcie.0`` on q35. libvirt accepts conventional PCI devices at explicit addresses on q35's root
  bus (it places them as integrated devices when the address comes from the XML). The PIIX IDE
  controller exists only on i440fx machines: ``--controllers ide`` with a q35 machine is refused.
- Machine types without a PCI bus (``none``, ``isapc``, ``microvm``) are refused before any
  guest starts: the suite's disk controllers and network card are PCI devices (libvirt would say
  "No PCI buses available" only when the guest is defined).
- An emulator whose ``-machine help`` does not list machine types (a script that prints a
  version and nothing else) is "not a working QEMU", with what it printed.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from model.errors import HypervisorError

DEFAULT_MACHINE = "pc"
#: Controllers that exist only on a given machine family: the PIIX IDE controller is part of the
#: i440fx chipset; q35's ICH9 has AHCI (the ``ahci`` controller) instead.
I440FX_ONLY = ("ide",)
#: Machine types with no PCI bus for the suite's devices (virtio-pci controllers, the network card),
#: as QEMU 7.2's ``-machine help`` describes them.
NO_PCI_BUS = {"none": "QEMU's empty machine (no buses at all)", "isapc": "an ISA-only PC",
              "microvm": "a minimal machine with virtio-mmio devices only",
              "x-remote": "a remote device process, not a guest machine"}
#: The first line of QEMU's ``-machine help``.
MACHINE_HELP_HEADER = "Supported machines are:"
#: ``--version`` and ``-machine help`` of an emulator answer in milliseconds here; a binary that
#: hangs is not a usable QEMU.
PROBE_TIMEOUT_S = 20.0


def is_q35(machine: str) -> bool:
    return "q35" in machine


def root_bus(machine: str) -> str:
    """The name QEMU gives the machine's root PCI bus."""
    return "pcie.0" if is_q35(machine) else "pci.0"


def _run(path: Path, *args: str) -> str:
    try:
        proc = subprocess.run([str(path), *args], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S,
                              check=False)
    except subprocess.TimeoutExpired:
        raise HypervisorError(f"--emulator {path}: '{path} {' '.join(args)}' did not answer within "
                              f"{PROBE_TIMEOUT_S:.0f} s: not a usable QEMU") from None
    except OSError as e:
        raise HypervisorError(f"--emulator {path}: cannot run it ({e.strerror}): give the path of a QEMU "
                              f"system emulator such as /usr/bin/qemu-system-x86_64") from None
    return proc.stdout + proc.stderr


def check_emulator(path: Path) -> str:
    """The emulator's version line (``QEMU emulator version 7.2.19 (Debian ...)``); HypervisorError
    if ``path`` is missing, not executable or not QEMU."""
    if not path.is_file():
        raise HypervisorError(f"--emulator {path}: no such file; give the path of a QEMU system emulator "
                              f"such as /usr/bin/qemu-system-x86_64")
    if not os.access(path, os.X_OK):
        raise HypervisorError(f"--emulator {path}: not executable (chmod +x it, or give another path)")
    out = _run(path, "--version")
    first = next((line for line in out.splitlines() if line.strip()), "")
    if "QEMU emulator version" not in first:
        raise HypervisorError(f"--emulator {path}: '{path} --version' does not say it is QEMU "
                              f"(it said: {first[:120] or 'nothing'}); give a QEMU system emulator")
    return first.strip()


def machine_types(path: Path) -> dict[str, str]:
    """The machine types the emulator offers: name -> description (``-machine help``);
    HypervisorError if it lists none (:func:`machine_types_of`)."""
    return machine_types_of(_run(path, "-machine", "help"), path)


def machine_types_of(help_text: str, path: Path | str) -> dict[str, str]:
    """``-machine help``'s answer of the emulator ``path`` as name -> description; HypervisorError
    naming what it printed if that is not QEMU's list ("Supported machines are:" and at least one
    type): a script that prints only a version is not a working QEMU."""
    lines = [line for line in help_text.splitlines() if line.strip()]
    types = parse_machine_types(help_text) if lines and lines[0].strip() == MACHINE_HELP_HEADER else {}
    if not types:
        said = " | ".join(line.strip() for line in lines[:3])[:200] or "nothing"
        raise HypervisorError(f"{path} is not a working QEMU: '{path} -machine help' listed no machine types "
                              f"(it said: {said}); give --emulator a QEMU system emulator such as "
                              f"/usr/bin/qemu-system-x86_64")
    return types


def parse_machine_types(help_text: str) -> dict[str, str]:
    """``-machine help``'s answer as name -> description."""
    types = {}
    for line in help_text.splitlines()[1:]:  # the first line is "Supported machines are:"
        name, _, description = line.strip().partition(" ")
        if name:
            types[name] = description.strip()
    return types


def check_machine(path: Path, machine: str, controllers: tuple[str, ...],
                  types: dict[str, str] | None = None) -> None:
    """HypervisorError unless ``machine`` is one of the emulator's types (``types``, else asked of
    the emulator on this machine), has a PCI bus and carries every controller."""
    if machine in NO_PCI_BUS:
        raise HypervisorError(f"--machine {machine}: {NO_PCI_BUS[machine]}, with no PCI bus for the suite's disk "
                              "controllers and network card; use pc (i440fx) or q35")
    if types is None:
        types = machine_types(path)
    if machine not in types:
        names = sorted(t for t in types if t.startswith(("pc", "q35", "microvm")) or t in ("isapc", "none"))
        raise HypervisorError(f"--machine {machine}: {path} has no such machine type; it offers: "
                              f"{', '.join(names) or 'none'}")
    if is_q35(machine) or is_q35(types[machine]):
        bad = [c for c in controllers if c in I440FX_ONLY]
        if bad:
            raise HypervisorError(f"--machine {machine}: controller {', '.join(bad)} is the PIIX IDE of the "
                                  f"i440fx (pc) machines and does not exist on q35; use --controllers ahci "
                                  f"for a SATA disk on q35, or --machine pc")


def on_root_bus(qemu_args: list[str], machine: str) -> list[str]:
    """``qemu_args`` with every device the suite places on ``pci.0`` (the JSON ``-device`` options
    and the key=value network device) moved to the machine's root bus; unchanged on i440fx."""
    bus = root_bus(machine)
    if bus == "pci.0":
        return list(qemu_args)
    out = []
    for arg in qemu_args:
        if arg.startswith("{"):
            props = json.loads(arg)
            if props.get("bus") == "pci.0":
                props["bus"] = bus
                arg = json.dumps(props)
        elif "bus=pci.0," in arg or arg.endswith("bus=pci.0"):
            arg = arg.replace("bus=pci.0", f"bus={bus}")
        out.append(arg)
    return out
