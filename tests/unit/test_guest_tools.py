"""The guest tools against a scripted shell, for what a real guest cannot show: a program
missing, a guest that has one way of doing a thing and not the other, a path made up by a caller.
The tools' commands themselves run in real guests in tests/e2e (every suite run)."""

from __future__ import annotations

import pytest

from guest.tools.devmapper import SwallowingMirror
from guest.tools.diskstats import InflightSampler, ProcDiskStats, SleepInflightSampler, UsleepInflightSampler
from guest.tools.ext4 import Ext4
from guest.tools.fio import Fio, FioOutput
from guest.tools.fio_push import FioIdentity
from guest.tools.partitioning import FdiskPartitioning, Partitioning, SfdiskPartitioning
from guest.tools.sysfs import Sysfs
from guest.tools.tool import GuestTools, ToolMissing
from model.errors import FioError, ParseError
from model.faults import FAULTS
from model.parse.fio_json import parse_fio_run
from model.parse.proc_interrupts import parse_cpu_list
from suites.needs import needed
from tests.unit.fake_shell import DATA, FakeShell, fake_disk


def test_programs_are_looked_up_once_per_guest_and_again_after_forget() -> None:
    """The first lookup asks for every program a tool names, in one command: each later tool needs none
    (a command is a round trip, 0.3 s through a non-root login's sudo under TCG)."""
    shell = FakeShell(has={"fdisk", "blockdev", "usleep"})
    tools = GuestTools(shell, "vioconform-7")
    assert tools.get(Partitioning) is tools.get(Partitioning)
    tools.get(ProcDiskStats)  # needs no program: no lookup
    tools.get(InflightSampler)
    assert shell.lookups() == 1  # fdisk and blockdev, usleep and sleep, and every other tool's, together
    asked = shell.commands[0].partition(" in ")[2].partition(";")[0].split()
    assert all(p in asked for p in ("sfdisk", "usleep", "sleep", *Ext4.programs, *SwallowingMirror.programs))
    assert type(tools.get(InflightSampler)) is UsleepInflightSampler
    tools.forget()  # a --guest-setup command ran
    tools.get(Partitioning)
    assert shell.lookups() == 2


def test_the_images_fio_is_found_once_and_kept_after_forget() -> None:
    """Which fio runs is decided once per guest: a run uses one fio throughout."""
    shell = FakeShell(has={"fio"})
    tools = GuestTools(shell, "vioconform-7", fio_binary=lambda: pytest.fail("built a static fio for a guest with one"))
    fio = tools.get(Fio)
    assert fio is tools.get(Fio)
    assert fio.identity() == FioIdentity("fio-3.33", "image", "/usr/bin/fio")
    assert fio.identity().properties() == {"fio_version": "fio-3.33", "fio_origin": "image"}
    tools.forget()
    assert tools.get(Fio).identity().path == "/usr/bin/fio"
    assert shell.commands == ["command -v fio || true", "/usr/bin/fio --version"]


def test_the_first_variant_the_guest_has_is_used() -> None:
    """Busybox has usleep; a full distribution has only a fractional sleep."""
    assert type(GuestTools(FakeShell(has={"usleep", "sleep"})).get(InflightSampler)) is UsleepInflightSampler
    shell = FakeShell(has={"sleep"}, handlers=[(r"while \[ -e", lambda c: "")])
    sampler = GuestTools(shell).get(InflightSampler)
    assert type(sampler) is SleepInflightSampler
    sampler.start("vda", "/run/vioconform", "qd32")
    assert "sleep 0.1; done" in shell.commands[-1] and "usleep" not in shell.commands[-1]
    # a variant asked for by name is that variant, not its interface's first choice
    assert type(GuestTools(FakeShell(has={"usleep", "sleep"})).get(SleepInflightSampler)) is SleepInflightSampler


def test_a_missing_program_is_named_with_the_guest_and_the_remedy() -> None:
    with pytest.raises(ToolMissing) as e:
        GuestTools(FakeShell(has={"blockdev"}), "vioconform-7").get(Partitioning)
    assert str(e.value) == ("sfdisk, fdisk are missing in guest vioconform-7 (`command -v` found no sfdisk, fdisk; the "
                            "partitioning tool runs sfdisk, blockdev; or fdisk, blockdev): install sfdisk and blockdev "
                            "(util-linux; Debian's fdisk package), or busybox with its fdisk and blockdev applets")
    assert e.value.missing == ("sfdisk", "fdisk") and e.value.tool == "partitioning"
    # busybox has fdisk and no sfdisk; a systemd distribution has util-linux's sfdisk (and fdisk)
    assert type(GuestTools(FakeShell(has={"fdisk", "blockdev"})).get(Partitioning)) is FdiskPartitioning
    assert type(GuestTools(FakeShell(has={"sfdisk", "fdisk", "blockdev"})).get(Partitioning)) is SfdiskPartitioning
    with pytest.raises(ToolMissing, match=r"^usleep, sleep are missing in guest g \(`command -v` found no usleep, "
                                          r"sleep; the in-flight sampler tool runs usleep; or sleep\): the guest "
                                          r"needs usleep \(busybox\)"):
        GuestTools(FakeShell(), "g").get(InflightSampler)


def test_sysfs_takes_names_and_values_never_commands() -> None:
    shell = FakeShell(handlers=[(r"^echo ", lambda c: "")])
    sysfs = GuestTools(shell).get(Sysfs)
    sysfs.write("sdb", "queue/write_cache", "write through")
    assert shell.commands[-1] == "echo 'write through' > /sys/block/sdb/queue/write_cache"
    sysfs.write("nvme0n1", "queue/max_sectors_kb", "64; reboot")
    assert shell.commands[-1] == "echo '64; reboot' > /sys/block/nvme0n1/queue/max_sectors_kb"
    sent = len(shell.commands)
    for disk, path in (("sdb", "../../../proc/sys/vm/drop_caches"), ("sdb", "queue/x; reboot"),
                       ("sdb; reboot", "queue/nomerges"), ("sdb", "/queue/nomerges")):
        with pytest.raises(ValueError, match="not a"):
            sysfs.write(disk, path, "1")
    assert len(shell.commands) == sent


def test_every_fault_is_a_sysfs_setting_the_tool_accepts() -> None:
    shell = FakeShell(handlers=[(r"^echo ", lambda c: "")])
    sysfs = GuestTools(shell).get(Sysfs)
    for fault in FAULTS.values():
        if fault.setting is not None:
            sysfs.write("sdb", fault.setting.path, fault.setting.value)
    assert shell.commands == ["echo 1 > /sys/block/sdb/device/queue_depth",
                              "echo 64 > /sys/block/sdb/queue/max_sectors_kb",
                              "echo 'write through' > /sys/block/sdb/queue/write_cache",
                              "echo 'write through' > /sys/block/sdb/queue/write_cache",  # wce-lie
                              "echo 0 > /sys/block/sdb/queue/read_ahead_kb",
                              "echo 5000 > /sys/block/sdb/queue/io_timeout",
                              "echo 0 > /sys/block/sdb/queue/discard_max_bytes"]


def test_fio_stopped_by_the_suite_is_a_normal_end_and_128_otherwise_is_fios_error() -> None:
    """Recorded: fio 3.33 in the guest, SIGINT after 4 s: "fio: terminating on signal 2", its JSON, exit 128."""
    stdout = (DATA / "guest" / "fio-qd4-sigint.json").read_text()
    stopped = FioOutput(stdout, "", 128, stopped=True)
    result = parse_fio_run(stopped.stdout, stopped.stderr, stopped.status, "fio qd4 on vda")
    assert result.jobs[0].read.io_count == 1692 and result.jobs[0].read.runtime_ms == 3142
    with pytest.raises(FioError, match=r"exited with status 128; fio said: fio: terminating on signal 2"):
        on_its_own = FioOutput(stdout, "", 128)
        parse_fio_run(on_its_own.stdout, on_its_own.stderr, on_its_own.status, "fio qd4 on vda")
    assert FioOutput("", "", 1, stopped=True).status == 1  # a real failure stays one


def test_cpu_lists_in_the_kernels_forms() -> None:
    """The embedded guest has 2 vCPUs ("0-1"); other guests have gaps and single CPUs."""
    assert parse_cpu_list("0-1\n") == [0, 1]
    assert parse_cpu_list("0,2-3,7") == [0, 2, 3, 7]
    with pytest.raises(ParseError, match="'x' is not a CPU number"):
        parse_cpu_list("0,x")


def test_a_rule_without_its_program_skips_with_the_reason() -> None:
    """Only a fake guest can lack fdisk: the embedded guest's busybox shell runs its applets
    (fdisk, mke2fs, usleep, ...) even with their /bin links removed. (fio, a file of its own,
    missing is a set-up error: tests/e2e/test_bad_input.py.)"""
    disk = fake_disk(FakeShell(has={"blockdev"}))
    with pytest.raises(pytest.skip.Exception, match=r"^alignment cannot run on this guest: sfdisk, fdisk are missing in "
                                                    r"guest vioconform-7 \(`command -v` found no sfdisk, fdisk;"):
        needed(disk, Partitioning, "alignment")
