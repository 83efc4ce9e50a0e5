"""The lifecycle rules' figures (model/judging/figures.py's RangeFigure and TimelineFigure), built by each
judge from its own run data: the numbers are the real runs of tests/model/test_discard.py,
test_resize.py and test_hotplug.py."""

from __future__ import annotations

import dataclasses
from typing import TypeVar

import pytest

from model.judging.figures import PRESENCE_LEVELS, Change, PairFigure, RangeFigure, TimelineFigure, size_text
from model.judging.verdict import RuleVerdict, combine_repeats
from model.rules.discard import RANGES, DiscardLimits, RangeSeen, judge_discard
from model.rules.hotplug import Gone, judge_hotplug
from model.rules.resize import GROW_BYTES, bound_for, judge_resize
from tests.model.test_discard import BLK, SCSI, WHERE, _healthy
from tests.model.test_hotplug import BLK as HOTPLUG_BLK
from tests.model.test_hotplug import BLK_SURPRISE, SCSI_OFF, SCSI_SURPRISE
from tests.model.test_resize import GIB, _run

ALIGNED, UNALIGNED, BEYOND = RANGES
F = TypeVar("F", RangeFigure, TimelineFigure, PairFigure)


def _one(v: RuleVerdict, kind: type[F]) -> list[F]:
    """The verdict's figures of one kind, in order."""
    return [f for f in v.figures if isinstance(f, kind)]


def _changes(fig: TimelineFigure, label: str) -> list[tuple[object, float]]:
    """A series' changes as (time, value), the time compared to the millisecond's float error."""
    series = next(s for s in fig.series if s.label == label)
    return [(pytest.approx(c.t_s), c.value) for c in series.changes]


def test_discard_draws_the_guests_ranges_over_the_hosts_amounts() -> None:
    (fig,) = _one(judge_discard(SCSI, _healthy(SCSI, True), WHERE, "sdb"), RangeFigure)
    assert [(lane.label, lane.side, lane.placed) for lane in fig.lanes] == [
        ("guest: discarded", "guest", True), ("host: discards counted", "host", False),
        ("host: device counted", "host", False), ("host: allocation freed", "host", False)]
    guest, counted, device, freed = fig.lanes
    assert [(r.label, r.offset_bytes, r.length_bytes, r.failed) for r in guest.ranges] == [
        (r.name, r.offset_bytes, r.length_bytes, False) for r in RANGES]
    # the file node took the unaligned range in two requests, the beyond_max one in eight of 256 KiB
    assert [(r.length_bytes, r.note) for r in counted.ranges] == [
        (ALIGNED.length_bytes, "1 request"), (UNALIGNED.length_bytes, "2 requests"), (BEYOND.length_bytes, "8 requests")]
    # the amounts sit at their range's start: the counters say how much, not where
    assert [r.offset_bytes for r in counted.ranges] == [r.offset_bytes for r in RANGES]
    assert [r.length_bytes for r in device.ranges] == [r.length_bytes for r in RANGES]
    # the unaligned range keeps its two partial granules' 2560 bytes
    assert [(r.length_bytes, r.note) for r in freed.ranges][1] == (UNALIGNED.length_bytes - 2560, "2560 bytes kept")
    assert "how much, not where" in fig.note and "8192 bytes" in fig.note and not fig.empty


def test_discard_on_virtio_blk_shows_the_device_counting_nothing() -> None:
    (fig,) = _one(judge_discard(BLK, _healthy(BLK, False), WHERE, "vdb"), RangeFigure)
    device = next(lane for lane in fig.lanes if lane.label == "host: device counted")
    assert [(r.length_bytes, r.note) for r in device.ranges] == [(0, "0 requests")] * 3


def test_discard_off_draws_refused_ranges_and_nothing_on_the_host() -> None:
    error = "blkdiscard: /dev/vdb: BLKDISCARD failed: Operation not supported"
    seen = [RangeSeen(r, error, 0, 0, 0, r.length_bytes, r.length_bytes, 0, 0, 0) for r in RANGES]
    (fig,) = _one(judge_discard(DiscardLimits(512, 0, 2147483136), seen, WHERE, "vdb"), RangeFigure)
    guest, counted, _, freed = fig.lanes
    assert all(r.failed and r.note == "refused" for r in guest.ranges)
    assert [r.length_bytes for r in counted.ranges] == [0, 0, 0]
    assert [r.note for r in freed.ranges] == [f"{r.length_bytes} bytes kept" for r in RANGES]


def test_discard_without_allocation_or_device_counts_has_two_lanes() -> None:
    seen = [RangeSeen(BEYOND, "", 8, BEYOND.length_bytes, 0, None, None, 256 << 10)]
    (fig,) = _one(judge_discard(SCSI, seen, WHERE, "sdb"), RangeFigure)
    assert [lane.label for lane in fig.lanes] == ["guest: discarded", "host: discards counted"]
    assert "allocation" not in fig.note


def test_a_device_without_discard_has_an_empty_figure_that_says_why() -> None:
    (fig,) = _one(judge_discard(DiscardLimits(0, 0, 0), [], WHERE, "hdb"), RangeFigure)
    assert fig.empty and fig.note == "no range was discarded: the device does not advertise discard"


def test_resize_draws_each_step_from_the_hosts_request() -> None:
    v = judge_resize(_run("virtio_blk", "vdb", 0.108, 0.09), bound_for("virtio_blk"))
    grow, shrink = _one(v, TimelineFigure)
    assert grow.clock == "s from the host's grow request" and grow.unit == "bytes"
    # the host's size changes when its call returned (0.004 s), the guest's 0.108 s after that
    assert _changes(grow, "host size") == [(0.0, GIB), (0.004, GIB + GROW_BYTES)]
    assert _changes(grow, "guest size") == [(0.0, GIB), (0.112, GIB + GROW_BYTES)]
    assert [m.label for m in grow.markers] == ["host call returned", "guest showed the host's size"]
    assert [m.t_s for m in grow.markers] == pytest.approx([0.004, 0.112])
    assert grow.end_s == pytest.approx(0.112)
    assert _changes(shrink, "guest size") == [(0.0, GIB + GROW_BYTES), (0.093, GIB)]
    assert "not measured" in grow.note


def test_resize_a_guest_that_never_sees_the_size_keeps_it_to_the_bound() -> None:
    v = judge_resize(_run("sd", "sdb", None, 0.05, grow_guest=GIB), bound_for("sd"))
    grow, shrink = _one(v, TimelineFigure)
    assert _changes(grow, "guest size") == [(0.0, GIB)]
    assert grow.end_s == pytest.approx(5.004) and grow.markers[-1].label == "guest's wait ended at the bound"
    # the shrink starts from what the guest showed after the grow: it already had that size
    assert _changes(shrink, "guest size") == [(0.0, GIB)]
    other = judge_resize(_run("virtio_blk", "vdb", None, 0.05, grow_guest=GIB + GROW_BYTES // 2),
                         bound_for("virtio_blk"))
    assert _changes(_one(other, TimelineFigure)[0], "guest size") == [(0.0, GIB), (5.004, GIB + GROW_BYTES // 2)]
    late = judge_resize(_run("virtio_blk", "vdb", 0.108, 5.6), bound_for("virtio_blk"))
    assert [m.label for m in _one(late, TimelineFigure)[1].markers][-1] == "the bound"


def test_hotplug_draws_the_disk_present_on_each_side_on_one_clock() -> None:
    v = judge_hotplug(HOTPLUG_BLK)
    assert len(_one(v, PairFigure)) == 1  # the pairs stay
    (fig,) = _one(v, TimelineFigure)
    assert fig.levels == PRESENCE_LEVELS and fig.clock == "s from the host's add request"
    # attach returned at 0.02 s, the guest showed vdc at 0.33 s; the remove request follows at once, the
    # guest's /sys/block/vdc gone 0.01 s after it returned, the host's XML 0.28 s after the request
    assert _changes(fig, "host: disk present") == [(0.0, 0.0), (0.02, 1.0), (0.61, 0.0)]
    assert _changes(fig, "guest: disk present") == [(0.0, 0.0), (0.33, 1.0), (0.34, 0.0)]
    assert [m.label for m in fig.markers] == ["host: add request returned", "host: remove request"]
    assert fig.end_s == pytest.approx(0.61)
    # the guest's wait for the disk to go starts when the remove request returned (here at once)
    slow = dataclasses.replace(HOTPLUG_BLK, gone=Gone(0.05, 0.01, 0.28))
    (later,) = _one(judge_hotplug(slow), TimelineFigure)
    assert _changes(later, "guest: disk present")[-1] == (0.39, 0.0)


def test_hotplug_never_seen_or_kept_runs_to_the_bound() -> None:
    (never,) = _one(judge_hotplug(SCSI_OFF), TimelineFigure)
    assert _changes(never, "guest: disk present") == [(0.0, 0.0)]
    assert never.end_s == pytest.approx(5.02) and never.markers[-1].label == "guest's wait ended at the bound"
    (kept,) = _one(judge_hotplug(dataclasses.replace(HOTPLUG_BLK, gone=Gone(0.0, None, None))), TimelineFigure)
    assert _changes(kept, "host: disk present")[-1] == (0.02, 1.0)
    assert kept.end_s == pytest.approx(0.33 + 5.0)


def test_hotplug_surprise_removal_has_its_own_clock() -> None:
    scsi = _one(judge_hotplug(dataclasses.replace(HOTPLUG_BLK, controller="virtio-scsi", surprise=SCSI_SURPRISE)),
                TimelineFigure)
    assert len(scsi) == 2
    surprise = scsi[1]
    assert surprise.clock == "s from the host's remove request"
    # fio ended 0.15 s after the request; the guest's wait (0.01 s) began then; the host's XML after 0.47 s
    assert _changes(surprise, "host: disk present") == [(0.0, 1.0), (0.47, 0.0)]
    assert _changes(surprise, "guest: disk present") == [(0.0, 1.0), (0.16, 0.0)]
    assert [(m.label, m.t_s) for m in surprise.markers] == [("fio ended", 0.15)]
    blk = _one(judge_hotplug(dataclasses.replace(HOTPLUG_BLK, surprise=BLK_SURPRISE)), TimelineFigure)[1]
    # fio never ended: the guest's wait began after the bound; the host dropped the disk at 6.07 s
    assert blk.markers[0].label == "fio still reading at the bound" and blk.markers[0].t_s == 5.0
    assert _changes(blk, "guest: disk present")[-1] == (5.0, 0.0) and blk.end_s == pytest.approx(6.07)


def test_repeats_keep_the_shown_repeats_figures() -> None:
    a = judge_resize(_run("virtio_blk", "vdb", 0.108, 0.09), bound_for("virtio_blk"))
    b = judge_resize(_run("virtio_blk", "vdb", 0.2, 0.1), bound_for("virtio_blk"))
    assert combine_repeats([a, b], exact=True).figures == a.figures


def test_timeline_values_and_sizes_in_words() -> None:
    fig = TimelineFigure("t", "s", (), 1.0, unit="bytes")
    assert fig.empty and fig.value_text(GIB + GROW_BYTES) == "1088 MiB"
    assert TimelineFigure("t", "s", (), 1.0, levels=PRESENCE_LEVELS).value_text(1.0) == "present"
    assert [size_text(n) for n in (UNALIGNED.length_bytes, 4096, 1536, 0, -4096)] == [
        "1 MiB + 2560 bytes", "4 KiB", "1536 bytes", "0 bytes", "-4 KiB"]
    assert Change(0.5, 1.0) == Change(0.5, 1.0)
