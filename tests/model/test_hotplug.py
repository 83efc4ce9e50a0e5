"""The hotplug rule's judgement on real runs: the times are the ones the suite measured under TCG here
(virtio-blk healthy; virtio-scsi under ``--inject hotplug-off``, which never showed the disk)."""

from __future__ import annotations

import dataclasses

from model.device_limits import ConfiguredLimits, GuestLimits
from model.rules.hotplug import (
    FIO_END_BOUND_S,
    GONE_BOUND_S,
    SEEN_BOUND_S,
    Gone,
    HotplugRun,
    Seen,
    Surprise,
    judge_hotplug,
)
from model.rules.limits import compare_limits

SIZE = 64 << 20
#: What the host configures for the added virtio-blk disk (hypervisors/libvirt/controllers.py's
#: ``configured`` for the hotplug spec) and the guest's sysfs view of vdc when it appeared.
ADDED_CONFIGURED = ConfiguredLimits(queue_depth=256, max_transfer_bytes=None, logical_block_bytes=512,
                                    physical_block_bytes=4096, optimal_io_bytes=65536, write_cache=True,
                                    discard=True, queues=1)


def added_view(physical_block_size: int = 4096) -> GuestLimits:
    return GuestLimits("vdc", 256, 1280, 2147483647 // 1024, 512, physical_block_size, 65536, "write back",
                       2147483136, 1, 1, driver="virtio_blk")


#: virtio-blk, healthy: attachDeviceFlags 0.02 s, vdc shown 0.33 s after it (the guest's wait 0.23 s),
#: detachDeviceAlias 0.00 s, the guest's /sys/block/vdc gone at its first look, the host's XML after 0.28 s.
BLK = HotplugRun("virtio-blk", "vioc-dut90", SIZE, 0.02, Seen("vdc", SIZE, 0.23, 0.33, tuple(compare_limits(ADDED_CONFIGURED, added_view()))),
                 Gone(0.0, 0.01, 0.28))
#: virtio-scsi under hotplug-off (scsi_mod scan=manual): attach 0.02 s, no disk within the bound.
SCSI_OFF = HotplugRun("virtio-scsi", "vioc-dut90", SIZE, 0.02, None, None)


def test_healthy_run_passes_with_both_sides_times() -> None:
    v = judge_hotplug(BLK)
    assert v.problems == ()
    assert v.properties["seen_s"] == 0.33 and v.properties["gone_host_s"] == 0.28
    assert v.properties["guest_size_bytes"] == SIZE and v.properties["hotplug_device"] == "vdc"
    assert v.figures  # seen/attach and gone guest/host, drawn side by side


def test_disk_never_seen_fails_blaming_the_guest() -> None:
    v = judge_hotplug(SCSI_OFF)
    assert len(v.problems) == 1 and "showed no disk with serial vioc-dut90" in v.problems[0]
    assert f"within {SEEN_BOUND_S:g} s" in v.problems[0]
    assert v.hint is not None and v.hint.layer == "guest driver"
    assert "removal was not judged" in v.notes[0]


def test_wrong_size_fails() -> None:
    v = judge_hotplug(dataclasses.replace(BLK, seen=Seen("vdc", SIZE // 2, 0.23, 0.33)))
    assert any(f"{SIZE // 2} bytes, the host configured {SIZE}" in p for p in v.problems)


def test_seen_past_the_bound_fails() -> None:
    v = judge_hotplug(dataclasses.replace(BLK, seen=Seen("vdc", SIZE, 6.0, SEEN_BOUND_S + 1)))
    assert any("past the bound" in p for p in v.problems)


def test_disk_kept_after_removal_fails_on_each_side() -> None:
    v = judge_hotplug(dataclasses.replace(BLK, gone=Gone(0.0, None, None)))
    assert any("the guest still shows vdc" in p for p in v.problems)
    assert any(f"the host still shows the disk {GONE_BOUND_S:g} s" in p for p in v.problems)


#: virtio-scsi's surprise removal (3 of 3 alike): fio ended 0.15 s after the detach request, exit 1 (EIO),
#: 5147 reads bringing 21065728 bytes; the guest's sdc gone at once, the host's XML after 0.47 s.
SCSI_SURPRISE = Surprise("sdc", 0.15, 1, "fio: io_u error on file /dev/sdc: Input/output error", True, 0.01, 0.47,
                         fio_reads=5147, fio_read_bytes=21065728)
#: virtio-blk's (3 of 3 alike): fio had not ended at the bound: 329354 reads, 25575424 bytes (6244 reads'
#: worth: the rest brought nothing); stopped, it exited 128; the host's XML dropped the disk 6.07 s after
#: the detach request, once fio had let the disk go.
BLK_SURPRISE = Surprise("vdc", None, 128, "", True, 0.0, 6.07, fio_reads=329354, fio_read_bytes=25575424)


def test_surprise_removal_ending_fio_with_errors_passes() -> None:
    v = judge_hotplug(dataclasses.replace(BLK, controller="virtio-scsi", surprise=SCSI_SURPRISE))
    assert v.problems == ()
    assert v.properties["surprise_fio_s"] == 0.15 and v.properties["surprise_fio_exit_status"] == 1


def test_surprise_removal_reading_empty_fails_naming_the_empty_reads() -> None:
    v = judge_hotplug(dataclasses.replace(BLK, surprise=BLK_SURPRISE))
    assert len(v.problems) == 1, v.problems
    assert f"had not ended {FIO_END_BOUND_S:g} s" in v.problems[0] and "323110 completed with no data" in v.problems[0]
    assert v.hint is not None and "no data and no error" in v.hint.reason


def test_surprise_removal_that_hangs_or_leaves_the_guest_mute_fails() -> None:
    hung = dataclasses.replace(BLK_SURPRISE, fio_reads=6244, fio_read_bytes=6244 * 4096, responsive=False, host_gone_s=None)
    v = judge_hotplug(dataclasses.replace(BLK, surprise=hung))
    assert any("waits on requests the device will never answer" in p for p in v.problems)
    assert any("did not answer over SSH" in p for p in v.problems)
    assert any("the host still shows the disk" in p for p in v.problems)
    quiet = dataclasses.replace(SCSI_SURPRISE, fio_exit_status=0)
    assert any("reported no error" in p for p in judge_hotplug(dataclasses.replace(BLK, surprise=quiet)).problems)


def test_the_added_disks_limits_are_the_limits_rules_comparison() -> None:
    """The guest's view of the added disk against what the host configured, each limit as the limits rule
    compares it; a limit the guest sees otherwise fails the rule, one the host leaves open is shown only."""
    v = judge_hotplug(BLK)  # its limits as the guest saw them, all as configured
    assert v.problems == () and v.properties["added_physical_block_size_guest"] == "4096"
    assert v.properties["added_physical_block_size_configured"] == "4096"
    other = added_view(512)
    seen = dataclasses.replace(BLK.seen, limits=tuple(compare_limits(ADDED_CONFIGURED, other)))  # type: ignore[type-var]
    v = judge_hotplug(dataclasses.replace(BLK, seen=seen))
    assert len(v.problems) == 1 and "the added disk vdc: physical block size: the host configured 4096, the guest " \
        "sees 512" in v.problems[0], v.problems
