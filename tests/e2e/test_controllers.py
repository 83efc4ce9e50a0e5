"""Every controller of the matrix through real guests: libvirt accepts it, the guest finds its disks
with the advertised limits, and the queue-depth rule judges it (healthy and with tcq-off).

One guest carries all controllers, so each run boots once (about 20 s under TCG). Budget here:
about 4 minutes for the module on the 2-core TCG machine.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from guest.tools.sysfs import Sysfs
from hypervisors.base import GuestRequest
from hypervisors.libvirt.backend import LibvirtBackend
from hypervisors.libvirt.controllers import CONTROLLERS, disk_file
from measure.standalone import standalone_guest
from tests.e2e.conftest import SuiteRun, orphaned_domains, run_suite_at
from tests.unit.test_controllers import two_disks_each

ALL = ",".join(CONTROLLERS)
#: The controllers the default suite's run (tests/e2e/test_rules_guest.py) does not take.
BEYOND_DEFAULT = tuple(c for c in CONTROLLERS if c not in ("virtio-scsi", "virtio-blk"))
KIB = 1024
#: The queue-depth rule only, shorter windows: 9 controllers in about 100 s.
QUEUE_DEPTH = "test_queue_depth_propagation"
QUICK_WINDOWS = ("--depths", "1,32", "--window-s", "2")
QUICK = ("-k", QUEUE_DEPTH, *QUICK_WINDOWS)
#: Where the guest can set queue_depth=1 (tcq-off must fail the rule), and where it cannot
#: (sym53c8xx makes queue_depth read-only: tcq-off must skip with the reason).
TCQ_SETTABLE = ("mptsas1068", "megasas", "ahci")
TCQ_FIXED = ("lsi53c895a",)
#: The alignment rule's test, and the controllers it runs on here (the default two run it in the default suite).
ALIGNMENT = "test_alignment"
ALIGNMENT_ON = ("ahci", "ide")


def case_key(controller: str) -> str:
    """A ``-k`` word that matches the suite's tests on ``controller`` only (``ide`` alone would match any
    name holding those letters)."""
    return f"libvirt:{controller}:"


def case_name(controller: str) -> str:
    return f"queue-depth[libvirt:{controller}:latency5ms]"


def test_libvirt_accepts_every_controller_with_either_backing(tmp_path: Path) -> None:
    """Both backings of the disk under test, without booting: libvirt turns the XML into QEMU arguments."""
    for backing in ("latency", "file"):
        specs = two_disks_each(backing=backing)
        for s in specs:
            if s.backing == "file":
                Path(disk_file(tmp_path, s)).write_bytes(b"")
        request = GuestRequest("vioconform-xmlcheck", tuple(specs), tmp_path, "AAAA")
        xml = LibvirtBackend.domain_xml(LibvirtBackend.__new__(LibvirtBackend), request.name, "qemu", tmp_path,
                                        tmp_path / "vmlinuz", tmp_path / "initrd", "console=ttyS0", request, 2222)
        (tmp_path / "domain.xml").write_text(xml)
        proc = subprocess.run(["virsh", "-c", "qemu:///system", "domxml-to-native", "qemu-argv",
                               str(tmp_path / "domain.xml")], check=False, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        for name in ("megasas", "mptsas1068", "lsi", "ahci", "virtio-scsi-pci"):
            assert f'"driver":"{name}"' in proc.stdout, (name, backing)


def test_every_controller_boots_and_advertises_its_limits() -> None:
    with standalone_guest(two_disks_each(), f"vioconform-ctl-{os.getpid()}") as (_, disks):
        print(f"one guest, {len(disks)} disks on {len(CONTROLLERS)} controllers: boot to SSH "
              f"{disks[0].guest.boot_seconds:.1f} s")
        assert len(disks) == 2 * len(CONTROLLERS)
        # The host's entropy reaches the guest (its SSH host key does not wait on jitter entropy under TCG).
        rng = disks[0].tools.shell.run("cat /sys/devices/virtual/misc/hw_random/rng_current").stdout.strip()
        assert rng.startswith("virtio_rng"), rng
        for d in disks:
            ctl = CONTROLLERS[d.attached.spec.controller]
            lim, what = d.limits, f"{d.config_id} {d.attached.spec.role} ({d.kernel_name}): {d.limits}"
            drivers = d.tool(Sysfs).drivers(d.kernel_name)
            assert ctl.guest_driver in drivers, (drivers, what)
            if ctl.disk_bus in ("virtio", "nvme"):
                assert lim.scsi_queue_depth is None and lim.nr_requests == ctl.queue_depth, what
            else:
                assert lim.scsi_queue_depth == ctl.queue_depth, what
            if ctl.max_transfer_bytes is not None:
                assert lim.max_hw_sectors_kb * KIB == ctl.max_transfer_bytes, what
            if ctl.name == "ide":
                assert lim.can_queue == 1, what


def test_suite_ids_carry_every_controller(run_suite) -> None:  # type: ignore[no-untyped-def]
    run: SuiteRun = run_suite("--controllers", ALL, "--collect-only", "-q")
    assert run.returncode == 0, run.output
    for name in CONTROLLERS:
        assert f"test_queue_depth_propagation[libvirt:{name}:latency5ms]" in run.output, (name, run.output)


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> SuiteRun:
    """One healthy run on the controllers beyond the default two: queue-depth on all of them, and
    alignment on AHCI and IDE (the alignment test below reads it; its misaligned run is its own)."""
    return run_suite_at(tmp_path_factory.mktemp("healthy") / "results", "--controllers", ",".join(BEYOND_DEFAULT),
                        "-k", f"{QUEUE_DEPTH} or ({ALIGNMENT} and ({' or '.join(map(case_key, ALIGNMENT_ON))}))",
                        *QUICK_WINDOWS)


def test_queue_depth_passes_on_every_controller(healthy: SuiteRun) -> None:
    """The controllers beyond the default two: virtio-scsi and virtio-blk pass it in the default suite's
    run (tests/e2e/test_rules_guest.py), with every depth and the default window."""
    run = healthy
    assert run.returncode == 0, run.output
    cases = {name: case for name, case in run.cases().items() if name.startswith("queue-depth[")}
    assert set(cases) == {case_name(c) for c in BEYOND_DEFAULT}, run.output
    tested = run.suite_properties()
    for name in BEYOND_DEFAULT:
        ctl = CONTROLLERS[name]
        assert tested[f"disk.{name}.driver_module"] == ctl.guest_driver, (name, tested)  # what was tested
        case = cases[case_name(name)]
        assert case.find("failure") is None and case.find("skipped") is None, (name, run.output)
        props = SuiteRun.props(case)
        assert int(props["device_queue_depth"]) == ctl.queue_depth, props
        # exact (QEMU's trace events) wherever the controller has them; Little's law on IDE
        assert ("exact" in props["qd32_host_source"]) == (ctl.trace_family is not None), props
        if name == "ide":
            # no command queuing: conforming to its limit of 1, and the record says so
            assert "no command queuing" in props["notes"], props
            assert float(props["qd32_host_depth"]) < 1.5, props
        else:
            assert float(props["qd32_host_depth"]) > 5, props
            assert float(props["qd32_iops"]) > 5 * float(props["qd1_iops"]), props


@pytest.mark.long
def test_tcq_off_fails_where_the_guest_can_set_it_and_skips_where_it_cannot(run_suite) -> None:  # type: ignore[no-untyped-def]
    run: SuiteRun = run_suite("--controllers", ",".join(TCQ_SETTABLE + TCQ_FIXED), "--inject", "tcq-off", *QUICK)
    cases = run.cases()
    for name in TCQ_SETTABLE:
        failure = cases[case_name(name)].find("failure")
        assert failure is not None, (name, run.output)
        props = SuiteRun.props(cases[case_name(name)])
        assert float(props["qd32_host_depth"]) < 3, run.output
        if name == "ahci":  # NCQ off: QEMU 7.2 traces no non-queued ATA command, so Little's law
            assert "not exact" in props["qd32_host_source"] and "NCQ" in props["qd32_host_source"], props
    for name in TCQ_FIXED:
        skipped = cases[case_name(name)].find("skipped")
        assert skipped is not None, (name, run.output)
        reason = skipped.get("message", "")
        assert "tcq-off" in reason and "\n" not in reason.strip(), reason


@pytest.fixture(autouse=True)
def _no_leftover_domains():  # type: ignore[no-untyped-def]
    """Every test leaves no guest of its own running, also when it fails."""
    yield
    assert orphaned_domains() == []


def test_alignment_runs_on_ahci_from_its_ncq_trace_and_skips_on_ide(run_suite, healthy: SuiteRun) -> None:  # type: ignore[no-untyped-def]
    """AHCI's NCQ trace events give each request's offset: a healthy partition passes (the module's
    healthy run), sector 63 fails. PIIX IDE has no per-request completion event in QEMU 7.2: a skip
    with that reason."""
    misaligned: SuiteRun = run_suite("--controllers", ",".join(ALIGNMENT_ON), "-k", ALIGNMENT, "--inject", "misaligned")
    assert set(misaligned.cases()) == {f"alignment[libvirt:{c}:latency5ms]" for c in ALIGNMENT_ON}, misaligned.output
    for run, ahci_fails in ((healthy, False), (misaligned, True)):
        cases = run.cases()
        ahci, ide = cases["alignment[libvirt:ahci:latency5ms]"], cases["alignment[libvirt:ide:latency5ms]"]
        props = SuiteRun.props(ahci)
        assert "exact" in props["host_source"] and int(props["host_requests"]) >= 400, (props, run.output[-3000:])
        assert (ahci.find("failure") is not None) == ahci_fails, run.output[-3000:]
        assert int(props["misaligned_requests"]) == (int(props["host_requests"]) if ahci_fails else 0), props
        skipped = ide.find("skipped")
        assert skipped is not None and "per-request host trace" in skipped.get("message", ""), run.output[-3000:]
        assert run.left_behind == []
