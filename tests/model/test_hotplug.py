"""The hotplug rule's judgement on real runs: the times are the ones the suite measured under TCG here
(virtio-blk healthy; virtio-scsi under ``--inject hotplug-off``, which never showed the disk)."""

from __future__ import annotations

import dataclasses

from model.rules.hotplug import GONE_BOUND_S, SEEN_BOUND_S, Gone, HotplugRun, Seen, judge_hotplug

SIZE = 64 << 20
#: virtio-blk, healthy: attachDeviceFlags 0.02 s, vdc shown 0.33 s after it (the guest's wait 0.23 s),
#: detachDeviceAlias 0.00 s, the guest's /sys/block/vdc gone at its first look, the host's XML after 0.28 s.
BLK = HotplugRun("virtio-blk", "vioc-dut90", SIZE, 0.02, Seen("vdc", SIZE, 0.23, 0.33), Gone(0.0, 0.01, 0.28))
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
