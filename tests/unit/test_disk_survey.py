"""A disk under test is found and read in one guest command (guest/tools/disk_survey.py): run here by
real shells (dash, as Debian's /bin/sh, and busybox sh, as the embedded guest's) on this machine's
own disks under /sys/block, it gives the name, limits, kept settings and facts the sysfs and facts
tools give with a command each, and ``prepare_disk`` sets a disk up with it: one round trip where
there were three, and none for the kept settings before the disk's first rule."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from guest.tools.disk_survey import DiskSurvey
from guest.tools.facts import GuestFacts
from guest.tools.sysfs import Sysfs
from guest.tools.tool import GuestTools
from hypervisors.base import Guest
from measure.disk import prepare_disk
from measure.kept import kept_settings
from model.configuration import Configuration
from model.device_limits import ConfiguredLimits
from model.types import AttachedDisk, DiskSpec, GuestDiskId, SshEndpoint
from tests.unit.fake_shell import FakeBackend
from transport.ssh import CommandResult


def serials() -> list[tuple[str, str]]:
    """This machine's block devices that show a serial of one word in the kernel's own files."""
    found = []
    for d in sorted(Path("/sys/block").glob("*")):
        for f in ("serial", "device/serial"):
            words = (d / f).read_text(errors="replace").split() if (d / f).is_file() else []
            if len(words) == 1:
                found.append((d.name, words[0]))
                break
    return found


DISKS = serials()
SHELLS = [pytest.param(("dash", "-c"), id="dash"), pytest.param(("busybox", "sh", "-c"), id="busybox")]
needs_disk = pytest.mark.skipif(not DISKS, reason="no disk of this machine shows a serial under /sys/block")


class LocalShell:
    """The GuestShell protocol on this machine's shell, each command kept; ``path``: the PATH it runs with."""

    def __init__(self, argv: tuple[str, ...], path: str | None = None) -> None:
        if shutil.which(argv[0]) is None:
            pytest.skip(f"{argv[0]} is not installed")
        self.argv = argv
        self.env = {**os.environ, "PATH": path or os.environ.get("PATH", "/usr/bin:/bin")}
        self.commands: list[str] = []

    def run(self, command: str, check: bool = True, timeout_s: float = 300.0) -> CommandResult:
        self.commands.append(command)
        p = subprocess.run([*self.argv, command], capture_output=True, text=True, timeout=timeout_s, check=False,
                           env=self.env)
        return CommandResult(command, p.returncode, p.stdout, p.stderr, 0.0)


@needs_disk
@pytest.mark.parametrize("argv", SHELLS)
def test_one_command_finds_and_reads_the_disk_as_the_tools_do_one_by_one(argv: tuple[str, ...]) -> None:
    name, serial = DISKS[0]
    shell = LocalShell(argv)
    survey = GuestTools(shell).get(DiskSurvey).survey(serial)
    assert len(shell.commands) == 1
    apart = LocalShell(argv)
    tools = GuestTools(apart)
    assert survey.names == (tools.get(Sysfs).find_disk(serial),) == (name,)
    assert survey.limits == tools.get(Sysfs).limits(name)
    assert survey.facts == tools.get(GuestFacts).disk(name)
    assert survey.kept == tools.get(Sysfs).settings(name) and survey.kept
    assert len(apart.commands) == 4


@pytest.mark.parametrize("argv", SHELLS)
def test_a_serial_no_disk_has_is_found_on_no_disk_and_nothing_is_read(argv: tuple[str, ...]) -> None:
    survey = GuestTools(LocalShell(argv)).get(DiskSurvey).survey("vioc-no-such-serial")
    assert survey.names == () and survey.name is None and survey.limits is None and survey.facts is None
    assert survey.kept is None


@needs_disk
def test_a_disk_is_set_up_in_one_guest_command_before_fios_lookup(tmp_path: Path) -> None:
    name, serial = DISKS[0]
    fio = tmp_path / "fio"
    fio.write_text("#!/bin/sh\necho fio-3.33\n")
    fio.chmod(0o755)
    shell = LocalShell(("dash", "-c"), f"{tmp_path}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    guest = Guest("vioconform-7", SshEndpoint("127.0.0.1", 22, "root", Path("key"), "ssh-ed25519 AAAA"), (), "tcg")
    spec = DiskSpec("virtio-blk")
    attached = AttachedDisk(spec, name, ConfiguredLimits(queue_depth=256), GuestDiskId("serial", serial))
    disk = prepare_disk(guest, FakeBackend(), GuestTools(shell, guest.name), attached,
                        Configuration("libvirt", "virtio-blk"))
    set_up = [c for c in shell.commands if not c.startswith("command -v fio") and not c.endswith(" --version")]
    assert len(set_up) == 1, set_up
    assert disk.kernel_name == name and disk.limits.name == name and disk.probed_limits == disk.limits
    assert disk.boot_facts is not None and disk.boot_facts.name == name
    # the kept settings as the set-up read them: the first rule reads them only after it
    assert disk.kept == GuestTools(LocalShell(("dash", "-c"))).get(Sysfs).settings(name)
    before = len(shell.commands)
    with kept_settings([disk]):
        assert len(shell.commands) == before
