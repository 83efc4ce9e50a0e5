"""A reproducer bundle's files (fixtures/reproducer_files.py) and where a run points at it: the JUnit
property, the report's link, which tests get one."""

from __future__ import annotations

import json
import stat
import tarfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from fixtures.options import SuiteOptions
from fixtures.reproducer import _hotplug, wanted
from fixtures.reproducer_files import BundleInputs, Evidence, bundle_name, configuration, qemu_command, write_bundle
from hypervisors.base import Guest, HotplugUnavailable, HypervisorBackend
from measure.disk import GuestDisk
from model import secret
from model.configuration import Configuration
from model.device_limits import ConfiguredLimits
from model.rules.hotplug import SURPRISE_REMOVAL
from reports.html import reproducer_link
from reports.records import Record
from reports.run_data import case_properties

DATA = Path(__file__).resolve().parents[1] / "data" / "replay"


def _inputs(tmp_path: Path, commands: list[tuple[str, str, int | None]] | None = None) -> BundleInputs:
    kernel, initrd, raw = tmp_path / "vmlinuz", tmp_path / "initrd.img", tmp_path / "raw"
    kernel.write_bytes(b"K" * 1000)
    initrd.write_bytes(b"I" * 500)
    raw.mkdir(exist_ok=True)
    (raw / "queue-depth-qd32.json").write_text('{"summary": {}}')
    config = configuration(
        test_id="libvirt:virtio-scsi:latency5ms", rule="queue-depth", backend="libvirt", controller="virtio-scsi",
        disk={"backing": "latency", "latency_ms": 5.0, "serial": "vioc-dut0"}, kernel_name="sda", machine="pc",
        emulator=None, accel="tcg", vcpus=2, memory_mib=512, kernel_cmdline="console=ttyS0",
        measure={"depths": [1, 32], "window_s": 2.0}, device_queue_depth=128,
        advertised_queue_depth=(128, "cmd_per_lun 128"), trace_family="scsi",
        config=Configuration.parse("libvirt:virtio-scsi:latency5ms").to_dict(), domain="vioconform-4242")
    evidence = Evidence("failed", "FAIL: at offered depth 32 the host saw 1.0 in flight", ("offered 32: ...",),
                        ("at offered depth 32 the host saw 1.0 in flight",), (), {"qd32_host_depth": 1.0},
                        "guest configuration", "queue depth was 128 and is 1 now")
    return BundleInputs("queue-depth", "libvirt:virtio-scsi:latency5ms", config, evidence, kernel, initrd, None,
                        "<domain/>", (DATA / "libvirt-virtio-scsi.qemu.log").read_text(), {"version": "7.2.22"},
                        [{"sysfs": "device/queue_depth", "value": "1"}],
                        commands if commands is not None else [("t::x[c]", "echo 1 > /sys/block/sda/device/queue_depth", 0),
                                                               ("t::x[c]", "/usr/bin/fio --name=qd1 --iodepth=1", 0),
                                                               ("t::x[c]", "cat /gone", None)],
                        raw, None)


def test_a_bundle_holds_the_guest_the_hypervisor_the_commands_and_the_evidence(tmp_path: Path) -> None:
    root = write_bundle(_inputs(tmp_path), tmp_path / "results" / "reproducers", 0o700)
    assert root == tmp_path / "results" / "reproducers" / "queue-depth-libvirt_virtio-scsi_latency5ms"
    files = {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}
    assert files == {"README.md", "replay", "configuration.json", "guest/vmlinuz", "guest/initrd.img",
                     "guest/boot.json", "guest/setup.json", "guest/commands.txt", "guest/fio-commands.txt",
                     "hypervisor/domain.xml", "hypervisor/qemu-command.txt", "hypervisor/qemu.log",
                     "hypervisor/qemu.json", "evidence/verdict.json", "evidence/raw/queue-depth-qd32.json"}
    assert (root / "guest" / "vmlinuz").read_bytes() == b"K" * 1000
    config = json.loads((root / "configuration.json").read_text())
    assert (config["format"], config["controller"], config["disk"]["latency_ms"], config["device_queue_depth"]) == \
        (1, "virtio-scsi", 5.0, 128)
    assert str(Configuration.from_dict(config["configuration"])) == config["test_id"]
    assert config["domain"] == "vioconform-4242"  # the run's lines name the guest by it (throttle's replay too)
    verdict = json.loads((root / "evidence" / "verdict.json").read_text())
    assert verdict["outcome"] == "failed" and verdict["blame"] == "guest configuration"
    assert verdict["properties"] == {"qd32_host_depth": 1.0}
    commands = (root / "guest" / "commands.txt").read_text()
    assert commands.index("queue_depth") < commands.index("fio") < commands.index("cat /gone")
    assert "# t::x[c]: exit lost\ncat /gone" in commands
    assert (root / "guest" / "fio-commands.txt").read_text() == "/usr/bin/fio --name=qd1 --iodepth=1\n"
    command = (root / "hypervisor" / "qemu-command.txt").read_text()
    assert command.startswith("/usr/bin/qemu-system-x86_64 \\\n") and "null-co" in command
    assert "at offered depth 32 the host saw 1.0 in flight" in (root / "README.md").read_text()
    # private, as the rest of the results: the directories 0700, the files 0600, the replay 0700
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert stat.S_IMODE((root / "configuration.json").stat().st_mode) == 0o600
    assert stat.S_IMODE((root / "replay").stat().st_mode) == 0o700
    with tarfile.open(root.with_name(root.name + ".tar.gz")) as tar:
        names = {m.name for m in tar.getmembers() if m.isfile()}
    assert names == {f"{root.name}/{f}" for f in files}


def test_a_second_bundle_of_the_same_test_never_replaces_the_first(tmp_path: Path) -> None:
    first = write_bundle(_inputs(tmp_path), tmp_path / "r", 0o700)
    before = first.with_name(first.name + ".tar.gz").read_bytes()
    second = write_bundle(_inputs(tmp_path), tmp_path / "r", 0o700)
    assert second.name == first.name + "-2"
    assert first.with_name(first.name + ".tar.gz").read_bytes() == before
    assert second.with_name(second.name + ".tar.gz").is_file()


def test_a_secret_in_a_guest_command_is_masked_in_the_bundle(tmp_path: Path) -> None:
    secret.register("Zq9-s3cret-pw")
    try:
        root = write_bundle(_inputs(tmp_path, [("t", "echo Zq9-s3cret-pw | chpasswd", 0)]), tmp_path / "r", 0o700)
    finally:
        secret._LIVE.discard("Zq9-s3cret-pw")
    assert "Zq9-s3cret-pw" not in (root / "guest" / "commands.txt").read_text()
    assert "echo *** | chpasswd" in (root / "guest" / "commands.txt").read_text()


def test_an_image_is_named_never_copied(tmp_path: Path) -> None:
    inputs = _inputs(tmp_path)
    from dataclasses import replace
    image = {"path": "/images/big.qcow2", "format": "qcow2", "sha256": "ab" * 32, "virtual_size_bytes": 1 << 34}
    root = write_bundle(replace(inputs, kernel=None, initrd=None, image=image), tmp_path / "r", 0o700)
    assert json.loads((root / "guest" / "image.json").read_text()) == image
    assert not (root / "guest" / "vmlinuz").exists()


def test_the_qemu_command_is_the_last_starts() -> None:
    log = ("2026-12-07 10:00:00.000+0000: starting up libvirt version: 9.0.0\n/usr/bin/qemu-system-x86_64 \\\n-old \\\n"
           "-x\n2026-12-07 11:00:00.000+0000: starting up libvirt version: 9.0.0\nLC_ALL=C \\\n"
           "/usr/bin/qemu-system-x86_64 \\\n-name guest=g \\\n-m 512\nqemu says hi\n")
    assert qemu_command(log) == "/usr/bin/qemu-system-x86_64 \\\n-name guest=g \\\n-m 512"
    assert qemu_command("") == ""
    # --emulator: any path, after libvirt's environment lines
    wrapped = ("2026-12-07 11:00:00.000+0000: starting up libvirt version: 9.0.0\nLC_ALL=C \\\nHOME=/var/lib/x \\\n"
               "/tmp/vioconform-emulator-1/qemu-cmd-per-lun-1 \\\n-name guest=g \\\n-m 512\n")
    assert qemu_command(wrapped) == "/tmp/vioconform-emulator-1/qemu-cmd-per-lun-1 \\\n-name guest=g \\\n-m 512"


def test_the_bundles_name_is_the_rule_and_the_test_id() -> None:
    assert bundle_name("queue-depth", "libvirt:virtio-scsi:latency5ms") == "queue-depth-libvirt_virtio-scsi_latency5ms"
    assert bundle_name("limits", "vsphere:pvscsi/../x") == "limits-vsphere_pvscsi_.._x"


@pytest.mark.parametrize(("mode", "outcome", "want"), [
    ("failed", "failed", True), ("failed", "passed", False), ("failed", "error", False),
    ("all", "passed", True), ("all", "failed", True), ("all", "skipped", False), ("all", "error", False),
    ("none", "failed", False)])
def test_which_tests_get_a_bundle(mode: str, outcome: str, want: bool) -> None:
    assert wanted(mode, Record("n", "queue-depth", "c", outcome=outcome)) is want  # type: ignore[arg-type]


def test_the_junit_case_and_the_report_point_at_the_bundle() -> None:
    path = "/r/reproducers/queue-depth-libvirt_virtio-scsi_latency5ms"
    rec = Record("n", "queue-depth", "libvirt:virtio-scsi:latency5ms", outcome="failed", reproducer=path)
    assert case_properties(rec)["reproducer"] == path
    assert "reproducer" not in case_properties(Record("n", "queue-depth", "c", outcome="failed"))
    link = reproducer_link(path)
    assert 'href="reproducers/queue-depth-libvirt_virtio-scsi_latency5ms/README.md"' in link
    assert 'href="reproducers/queue-depth-libvirt_virtio-scsi_latency5ms.tar.gz"' in link
    assert reproducer_link("") == ""


def test_the_results_modes_sweep_keeps_the_replay_executable(tmp_path: Path) -> None:
    """The run's last sweep of modes (ResultsDir.make_private) gives files the mode without execute
    bits, except a file its owner may run: the bundle's replay stays runnable, at the results mode."""
    from reports.results import open_results
    results = open_results(tmp_path / "run", None, 0o750)
    root = write_bundle(_inputs(tmp_path), results.path / "reproducers", 0o750)
    (results.path / "raw.json").write_text("{}")
    (results.path / "raw.json").chmod(0o777)
    results.make_private()
    assert stat.S_IMODE((root / "replay").stat().st_mode) == 0o750
    assert stat.S_IMODE((root / "README.md").stat().st_mode) == 0o640
    assert stat.S_IMODE((results.path / "raw.json").stat().st_mode) == 0o640


def test_a_hotplug_bundle_names_the_disk_the_rule_adds_as_the_backend_describes_it() -> None:
    """The replay adds that disk again (replay/rules/hotplug.py): its serial, size and configured limits."""
    added = SimpleNamespace(serial="vioc-dut90", size_bytes=64 << 20,
                            configured=ConfiguredLimits(128, logical_block_bytes=512, physical_block_bytes=4096, queues=2))
    backend = SimpleNamespace(hotplug_disk=lambda guest, beside: added)
    opts = SimpleNamespace(option=lambda o: o is SURPRISE_REMOVAL)
    disk = SimpleNamespace(attached=None)
    entry = _hotplug(cast(HypervisorBackend, backend), cast(Guest, None), cast(GuestDisk, disk), cast(SuiteOptions, opts))
    assert entry is not None and (entry["serial"], entry["size_bytes"], entry["surprise_removal"]) == ("vioc-dut90", 64 << 20, True)
    assert ConfiguredLimits(**cast(dict[str, Any], entry["configured_limits"])) == added.configured

    def refused(guest: object, beside: object) -> None:
        raise HotplugUnavailable("no room")

    assert _hotplug(cast(HypervisorBackend, SimpleNamespace(hotplug_disk=refused)), cast(Guest, None),
                    cast(GuestDisk, disk), cast(SuiteOptions, opts)) is None
