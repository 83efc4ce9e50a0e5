"""The stall-tolerance rule's judgement and its parsers, on numbers and lines recorded from real guests
(QEMU 7.2 under TCG, the embedded Debian 6.1 guest; tests/data/README.md)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from model.errors import ParseError
from model.parse.stall_evidence import (
    CommandTimeout,
    HostEvent,
    lines_after_mark,
    parse_command_timeout,
    parse_recovery_events,
)
from model.rules.stall_tolerance import (
    DEFAULT_STALL_S,
    StallRun,
    hold_problem,
    judge_stall_tolerance,
    judged,
    recovery_lines,
)

DATA = Path(__file__).parent.parent / "data"

#: Recorded: the healthy virtio-scsi scratch disk (sdb), default run: 30 s timeout.
SCSI_30 = parse_command_timeout("io_timeout=30000\ndevice_timeout=30\n", "sdb", "sd")
#: Recorded: --inject short-timeout on the same disk.
SCSI_5 = parse_command_timeout("io_timeout=5000\ndevice_timeout=5\n", "sdb", "sd")
#: Recorded: virtio-blk (vdb) shows neither file.
BLK = parse_command_timeout("", "vdb", "virtio_blk")
#: Recorded: a 2 s hold on virtio-scsi, default suite: 0 host completions, 8 in flight, 6 of 6 probes
#: answered (slowest 92 ms), 52 I/Os, the slowest 2016.9 ms.
HEALTHY = StallRun(hold_s=2.0, host_completions=0, guest_inflight_max=8, probes=6, probes_answered=6,
                   probe_rtt_max_ms=91.5, guest_ios=52, guest_max_latency_ms=2016.9,
                   host_events_source="QEMU trace events virtio_scsi_tmf_req, scsi_req_cancel, virtio_set_status")


def test_the_timeouts_are_read_as_the_kernel_shows_them() -> None:
    assert CommandTimeout("sdb", 30.0, "/sys/block/sdb/queue/io_timeout 30000 ms, device/timeout 30 s", "sd") == SCSI_30
    assert parse_command_timeout("device_timeout=45\n", "sda").timeout_s == 45.0  # a kernel before 5.0
    assert BLK.timeout_s is None and "virtio_blk has no command timeout" in BLK.source
    with pytest.raises(ParseError, match="io_timeout='x'"):
        parse_command_timeout("io_timeout=x\n", "sda")


def test_a_healthy_guest_passes_both_parts() -> None:
    v = judge_stall_tolerance(SCSI_30, DEFAULT_STALL_S, HEALTHY)
    assert v.passed, v.explain()
    assert v.properties["command_timeout_s"] == 30.0 and v.properties["stall_judged"] == 1
    assert v.properties["hold_host_completions"] == 0 and v.properties["guest_max_latency_ms"] == 2016.9
    assert "held every request of sdb for 2.0 s; it completed 0 while the guest had up to 8 in flight" in v.explain()


def test_a_driver_without_a_timeout_passes_the_static_part() -> None:
    v = judge_stall_tolerance(BLK, DEFAULT_STALL_S, dataclasses.replace(HEALTHY, probe_rtt_max_ms=119.8))
    assert v.passed, v.explain()
    assert "command_timeout_s" not in v.properties and "waits for ever" in v.explain()


def test_short_timeout_fails_the_static_part_with_the_fix() -> None:
    # recorded: --inject short-timeout on virtio-scsi; the 2 s hold itself passed (1368 I/Os, no error)
    v = judge_stall_tolerance(SCSI_5, DEFAULT_STALL_S, dataclasses.replace(HEALTHY, guest_ios=1368,
                                                                          guest_max_latency_ms=2009.0))
    assert not v.passed
    assert v.problems == (("the guest gives up on a command of sdb after 5 s (/sys/block/sdb/queue/io_timeout 5000 ms, "
                          "device/timeout 5 s), under the 30 s storage stall it must ride out (--stall-s): a SAN path "
                          "failover would turn into aborts, resets and I/O errors. Raise it to 30 s or more (a udev "
                          "rule writing device/timeout, as VMware Tools' does)"),)


def test_the_bar_follows_stall_s() -> None:
    assert judge_stall_tolerance(SCSI_30, 30.0).passed
    assert not judge_stall_tolerance(SCSI_30, 180.0).passed  # VMware Tools' 180 s


def test_an_abort_in_a_stall_under_the_timeout_fails() -> None:
    events = tuple(parse_recovery_events((DATA / "qemu-trace-stall-recovery.log").read_text())[:1])
    v = judge_stall_tolerance(SCSI_30, DEFAULT_STALL_S, dataclasses.replace(HEALTHY, host_events=events))
    assert not v.passed and v.properties["host_aborts"] == 1
    assert v.problems[0].startswith("a 2.0 s stall, under the guest's 30 s timeout, should pass unnoticed, but the host "
                                    "saw 1 abort(s) and 0 reset(s) of the device: scsi_req_cancel target 0 lun 0")


def test_an_error_a_log_line_or_a_read_only_mount_fails_a_judged_stall() -> None:
    log = recovery_lines((DATA / "guest" / "dmesg-stall-mptsas-long.txt").read_text().splitlines())
    run = dataclasses.replace(HEALTHY, fio_error="error 5 (EIO: Input/output error)", guest_log=log,
                              readonly=("/dev/sdb1 /mnt ext4 ro,relatime 0 0",))
    v = judge_stall_tolerance(BLK, DEFAULT_STALL_S, run)
    assert len(v.problems) == 3, v.explain()
    assert "fio saw an error: error 5 (EIO" in v.problems[0]
    assert v.problems[1].startswith("a 2.0 s stall, with no command timeout in the guest, should pass unnoticed, but "
                                    "the guest's kernel logged 16 line(s) of error handling: [   11.516129] mptscsih: "
                                    "ioc0: attempting task abort!")
    assert "read-only after the stall: /dev/sdb1 /mnt ext4 ro" in v.problems[2]


def test_a_stall_longer_than_the_timeout_is_recorded_not_judged() -> None:
    # recorded: an 8 s hold of mptsas1068 with a 2 s timeout: 8 task aborts in the guest, one cancel in QEMU
    events = tuple(parse_recovery_events((DATA / "qemu-trace-stall-recovery.log").read_text())[:1])
    log = recovery_lines((DATA / "guest" / "dmesg-stall-mptsas-long.txt").read_text().splitlines())
    two = parse_command_timeout("io_timeout=2000\ndevice_timeout=2\n", "sda", "sd")
    run = dataclasses.replace(HEALTHY, hold_s=8.02, guest_max_latency_ms=8046.5, host_events=events, guest_log=log)
    assert not judged(two, run)
    v = judge_stall_tolerance(two, 2.0, run)
    assert v.passed, v.explain()
    assert v.properties["stall_judged"] == 0
    assert v.notes[0].startswith("the 8.0 s stall outlasted the guest's 2 s timeout: recorded, not judged; the host "
                                 "saw 1 abort(s) and 0 reset(s)")
    quiet = judge_stall_tolerance(two, 2.0, dataclasses.replace(run, host_events=(), guest_log=()))
    assert quiet.notes[0].endswith("the guest waited it out (no abort, reset or error on either side)")


def test_a_hold_that_proves_nothing_is_named() -> None:
    assert hold_problem(HEALTHY) is None
    assert hold_problem(dataclasses.replace(HEALTHY, host_completions=1)) is None  # the throttle's first pass
    leaked = hold_problem(dataclasses.replace(HEALTHY, host_completions=3))
    assert leaked is not None and "the hold did not hold" in leaked
    idle = hold_problem(dataclasses.replace(HEALTHY, guest_inflight_max=0))
    assert idle is not None and "no request in flight" in idle
    frozen = hold_problem(dataclasses.replace(HEALTHY, probes_answered=0))
    assert frozen is not None and "its vCPUs may have stood still too" in frozen
    # recorded: IDE's reset drained 3 held requests of an 8 s hold over a 2 s timeout: that is the guest's doing
    assert hold_problem(dataclasses.replace(HEALTHY, host_completions=3), judge=False) is None


def test_without_a_hold_the_static_part_is_judged_alone() -> None:
    v = judge_stall_tolerance(SCSI_30, DEFAULT_STALL_S, None, "the vsphere backend cannot hold a disk's requests at "
                              "the host")
    assert v.passed and v.notes == (("dynamic part not run: the vsphere backend cannot hold a disk's requests at the "
                                    "host"),)


def test_recovery_events_from_a_real_trace() -> None:
    events = parse_recovery_events((DATA / "qemu-trace-stall-recovery.log").read_text())
    assert [(e.event, e.kind) for e in events] == [
        ("scsi_req_cancel", "cancel"),  # mptsas1068; its dma_aio_cancel is no recovery event
        ("ide_cancel_dma_sync_remaining", "cancel"), ("ide_reset", "reset"), ("ide_reset", "reset"),
        ("ide_cancel_dma_sync_remaining", "cancel"), ("ide_reset", "reset"), ("ide_reset", "reset")]
    assert events[0] == HostEvent(1795706278774239, "scsi_req_cancel", "cancel", "target 0 lun 0 tag 917509")


def test_nvme_admin_commands_and_virtio_status_count_only_when_they_recover() -> None:
    # synthetic, to QEMU 7.2's format strings (pci_nvme_admin_cmd, virtio_set_status)
    text = ("1@1.000001:pci_nvme_admin_cmd cid 7 sqid 0 opc 0x6 opname 'NVME_ADM_CMD_IDENTIFY'\n"
            "1@1.000002:pci_nvme_admin_cmd cid 8 sqid 0 opc 0x8 opname 'NVME_ADM_CMD_ABORT'\n"
            "1@1.000003:pci_nvme_admin_cmd cid 9 sqid 0 opc 0x0 opname 'NVME_ADM_CMD_DELETE_SQ'\n"
            "1@1.000004:virtio_set_status vdev 0x55 val 15\n"
            "1@1.000005:virtio_set_status vdev 0x55 val 0\n")
    assert [(e.kind, e.detail.split()[-1]) for e in parse_recovery_events(text)] == [
        ("abort", "'NVME_ADM_CMD_ABORT'"), ("reset", "'NVME_ADM_CMD_DELETE_SQ'"), ("reset", "0")]


def test_the_kernel_log_is_read_from_the_mark_on() -> None:
    text = "[1.0] old line\n[2.0] vioconform: stall-tolerance mark abc123\n[3.0] sd 0:0:0:0: [sda] abort\n"
    assert lines_after_mark(text, "abc123") == (["[3.0] sd 0:0:0:0: [sda] abort"], True)
    assert lines_after_mark(text, "gone") == (text.splitlines(), False)


def test_only_error_handling_lines_count() -> None:
    lines = (DATA / "guest" / "dmesg-stall-mptsas-long.txt").read_text().splitlines()
    kept = recovery_lines(lines)
    assert len(lines) == 24 and len(kept) == 16  # the 8 CDB lines are not error handling
    assert not recovery_lines(["[37.85] hrtimer: interrupt took 16818610 ns"])  # TCG's noise, recorded here
