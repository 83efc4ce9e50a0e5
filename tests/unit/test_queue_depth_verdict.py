"""Rule 1's arithmetic on numbers recorded from real guests on this machine (TCG, 5 ms null-co)."""

from __future__ import annotations

import pytest

from model.rules.figures import DepthFigure, DepthGroup
from model.rules.queue_depth import (
    HOST_DEPTH_ABSOLUTE_MIN_FRACTION,
    HOST_DEPTH_MIN_FRACTION,
    DepthPoint,
    expected_depth,
    judge_queue_depth,
)

AVG = "average (Little's law on host counters)"
EXACT = "exact (QEMU trace events), median; p10-p90"


def point(depth: int, iops: float, host: float, aqu: float, inflight: float, mode: str | None = None,
          source: str = AVG) -> DepthPoint:
    return DepthPoint(depth, iops, mode or str(depth), aqu, inflight, host, host * 0.97, host * 1.03, source)


# Recorded: healthy virtio-scsi run (results of `tox -e suite`, 2026-11-22).
HEALTHY = [point(1, 151.7, 0.85, 0.92, 0.79), point(32, 4851.4, 25.37, 27.03, 27.61)]
# Recorded: the same disk with --inject tcq-off (guest queue_depth=1).
TCQ_OFF = [point(1, 144.0, 0.8, 0.9, 0.8), point(32, 153.0, 0.8, 30.1, 1.0)]
# Recorded: tcq-off on virtio-scsi on a loaded host (load average 7 on 2 cores), traced host depth.
TCQ_OFF_LOADED = [point(1, 70.5, 1.0, 0.68, 0.57, source=EXACT), point(32, 92.9, 1.0, 23.05, 0.86, source=EXACT)]
# Recorded: healthy guests running a CPU hog (--guest-setup 'while :; do :; done') on that loaded
# host, with the host's average (Little's law: the verdict's figure where there are no trace
# events). virtio-blk: at depth 1 the guest's block layer held 0.56 and the host 0.33, under
# 0.4 = 0.4 x 1; virtio-scsi at depth 32: held 15 of 32, host 12.5, under 12.8 = 0.4 x 32.
SLOW_HEALTHY_BLK = [point(1, 89.8, 0.33, 0.56, 0.5), point(32, 2103.6, 14.23, 14.35, 8.38)]
SLOW_HEALTHY_SCSI_QD32 = point(32, 1921.3, 12.47, 14.95, 11.7)

def test_healthy_virtio_scsi_passes() -> None:
    v = judge_queue_depth(HEALTHY, device_queue_depth=128)
    assert v.passed, v.explain()
    assert v.problems == () and v.notes == ()


@pytest.mark.parametrize("points", [TCQ_OFF, TCQ_OFF_LOADED], ids=["idle-host", "loaded-host"])
def test_tcq_off_fails_on_depth_and_on_scaling(points: list[DepthPoint]) -> None:
    v = judge_queue_depth(points, device_queue_depth=128)
    assert not v.passed
    assert len(v.problems) == 2
    assert "what reached the guest's block layer" in v.problems[0]
    assert "IOPS scaled" in v.problems[1]


def test_tcq_off_failure_prints_every_number() -> None:
    text = judge_queue_depth(TCQ_OFF, device_queue_depth=128).explain()
    # offered, guest-observed (fio, aqu-sz, inflight) and host-observed depth, the IOPS,
    # both bars (0.4 x 30.1 held, 0.4 x 32 offered), the floor and the scaling's aqu-sz ratio
    for needle in ("offered  32", "aqu-sz 30.1", "inflight 1.0", "host depth 0.8", "IOPS 153", "at depth 32",
                   "12.0 = 0.4 x min(32, device limit 128, aqu-sz 30.1)", "12.8 = 0.4 x min(32, device limit 128)",
                   "3.2 = 0.1 x min(32, device limit 128)", "scaled 1.1x", "12.8x = 0.4 x 32",
                   "aqu-sz ratio 30.1/0.9 = 33.4"):
        assert needle in text, (needle, text)


@pytest.mark.parametrize("points", [SLOW_HEALTHY_BLK, [SLOW_HEALTHY_SCSI_QD32]], ids=["virtio-blk", "virtio-scsi"])
def test_slow_guest_cpu_does_not_fail_a_healthy_device(points: list[DepthPoint]) -> None:
    v = judge_queue_depth(points, device_queue_depth=128)
    assert v.passed, v.explain()
    # judged against the offered depth alone one point would have failed: the note says who kept it low
    low = [p for p in points if p.host_depth < HOST_DEPTH_MIN_FRACTION * p.offered_depth]
    assert len(low) == 1
    assert any(f"held only {low[0].guest_aqu_sz:.1f}" in n and "not the device" in n for n in v.notes), v.notes


def test_slow_guest_holding_half_passes_and_says_so() -> None:
    # the slow moment of a healthy run: the guest held 16 of 32, the host 16.0 (>= 12.8 anyway)
    v = judge_queue_depth([point(1, 150, 0.85, 0.9, 0.8), point(32, 2400, 16.0, 16.0, 15.0)], 128)
    assert v.passed, v.explain()
    # a slower one: 10 of 32 in the guest, 9 at the host, IOPS 11x (< 12.8x, > 0.4 x 11.1)
    v = judge_queue_depth([point(1, 150, 0.85, 0.9, 0.8), point(32, 1650, 9.0, 10.0, 9.5)], 128)
    assert v.passed, v.explain()
    assert len(v.notes) == 2 and "IOPS scaled 11.0x" in v.notes[1], v.notes


def test_tcq_off_on_a_slow_guest_still_fails() -> None:
    # the guest's block layer held only 8, yet the device saw 1: lost below the block layer
    v = judge_queue_depth([point(1, 100, 0.85, 0.9, 0.8), point(32, 120, 1.0, 8.0, 1.0)], 128)
    assert not v.passed
    assert "host saw 1.0 in flight; expected at least 3.2" in v.problems[0], v.problems


def test_solaris_signature_three_in_flight_fails() -> None:
    v = judge_queue_depth([point(1, 150, 0.85, 0.9, 0.8), point(32, 600, 3.0, 31, 3)], 64)
    assert not v.passed
    assert "host saw 3.0 in flight" in v.problems[0]


def test_a_guest_holding_almost_nothing_cannot_excuse_the_device() -> None:
    # host == guest-held, but 2 of 32 is the Solaris signature: the absolute floor fails it
    v = judge_queue_depth([point(1, 150, 0.85, 0.9, 0.8), point(32, 300, 2.0, 2.5, 2.0)], 128)
    assert not v.passed
    assert "expected at least 3.2 = 0.1 x min(32, device limit 128), whatever the guest held" in v.problems[0]
    assert "whatever the guest held" in v.problems[1]  # IOPS 2.0x < 3.2x


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


@pytest.mark.parametrize("aqu, bar", [
    (32.0, HOST_DEPTH_MIN_FRACTION * 32),  # the guest held all: 0.4 x offered
    (20.0, HOST_DEPTH_MIN_FRACTION * 20),  # it held 20: 0.4 x 20
    (5.0, HOST_DEPTH_ABSOLUTE_MIN_FRACTION * 32),  # it held 5: 0.4 x 5 = 2.0 is under the floor 3.2
])
def test_threshold_boundary(aqu: float, bar: float) -> None:
    def judge(host: float) -> bool:
        return judge_queue_depth([point(1, 150, 0.85, 1, 1), point(32, 4800, host, aqu, 20)], 128).passed

    assert judge(bar + 0.01) and not judge(bar - 0.01)


def test_properties_carry_every_number() -> None:
    props = judge_queue_depth(HEALTHY, 128).properties
    assert props["qd32_host_depth"] == 25.37 and props["qd1_iops"] == 151.7
    assert props["qd32_host_source"] == AVG and props["device_queue_depth"] == 128
    assert props["qd32_host_required_from_offered"] == 12.8
    assert props["qd32_host_required_from_guest"] == round(0.4 * 27.03, 2) == props["qd32_host_required"]
    assert props["iops_scaling"] == round(4851.4 / 151.7, 2) and props["iops_scaling_required_from_offered"] == 12.8
    assert props["iops_scaling_required"] == round(0.4 * 27.03 / 0.92, 2)  # the aqu-sz ratio, 29.4, is lower


def test_verdict_is_a_rule_verdict_with_the_depth_picture() -> None:
    v = judge_queue_depth(list(reversed(TCQ_OFF)), 128)
    assert v.rule == "queue-depth"
    assert v.figures == (DepthFigure((DepthGroup(1, 0.9, 0.8), DepthGroup(32, 30.1, 0.8))),)  # by offered depth
    no_queuing = judge_queue_depth([point(1, 150, 0.85, 0.9, 0.8), point(32, 152, 0.9, 31, 1.0)], 1)
    assert no_queuing.record_properties()["notes"] == "no command queuing: the device accepts one command at a time"


def test_needs_a_point() -> None:
    with pytest.raises(ValueError):
        judge_queue_depth([], 128)
