"""``--help`` tells the truth: every default the "vioconform" option group states is the constant the
code uses, and a run without options uses exactly those constants.

The help texts are read from the suite's own parser (``fixtures.options.pytest_addoption`` on a
pytest ``Parser``), the expected wording is rendered here from the constants, and the options a run
resolves (``SuiteOptions.from_config``) are compared with the same constants.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
from _pytest.config.argparsing import Argument, Parser

from fixtures import options
from fixtures.options import SuiteOptions
from fixtures.options_guest import (
    DEFAULT_VCPUS,
    EMBEDDED_BOOT_TIMEOUT_S,
    EMBEDDED_MEMORY_MIB,
    IMAGE_BOOT_TIMEOUT_S,
    IMAGE_MEMORY_MIB,
)
from fixtures.options_measure import DEFAULT_DISK_LATENCY_MS
from fixtures.options_results import DEFAULT_REPEATS, DEFAULT_REPEATS_OTHERWISE
from fixtures.options_target import DEFAULT_LIBVIRT_URI, DEFAULT_MACHINE
from hypervisors.libvirt.defaults import DEFAULTS as LIBVIRT
from hypervisors.libvirt.hostfiles import DEFAULT_HOST_DIR
from hypervisors.vsphere.defaults import DEFAULTS as VSPHERE
from model.across.series import SERIES_FORMAT
from model.rules import RULE_OPTIONS
from model.rules.queue_depth import DEFAULT_DEPTHS, DEPTHS
from model.rules.stall_tolerance import DEFAULT_HOLD_S, DEFAULT_STALL_S, STALL_HOLD_S, STALL_S
from reports.results import DEFAULT_DIR_MODE, DEFAULT_PARENT
from reports.store import default_url


def group() -> dict[str, Argument]:
    """The vioconform group's options by their long name, as ``--help`` lists them."""
    parser = Parser(_ispytest=True)
    options.pytest_addoption(parser)
    return {a.names()[0]: a for a in parser.getgroup("vioconform").options}


def rendered_help(arg: Argument) -> str:
    """The option's help as argparse prints it (``%(default)s`` filled in), on one line."""
    attrs = arg.attrs()
    text = str(attrs.get("help", ""))
    return " ".join((text % {"default": attrs.get("default")}).split())


#: "default: X" in a help text, up to the parenthesis that closes it (or the sentence's end).
STATED = re.compile(r"\bdefault: (.*?)(?:\)|\.\s|$)", re.IGNORECASE)


def stated_default(arg: Argument) -> str | None:
    found = STATED.search(rendered_help(arg))
    return found.group(1) if found else None


def _num(value: float) -> str:
    return f"{value:g}"


#: Option -> what its help must say after "default: ", rendered from the constant the code uses.
EXPECTED: dict[str, str] = {
    "--hypervisor": "libvirt",
    "--libvirt-uri": f"$LIBVIRT_DEFAULT_URI, else {DEFAULT_LIBVIRT_URI};",
    "--host-dir": str(DEFAULT_HOST_DIR),
    # Not the suite's constant: libvirt picks the emulator of its domain type; the help names Debian's.
    "--emulator": "libvirt's, /usr/bin/qemu-system-x86_64 on Debian",
    "--machine": DEFAULT_MACHINE,
    "--accel": "auto",
    "--controllers": (f"{','.join(LIBVIRT.controllers)} on libvirt; "
                      f"{','.join(VSPHERE.controllers)} on vSphere"),
    "--disk-backing": "latency",
    "--disk-latency-ms": _num(DEFAULT_DISK_LATENCY_MS),
    "--window-s": f"{_num(LIBVIRT.window_s)} on libvirt; {_num(VSPHERE.window_s)} on vSphere",
    "--boot-timeout": f"{_num(EMBEDDED_BOOT_TIMEOUT_S)}; {_num(IMAGE_BOOT_TIMEOUT_S)} with --image",
    "--firmware": "bios",
    "--reproducer": "failed",
    "--guest-memory": f"{EMBEDDED_MEMORY_MIB}; {IMAGE_MEMORY_MIB} with --image",
    "--guest-vcpus": f"{DEFAULT_VCPUS};",
    "--repeats": (f"{DEFAULT_REPEATS_OTHERWISE}; "
                  + "; ".join(f"{rule} {n}" for rule, n in DEFAULT_REPEATS.items()) + ","),
    "--results-dir": f"a new {DEFAULT_PARENT}/<date-time>",
    "--store": default_url(),
    "--results-mode": f"{DEFAULT_DIR_MODE:04o}, files {DEFAULT_DIR_MODE & 0o666:04o}",
    "--series": f"derived from what the job asks for, {SERIES_FORMAT};",
}


def _rendered(value: object) -> str:
    """A rule option's default as its help states it: a number as ``:g``, a tuple joined by commas."""
    if isinstance(value, tuple):
        return ",".join(map(str, value))
    return _num(value) if isinstance(value, float) else str(value)


#: Each rule's own options (their modules' OPTIONS): the default their help states is their declared one.
EXPECTED.update({o.name: _rendered(o.default) for o in RULE_OPTIONS if not o.flag})


@pytest.mark.parametrize("option", sorted(EXPECTED))
def test_the_stated_default_is_the_constant(option: str) -> None:
    arg = group()[option]
    stated = stated_default(arg)
    assert stated is not None, f"{option}'s help states no default; it should say 'default: {EXPECTED[option]}'"
    assert stated.startswith(EXPECTED[option]), (
        f"{option}'s help says 'default: {stated}', the code uses '{EXPECTED[option]}'")


def test_no_option_states_a_default_that_is_not_checked() -> None:
    unchecked = {name: stated_default(arg) for name, arg in group().items()
                 if stated_default(arg) is not None and name not in EXPECTED}
    assert not unchecked, f"help texts with a default this test does not compare with a constant: {unchecked}"


def test_every_option_with_a_default_states_it() -> None:
    """A default the parser holds (not None, a flag's False or a repeatable option's []) is in its help."""
    silent = [name for name, arg in group().items()
              if arg.attrs().get("default") not in (None, False, []) and stated_default(arg) is None]
    assert not silent, f"options whose default --help does not state: {silent}"


def test_the_parser_defaults_are_the_constants() -> None:
    g = group()
    assert g["--host-dir"].attrs()["default"] == str(DEFAULT_HOST_DIR)
    assert g["--machine"].attrs()["default"] == DEFAULT_MACHINE
    assert g["--disk-latency-ms"].attrs()["default"] == DEFAULT_DISK_LATENCY_MS
    assert g["--depths"].attrs()["default"] == DEFAULT_DEPTHS
    assert g["--guest-vcpus"].attrs()["default"] == DEFAULT_VCPUS
    assert g["--results-mode"].attrs()["default"] == DEFAULT_DIR_MODE


def resolved(*args: str) -> SuiteOptions:
    """The options a run would use for this command line (parsed by the suite's own parser)."""
    parser = Parser(_ispytest=True)
    options.pytest_addoption(parser)
    return SuiteOptions.from_config(SimpleNamespace(option=parser.parse(list(args))))  # type: ignore[arg-type]


Check = Callable[[SuiteOptions], object]


@pytest.mark.parametrize(("args", "got", "want"), [
    ((), lambda o: o.window_s, LIBVIRT.window_s),
    (("--hypervisor", "vsphere"), lambda o: o.window_s, VSPHERE.window_s),
    ((), lambda o: o.repeats_for("buffered-direct"), DEFAULT_REPEATS["buffered-direct"]),
    ((), lambda o: o.repeats_for("queue-depth"), DEFAULT_REPEATS_OTHERWISE),
    ((), lambda o: o.controllers, LIBVIRT.controllers),
    (("--hypervisor", "vsphere"), lambda o: o.controllers, VSPHERE.controllers),
    ((), lambda o: o.libvirt_uri, DEFAULT_LIBVIRT_URI),
    ((), lambda o: o.host_dir, str(DEFAULT_HOST_DIR)),
    ((), lambda o: o.machine, DEFAULT_MACHINE),
    ((), lambda o: o.disk_latency_ms, DEFAULT_DISK_LATENCY_MS),
    ((), lambda o: o.option(DEPTHS), DEFAULT_DEPTHS),
    ((), lambda o: o.boot_timeout_s, EMBEDDED_BOOT_TIMEOUT_S),
    (("--image", "/nonexistent/x.qcow2"), lambda o: o.boot_timeout_s, IMAGE_BOOT_TIMEOUT_S),
    ((), lambda o: o.guest_memory_mib, EMBEDDED_MEMORY_MIB),
    (("--image", "/nonexistent/x.qcow2"), lambda o: o.guest_memory_mib, IMAGE_MEMORY_MIB),
    ((), lambda o: o.guest_vcpus, DEFAULT_VCPUS),
    ((), lambda o: o.store_url, default_url()),
    ((), lambda o: o.results_mode, DEFAULT_DIR_MODE),
    ((), lambda o: o.results_dir.parent, (Path.cwd() / DEFAULT_PARENT).resolve()),
    ((), lambda o: o.option(STALL_S), DEFAULT_STALL_S),
    ((), lambda o: o.option(STALL_HOLD_S), DEFAULT_HOLD_S),
])
def test_a_run_without_the_option_uses_the_constant(args: tuple[str, ...], got: Check, want: object) -> None:
    assert got(resolved(*args)) == want


def test_the_issues_two_wrong_defaults_are_gone() -> None:
    """The help said 3 s and 3 repeats while the code used 2 and 2."""
    g = group()
    assert "default: 3 on libvirt" not in rendered_help(g["--window-s"])
    assert "buffered-direct 3" not in rendered_help(g["--repeats"])
