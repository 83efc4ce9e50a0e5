"""The data-integrity rule's guest and host sides against a scripted guest and a backing store built in
the test: the fio arguments (as the embedded guest's fio echoed them in a recorded run), device-mapper's
commands, the lba-shift target removed whatever happens, fio's own failures kept apart from the
verdict, and the backends that can and cannot read a disk's backing store."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.libvirt_python import REASON

pytest.importorskip("libvirt", reason=REASON)

from guest.tools.data_integrity import READBACK_JOB, DeviceMapper, IntegrityWrites
from guest.tools.tool import GuestTools
from hypervisors.base import BackingUnreadable
from hypervisors.libvirt.backend import LibvirtBackend
from hypervisors.libvirt.hostfiles import BackingFile, LocalFiles
from model.device_limits import ConfiguredLimits
from model.errors import FioError, HypervisorError
from model.faults import FAULTS, LBA_SHIFT_SECTORS
from model.rules.data_integrity import PLAN, Region
from model.types import AttachedDisk, DiskSpec, GuestDiskId
from suites.data_integrity import SHIFT_TARGET, once
from suites.needs import needed
from tests.model.test_model_integrity import window_of, written
from tests.unit.fake_shell import DATA, FakeBackend, FakeShell, fake_disk

RECORDED = DATA / "guest" / "fio-integrity-vdb.json"
#: the run id of the recorded run (its passes' verify_pattern)
RECORDED_RUN = 0x64DFEE39


def test_the_fio_arguments_are_those_the_guests_fio_ran() -> None:
    """fio echoes each job's options in its JSON: the recorded run's are what args() builds for its run id."""
    recorded = json.loads(RECORDED.read_text())
    args = IntegrityWrites.args("/dev/vdb", PLAN, Region(), RECORDED_RUN)
    sections: list[dict[str, str]] = [{}]  # the global options, then one per job
    flags: list[set[str]] = [set()]  # options without a value, which fio does not echo
    for a in args[1:]:
        key, eq, value = a[2:].partition("=")
        if key == "name":
            sections.append({})
            flags.append(set())
        if eq:
            sections[-1][key] = value
        else:
            flags[-1].add(key)
    assert recorded["global options"] == {k: v for k, v in sections[0].items() if k != "output-format"}
    assert flags[0] == {"thread"} and all(f == {"stonewall"} for f in flags[1:])
    assert [j["jobname"] for j in recorded["jobs"]] == [p.name for p in PLAN] + [READBACK_JOB]
    assert [j["job options"] for j in recorded["jobs"]] == sections[1:]


class Guest:
    """A scripted guest for once(): the page cache, fio (answering the recorded JSON, and noting the run
    id and target it was given), dmsetup; ``fio_fails`` makes the fio command itself fail (the SSH link lost)."""

    def __init__(self, fio_fails: bool = False, readback_error: int = 0, pass_error: int = 0) -> None:
        self.run_id = 0
        self.target = ""
        self.fio_fails = fio_fails
        self.readback_error, self.pass_error = readback_error, pass_error
        self.shell = FakeShell(has={"fio", "dmsetup"}, handlers=[
            (r"drop_caches", lambda c: ""),
            (r"--output-format=json --filename=", self.fio),
            (r"dmsetup create", lambda c: "dm-0\n"),
            (r"dmsetup remove", lambda c: ""),
            (r"/proc/misc", lambda c: "vioc-dm-ok\n"),
        ])

    def fio(self, command: str) -> str:
        if self.fio_fails:
            raise OSError("the SSH connection to the guest dropped")
        self.run_id = int(re.search(r"--verify_pattern=0x([0-9a-f]{8})", command).group(1), 16)  # type: ignore[union-attr]
        self.target = re.search(r"--filename=(\S+)", command).group(1)  # type: ignore[union-attr]
        out = json.loads(RECORDED.read_text())
        out["jobs"][-1]["error"] = self.readback_error
        out["jobs"][1]["error"] = self.pass_error
        return json.dumps(out)


class Store:
    """The backing file as the guest's writes left it: the plan of the run id the guest's fio was given."""

    where = "the backing file test.img on this machine"

    def __init__(self, guest: Guest, shift_sectors: int = 0) -> None:
        self.guest, self.shift = guest, shift_sectors

    def read(self, offset_bytes: int, length_bytes: int) -> bytes:
        r = Region()
        if length_bytes == r.guard_bytes:  # the guards, before the run: a fresh disk
            return bytes(length_bytes)
        assert (offset_bytes, length_bytes) == (r.window_start_bytes, r.window_bytes)
        return window_of(written(self.guest.run_id, self.shift))


def _mapper(guest: Guest) -> DeviceMapper:
    return GuestTools(guest.shell).get(DeviceMapper)


def test_a_healthy_run_passes_and_keeps_fios_output(tmp_path: Path) -> None:
    guest = Guest()
    disk = fake_disk(guest.shell)
    v = once(disk, Store(guest), None, tmp_path)
    assert v.passed, v.explain()
    assert guest.target == "/dev/vda" and v.properties["run_id"] == f"{guest.run_id:08x}"
    assert (tmp_path / "data-integrity-vda.fio.json").is_file()
    assert not any("dmsetup" in c for c in guest.shell.commands)


def test_lba_shift_writes_through_the_target_fails_and_removes_it(tmp_path: Path) -> None:
    guest = Guest()
    v = once(fake_disk(guest.shell), Store(guest, LBA_SHIFT_SECTORS), _mapper(guest), tmp_path)
    assert not v.passed and v.properties["host_shift_sectors"] == LBA_SHIFT_SECTORS
    assert guest.target == "/dev/dm-0"
    create = next(c for c in guest.shell.commands if "dmsetup create" in c)
    assert f"dmsetup create {SHIFT_TARGET} --table \"0 $((s - 8)) linear /dev/vda 8\"" in create
    assert guest.shell.commands[-1] == f"dmsetup remove --retry {SHIFT_TARGET}"


def test_the_target_goes_also_when_the_run_fails(tmp_path: Path) -> None:
    guest = Guest(fio_fails=True)
    with pytest.raises(OSError, match="dropped"):
        once(fake_disk(guest.shell), Store(guest), _mapper(guest), tmp_path)
    assert guest.shell.commands[-1] == f"dmsetup remove --retry {SHIFT_TARGET}"


def test_a_pass_that_failed_is_fios_error_and_a_failed_verify_is_the_verdicts(tmp_path: Path) -> None:
    guest = Guest(pass_error=5)
    with pytest.raises(FioError, match=r"fio data-integrity on /dev/vda failed \(job rand4k: error 5\)"):
        once(fake_disk(guest.shell), Store(guest), None, tmp_path)
    guest = Guest(readback_error=84)  # EILSEQ: what it read failed to verify
    v = once(fake_disk(guest.shell), Store(guest), None, tmp_path)
    assert not v.passed and "fio's read-back ended with its verify error and named no sector" in v.explain()


def test_a_guest_without_dmsetup_or_device_mapper_skips_naming_what_it_lacks() -> None:
    disk = fake_disk(FakeShell(has={"fio"}))
    with pytest.raises(pytest.skip.Exception, match=r"^data-integrity with --inject lba-shift cannot run on this "
                                                    r"guest: dmsetup is missing in guest vioconform-7"):
        needed(disk, DeviceMapper, "data-integrity with --inject lba-shift")
    shell = FakeShell(has={"dmsetup"}, handlers=[(r"/proc/misc", lambda c: "modprobe: module dm_mod not found\n")])
    said = GuestTools(shell).get(DeviceMapper).missing_module()
    assert said == ("the guest's kernel has no device-mapper (module dm_mod is not loaded, not built in, and modprobe "
                    "said: modprobe: module dm_mod not found)")
    with pytest.raises(ValueError, match="not a device-mapper name"):
        GuestTools(shell).get(DeviceMapper).create_linear("x; reboot", "vda", 8)
    assert FAULTS["lba-shift"].rule == "data-integrity" and FAULTS["lba-shift"].setting is None


def _attached(backing: str) -> AttachedDisk:
    spec = DiskSpec("virtio-blk", 1, backing=backing, role="scratch")
    return AttachedDisk(spec, "vioc-dut1", ConfiguredLimits(queue_depth=None), GuestDiskId("serial", spec.serial))


def test_who_can_read_a_backing_store() -> None:
    disk = fake_disk(FakeShell())
    with pytest.raises(BackingUnreadable, match="the fake backend cannot read a disk's backing store"):
        FakeBackend().backing_store(disk.guest, disk.attached)
    # the latency disk keeps no data (the libvirt backend says so before it looks for a file)
    with pytest.raises(BackingUnreadable, match="virtio-blk:latency5ms is a latency disk, not file-backed"):
        LibvirtBackend.backing_store(None, disk.guest, _attached("latency"))  # type: ignore[arg-type]


def test_the_backing_file_is_read_where_the_disk_says(tmp_path: Path) -> None:
    path = tmp_path / "dut1.img"
    path.write_bytes(b"a" * 512 + b"b" * 512)
    store = BackingFile(LocalFiles(), path)
    assert store.read(512, 4) == b"bbbb" and store.where == f"the backing file {path} on this machine"
    with pytest.raises(HypervisorError, match="4 bytes at 1020, not 8: the file is shorter than its disk"):
        store.read(1020, 8)
    with pytest.raises(HypervisorError, match="cannot read the backing file"):
        BackingFile(LocalFiles(), tmp_path / "gone.img").read(0, 1)
