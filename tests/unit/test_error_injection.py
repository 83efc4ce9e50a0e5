"""The error-propagation rule's pieces that need no guest: the blkdebug injector's QMP commands (a
scripted monitor answering as QEMU 7.2 did), the scratch disks' error policy in the domain, fio's
new options, the guest tools' commands and the bound on a run that hangs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.libvirt_python import REASON

pytest.importorskip("libvirt", reason=REASON)

from guest.tools.devmapper import MirrorUnavailable, SwallowingMirror
from guest.tools.error_propagation import MARK_END, ErrorPath
from guest.tools.fio import BackgroundFio, FioJob
from guest.tools.tool import GuestTools
from hypervisors.base import ErrorPolicyContradicted, Guest, InjectionUnavailable
from hypervisors.libvirt.backend import LibvirtBackend
from hypervisors.libvirt.controllers import (
    LIBVIRT_FORMAT_OPTIONS,
    disk_devices,
    format_options,
)
from hypervisors.libvirt.error_propagation import BlkdebugInjector
from model.device_limits import ConfiguredLimits
from model.disks import suite_disks
from model.error_injection import InjectedRange, Timeouts
from model.errors import HypervisorError
from model.types import AttachedDisk, DiskSpec, GuestDiskId, SshEndpoint
from tests.unit.fake_shell import FakeShell

#: x-debug-query-block-graph of the suite's guest with virtio-blk and virtio-scsi (QEMU 7.2, libvirt 9.0):
#: the scratch disks ua-vioc-dut01 (virtio-blk: its backend is named by its qdev path) and ua-vioc-dut03.
GRAPH = {"nodes": [{"name": "libvirt-1-format", "type": "block-driver", "id": 4},
                   {"name": "libvirt-1-storage", "type": "block-driver", "id": 10},
                   {"name": "libvirt-2-format", "type": "block-driver", "id": 2},
                   {"name": "libvirt-2-storage", "type": "block-driver", "id": 9},
                   {"name": "vioc-node0", "type": "block-driver", "id": 6},
                   {"name": "ua-vioc-dut03", "type": "block-backend", "id": 3},
                   {"name": "/machine/peripheral/ua-vioc-dut01/virtio-backend", "type": "block-backend", "id": 1},
                   {"name": "/machine/peripheral/ua-vioc-dut00/virtio-backend", "type": "block-backend", "id": 5}],
         "edges": [{"parent": 4, "child": 10, "name": "file"}, {"parent": 2, "child": 9, "name": "file"},
                   {"parent": 3, "child": 4, "name": "root"}, {"parent": 1, "child": 2, "name": "root"},
                   {"parent": 5, "child": 6, "name": "root"}]}
NODES = [{"node-name": "libvirt-1-format", "drv": "raw"}, {"node-name": "libvirt-1-storage", "drv": "file"},
         {"node-name": "libvirt-2-format", "drv": "raw"}, {"node-name": "libvirt-2-storage", "drv": "file"},
         {"node-name": "vioc-node0", "drv": "null-co"}]


class FakeMonitor:
    """A QMP monitor that answers the injector's commands and keeps them."""

    def __init__(self, device: str, policy: str = "report", refuse: str = "") -> None:
        self.device = device
        self.domain = "vioconform-7"
        self.policy = policy
        self.refuse = refuse
        self.sent: list[dict[str, Any]] = []

    def execute(self, command: dict[str, object]) -> dict[str, Any]:
        self.sent.append(command)
        name = command["execute"]
        if name == self.refuse:
            return {"error": {"class": "GenericError", "desc": f"{name} refused"}}
        if name == "x-debug-query-block-graph":
            return {"return": GRAPH}
        if name == "query-named-block-nodes":
            return {"return": NODES}
        if name == "qom-get":
            return {"return": self.policy}
        return {"return": {}}


def _injector(device: str = "ua-vioc-dut03", **kw: Any) -> tuple[BlkdebugInjector, FakeMonitor]:
    qmp = FakeMonitor(device, **kw)
    return BlkdebugInjector(qmp, dict(LIBVIRT_FORMAT_OPTIONS)), qmp  # type: ignore[arg-type]


def _changes(qmp: FakeMonitor) -> list[dict[str, Any]]:
    return [c for c in qmp.sent if c["execute"] in ("blockdev-add", "blockdev-reopen", "blockdev-del")]


def test_a_range_is_a_blkdebug_node_put_under_the_format_node_and_taken_away() -> None:
    inj, qmp = _injector()
    inj.inject(InjectedRange(2116, 16, "read"))
    add, reopen = _changes(qmp)
    args = add["arguments"]
    assert (args["driver"], args["image"], args["node-name"]) == ("blkdebug", "libvirt-1-storage",
                                                                  "vioc-errinj-ua-vioc-dut03-1")
    assert args["inject-error"][0] == {"event": "none", "iotype": "read", "errno": 5, "sector": 2116}
    assert [r["sector"] for r in args["inject-error"]] == list(range(2116, 2132))
    assert reopen["arguments"]["options"] == [{"driver": "raw", "read-only": False, "discard": "unmap", "cache": {
        "direct": True, "no-flush": False}, "node-name": "libvirt-1-format", "file": "vioc-errinj-ua-vioc-dut03-1"}]
    qmp.sent.clear()
    inj.heal()
    back, delete = _changes(qmp)
    assert back["arguments"]["options"][0]["file"] == "libvirt-1-storage"
    assert delete["arguments"] == {"node-name": "vioc-errinj-ua-vioc-dut03-1"}
    qmp.sent.clear()
    inj.heal()  # nothing in place: nothing sent
    assert qmp.sent == []


def test_virtio_blk_is_found_by_its_backend_and_a_second_range_replaces_the_first() -> None:
    inj, qmp = _injector("ua-vioc-dut01")
    inj.inject(InjectedRange(2116, 16, "read"))
    inj.inject(InjectedRange(2116, 16, "write"))
    names = [(c["execute"], c["arguments"].get("node-name") or c["arguments"]["options"][0]["file"])
             for c in _changes(qmp)]
    assert names == [("blockdev-add", "vioc-errinj-ua-vioc-dut01-1"), ("blockdev-reopen", "vioc-errinj-ua-vioc-dut01-1"),
                     ("blockdev-reopen", "libvirt-2-storage"), ("blockdev-del", "vioc-errinj-ua-vioc-dut01-1"),
                     ("blockdev-add", "vioc-errinj-ua-vioc-dut01-2"), ("blockdev-reopen", "vioc-errinj-ua-vioc-dut01-2")]


def test_a_refused_reopen_leaves_no_node_behind() -> None:
    inj, qmp = _injector(refuse="blockdev-reopen")
    with pytest.raises(HypervisorError, match="blockdev-reopen on vioconform-7 failed: blockdev-reopen refused"):
        inj.inject(InjectedRange(2116, 16, "read"))
    assert inj.node is not None  # the heal's reopen was refused too: the node is kept for the next heal
    qmp.refuse = ""
    inj.heal()
    assert _changes(qmp)[-1] == {"execute": "blockdev-del", "arguments": {"node-name": "vioc-errinj-ua-vioc-dut03-1"}}


def test_a_disk_without_a_file_under_a_raw_node_cannot_be_made_to_fail() -> None:
    inj, _ = _injector("ua-vioc-dut00")  # the null-co disk under test
    with pytest.raises(InjectionUnavailable, match="vioc-node0 is a null-co node with no file node under it"):
        inj.inject(InjectedRange(2116, 16, "read"))


def test_a_device_that_keeps_errors_from_the_guest_is_the_hypervisors_answer() -> None:
    """QEMU answering ``ignore`` although the suite configured ``report`` is the hypervisor under test
    contradicting its configuration: ErrorPolicyContradicted, which the rule turns into its verdict
    (before, a HypervisorError asking "was the domain changed?": an ERROR, exit 10)."""
    inj, qmp = _injector(policy="ignore")
    with pytest.raises(ErrorPolicyContradicted) as e:
        inj.inject(InjectedRange(2116, 16, "write"))
    assert _changes(qmp) == []
    policy = e.value.policy
    assert (policy.device, dict(policy.found), policy.withheld) == (
        "ua-vioc-dut03", {"rerror": "ignore", "werror": "ignore"}, ("rerror", "werror"))
    assert dict(policy.configured) == {"rerror": "report", "werror": "report"}
    assert "was the domain changed" not in str(e.value)
    assert str(e.value) == ("device ua-vioc-dut03 does not report errors to the guest: rerror=ignore, werror=ignore "
                            "(QMP qom-get /machine/peripheral/ua-vioc-dut03) where the suite configured "
                            "rerror=report, werror=report")


def test_every_scratch_disk_reports_errors(tmp_path: Path) -> None:
    controllers = ["virtio-blk", "virtio-scsi", "megasas-gen2", "nvme", "ahci", "ide"]
    specs = suite_disks(controllers)
    for s in specs:
        (tmp_path / f"dut{s.index}.img").write_bytes(b"")
    xml, args = disk_devices(specs, tmp_path)
    drivers = [x for x in xml if x.startswith("<disk")]
    assert drivers and all("error_policy='report' rerror_policy='report'" in x for x in drivers)
    devices = [json.loads(v) for f, v in zip(args[::2], args[1::2], strict=False) if f == "-device"]
    disks = {d["id"]: d for d in devices if "drive" in d}
    # the QEMU-argument disks: every null-co disk under test, megasas-gen2's and NVMe's scratch disks
    report, none = ("report", "report"), (None, None)
    assert {k: (d.get("rerror"), d.get("werror")) for k, d in disks.items()} == {
        "ua-vioc-dut00": report, "ua-vioc-dut02": report, "ua-vioc-dut04": report, "ua-vioc-dut05": report,
        "ua-vioc-dut06": none, "ua-vioc-dut07": none,  # nvme has no error policy
        "ua-vioc-dut08": report, "ua-vioc-dut10": report}
    blockdevs = [json.loads(v) for f, v in zip(args[::2], args[1::2], strict=False) if f == "-blockdev"]
    assert {b["file"]["node-name"] for b in blockdevs if "file" in b} == {"vioc-node5-file", "vioc-node7-file"}


def test_a_controller_whose_error_path_kills_the_guest_is_never_made_to_fail() -> None:
    backend = LibvirtBackend.__new__(LibvirtBackend)
    spec = DiskSpec("lsi53c895a", 1, backing="file", role="scratch")
    disk = AttachedDisk(spec, "ua-vioc-dut01", ConfiguredLimits(queue_depth=16), GuestDiskId("serial", spec.serial))
    guest = Guest("vioconform-7", SshEndpoint("127.0.0.1", 22, "root", Path("key"), "ssh-ed25519 AAAA"), (disk,), "tcg")
    with pytest.raises(InjectionUnavailable, match=r"^on lsi53c895a a failed read is never completed in the guest; "
                                                   r"the abort at its 30 s command timeout crashes QEMU 7.2"):
        backend.error_injector(guest, disk)


def test_the_format_options_the_reopen_repeats() -> None:
    assert format_options(DiskSpec("virtio-scsi", 1, backing="file")) == LIBVIRT_FORMAT_OPTIONS
    assert format_options(DiskSpec("nvme", 1, backing="file")) == {
        "driver": "raw", "cache": {"direct": True, "no-flush": False}, "discard": "unmap"}
    assert format_options(DiskSpec("virtio-scsi", 0)) is None  # null-co: nothing under it


def test_fio_goes_on_past_errors_from_an_offset_and_verifies() -> None:
    job = FioJob("e", rw="read:4096", offset_bytes=1 << 20, continue_on_error=True, io_bytes=65536, verify="crc32c")
    args = job.args("/dev/sdb")
    assert {"--offset=1048576", "--continue_on_error=all", "--error_dump=1", "--verify=crc32c", "--rw=read:4096"} <= set(args)
    # past every errno a failed block request becomes, for reads, writes and verification: NVMe's is ENODATA (61)
    ignore = next(a for a in args if a.startswith("--ignore_error="))
    assert ignore.partition("=")[2].split(",") == ["5:61:121:52:67:110:28:84:12:16:95"] * 3
    assert not {a for a in FioJob("q").args("/dev/sdb") if a.startswith(("--offset", "--continue", "--verify"))}


def test_a_background_fio_is_waited_for_and_not_stopped() -> None:
    shell = FakeShell(handlers=[(r"^read up _", lambda c: "still-running\n")])
    run = BackgroundFio(shell, FioJob("e"), "/tmp/w/e")
    assert run.wait(30) is False
    assert "kill" not in shell.commands[0] and "end=$((${up%.*} + 31))" in shell.commands[0]


def test_the_kernel_log_is_read_from_a_mark_kept_in_the_guest() -> None:
    shell = FakeShell(has={"dmesg"}, handlers=[
        (r"^for f in /sys/block/sdb/device/timeout ", lambda c: "30\n-\n-\n"),
        (r"^for f in /sys/block/nvme0n1/device/timeout ", lambda c: "-\n30000\n5\n"),
        (r"^cat /tmp/vioc-kernel-log.mark", lambda c: f"[ 1.0] last\n{MARK_END}\n[ 1.0] last\n[ 2.0] new\n")])
    tool = GuestTools(shell).get(ErrorPath)
    assert tool.timeouts("sdb") == Timeouts(30.0, None, None)
    assert tool.timeouts("nvme0n1") == Timeouts(None, 30000, 5)
    assert tool.mark_command() == "dmesg | tail -n 1 > /tmp/vioc-kernel-log.mark"
    assert tool.log() == ("[ 1.0] last", "[ 1.0] last\n[ 2.0] new\n")


def test_the_swallowing_mirror_is_built_over_the_disk_and_a_ram_disk_and_removed() -> None:
    shell = FakeShell(has={"dmsetup", "modprobe"}, handlers=[
        (r"^\[ -b /dev/ram0 \]", lambda c: (1, "", "")), (r"^modprobe ", lambda c: ""),
        (r"dmsetup --noudevsync (create|remove)", lambda c: "")])
    dm = GuestTools(shell).get(SwallowingMirror)
    assert dm.create("sdb", (1 << 20) + 126976, "vioc-swallow") == "/dev/mapper/vioc-swallow"
    assert shell.commands[-3:] == [
        "modprobe dm_mirror 2>&1", "modprobe brd rd_nr=1 rd_size=1536 2>&1",
        ("DM_DISABLE_UDEV=1 dmsetup --noudevsync create vioc-swallow --table '0 3072 mirror core 2 1024 nosync 2 "
        "/dev/sdb 0 /dev/ram0 0'")]
    dm.remove("vioc-swallow")
    assert "rmmod brd" in shell.commands[-1]
    with pytest.raises(ValueError, match="not a block device name"):
        dm.create("sdb; reboot", 4096, "x")


def test_a_ram_disk_the_suite_did_not_make_is_never_a_leg() -> None:
    shell = FakeShell(has={"dmsetup", "modprobe"}, handlers=[(r"^\[ -b /dev/ram0 \]", lambda c: "")])
    with pytest.raises(RuntimeError, match="/dev/ram0 exists in the guest already"):
        GuestTools(shell).get(SwallowingMirror).create("sdb", 4096, "vioc-swallow")


def test_a_kernel_without_the_mirror_target_cannot_carry_the_fault() -> None:
    shell = FakeShell(has={"dmsetup", "modprobe"}, handlers=[
        (r"^\[ -b /dev/ram0 \]", lambda c: (1, "", "")),
        (r"^modprobe dm_mirror", lambda c: (1, "modprobe: module dm_mirror not found in modules.dep\n", ""))])
    with pytest.raises(MirrorUnavailable, match=r"cannot load dm_mirror \(modprobe said: modprobe: module dm_mirror "
                                                r"not found in modules.dep\)"):
        GuestTools(shell).get(SwallowingMirror).create("sdb", 4096, "vioc-swallow")


def _uptime() -> float:
    return float(Path("/proc/uptime").read_text().split()[0])


@pytest.mark.parametrize("recent, waits", [(8, False), (9, True)])
def test_fio_waits_until_the_kernel_can_print_every_error_line(tmp_path: Path, recent: int, waits: bool) -> None:
    """mark_command(2), run by busybox's sh and awk (the embedded guest's) on a kernel log with ``recent``
    error lines stamped 1 s ago: 8 leave room for 2 more (at most 10 in 5 s), 9 make it wait until
    they are 5.5 s old (here: cut short by a 1-try loop, so the test takes 0.5 s)."""
    stamp = _uptime() - 1.0
    lines = [f"[{stamp:12.6f}] I/O error, dev sdb, sector 2112 op 0x0:(READ) flags 0x0" for _ in range(recent)]
    lines += [f"[{stamp - 10:12.6f}] I/O error, dev sdb, sector 2128 op 0x0:(READ) flags 0x0"]  # older: not counted
    (tmp_path / "log").write_text("\n".join(lines) + "\n")
    command = ErrorPath.mark_command(None, 2).replace("/tmp/vioc-kernel-log.mark", str(tmp_path / "mark"))  # type: ignore[arg-type]
    # this log instead of the host's (a function: busybox's sh runs its own dmesg before one on PATH)
    command = f"dmesg() {{ cat {tmp_path / 'log'}; }}; " + command.replace("-lt 12 ]", "-lt 1 ]") + "; echo waited=$i"
    said = subprocess.run(["busybox", "sh", "-c", command], capture_output=True, text=True, check=True).stdout
    assert said.strip() == f"waited={int(waits)}"
    assert (tmp_path / "mark").read_text().startswith("[")
