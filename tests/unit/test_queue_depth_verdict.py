"""Rule 1's arithmetic on numbers recorded from real guests on this machine (TCG, 5 ms null-co)."""

from __future__ import annotations

import pytest

from model.rules.queue_depth import HOST_DEPTH_MIN_FRACTION, DepthPoint, expected_depth, judge_queue_depth

AVG = "average (Little's law on host counters)"


def point(depth: int, iops: float, host: float, aqu: float, inflight: float, mode: str | None = None) -> DepthPoint:
    return DepthPoint(depth, iops, mode or str(depth), aqu, inflight, host, host * 0.97, host * 1.03, AVG)


# Recorded: healthy virtio-scsi run (results of `tox -e suite`, 2026-11-22).
HEALTHY = [point(1, 151.7, 0.85, 0.92, 0.79), point(32, 4851.4, 25.37, 27.03, 27.61)]
# Recorded: the same disk with --inject tcq-off (guest queue_depth=1).
TCQ_OFF = [point(1, 144.0, 0.8, 0.9, 0.8), point(32, 153.0, 0.8, 30.1, 1.0)]


def test_healthy_virtio_scsi_passes() -> None:
    v = judge_queue_depth(HEALTHY, device_queue_depth=128)
    assert v.passed, v.explain()
    assert v.problems == ()


def test_tcq_off_fails_on_depth_and_on_scaling() -> None:
    v = judge_queue_depth(TCQ_OFF, device_queue_depth=128)
    assert not v.passed
    assert len(v.problems) == 2
    text = v.explain()
    # The failure shows offered, guest-observed and host-observed depth and the IOPS.
    for needle in ("offered  32", "aqu-sz 30.1", "inflight 1.0", "host depth 0.8", "IOPS 153", "12.8"):
        assert needle in text, (needle, text)


def test_solaris_signature_three_in_flight_fails() -> None:
    v = judge_queue_depth([point(1, 150, 0.85, 0.9, 0.8), point(32, 600, 3.0, 31, 3)], 64)
    assert not v.passed
    assert "host saw 3.0 in flight" in v.problems[0]


def test_device_limit_caps_expectation() -> None:
    # An LSI 53C895A-like device queues 16: 8 in flight at offered 32 is 0.5 x 16, which passes.
    assert expected_depth(32, 16) == 16
    v = judge_queue_depth([point(1, 150, 0.85, 0.9, 0.8), point(32, 1200, 8.0, 31, 8)], 16)
    assert v.passed, v.explain()


def test_no_command_queuing_is_conforming_unless_required() -> None:
    pts = [point(1, 150, 0.85, 0.9, 0.8), point(32, 152, 0.9, 31, 1.0)]
    ok = judge_queue_depth(pts, 1)
    assert ok.passed and "no command queuing" in ok.notes[0]
    strict = judge_queue_depth(pts, 1, require_queuing=True)
    assert not strict.passed and "--require-queuing" in strict.problems[0]


def test_host_seeing_more_than_offered_is_a_measurement_failure() -> None:
    v = judge_queue_depth([point(1, 150, 3.0, 0.9, 0.8)], 128)
    assert not v.passed and "more than offered" in v.problems[0]


def test_threshold_boundary() -> None:
    floor = HOST_DEPTH_MIN_FRACTION * 32
    just_above = judge_queue_depth([point(1, 150, 0.85, 1, 1), point(32, 4800, floor + 0.01, 30, 20)], 128)
    just_below = judge_queue_depth([point(1, 150, 0.85, 1, 1), point(32, 4800, floor - 0.01, 30, 20)], 128)
    assert just_above.passed and not just_below.passed


def test_properties_carry_every_number() -> None:
    props = judge_queue_depth(HEALTHY, 128).properties()
    assert props["qd32_host_depth"] == 25.37 and props["qd1_iops"] == 151.7
    assert props["qd32_host_source"] == AVG and props["device_queue_depth"] == 128


def test_needs_a_point() -> None:
    with pytest.raises(ValueError):
        judge_queue_depth([], 128)
