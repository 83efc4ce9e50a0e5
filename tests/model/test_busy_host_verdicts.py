"""A loaded host is no verdict: the rules whose quiet-host bars a busy host missed (queue-depth, throttle,
stall-tolerance) leave them unjudged where the guest's vCPUs waited for a host CPU beyond the derived bound,
so the test ends in HostBusy (suites/assertions.py's ``conclude``), while the floors and checks their faults
fail on stay judged at any load; a fio that would not stop while the vCPUs waited is HostBusy; multi-queue
skips a guest with one vCPU. Every figure is recorded (where and at what load: beside each)."""

from __future__ import annotations

import dataclasses

import pytest

from model.judging.host_busy import BOUND_WAIT_MAX_PCT, WAIT_MAX_PCT, HostBusy, busy_stop, held_back_reason
from model.judging.verdict import RuleVerdict
from model.parse.stall_evidence import parse_command_timeout
from model.parse.throttle_limits import ThrottleLimits
from model.rules.multi_queue import judge_multiqueue, not_applicable
from model.rules.queue_depth import DepthPoint, judge_queue_depth
from model.rules.stall_tolerance import DEFAULT_STALL_S, StallRun, hold_problem, judge_stall_tolerance
from model.rules.throttle import RULE_IOPS, ThrottlePhase, judge_throttle
from tests.model.test_throttle import recorded

EXACT = "exact (QEMU trace events), median; p10-p90"
AVG = "average (Little's law on host counters), median of 1 s windows; min-max"
#: The vCPU wait the CI lane's failures below did not record (its raw data is gone): their runs were at load
#: 12-30, where the recorded runs' most contended windows show 59-81 % (healthy queue-depth at 66.21 %,
#: tcq-off at 67.73 %, throttle at 80.65 %). The tests take 66.21; any figure above WAIT_MAX_PCT judges alike.
LOADED_WAIT = 66.21


def busy(v: RuleVerdict) -> bool:
    """What ``conclude`` makes of a verdict: HostBusy where it passed with a bar left unjudged."""
    return v.passed and bool(held_back_reason(v.properties))


def qd(depth: int, iops: float, aqu: float, inflight: float, host: float, lo: float, hi: float, source: str,
       cpu: float, wait: float | None) -> DepthPoint:
    return DepthPoint(depth, iops, str(depth), aqu, inflight, host, lo, hi, source, guest_cpu_busy_pct=cpu,
                      vcpu_wait_pct=wait)


def starved(wait: float | None) -> dict[str, tuple[list[DepthPoint], int]]:
    """Recorded: the CI lane's controllers run (tests/e2e/test_controllers.py, 2026-12-07 18:03-18:12 UTC, load
    12-30): healthy megasas, ahci and ide guests whose depth-1 IOPS fell to 22-50 (about 140 on a quiet host)."""
    return {
        "megasas": ([qd(1, 24, 0.5, 0.6, 1.0, 1.0, 1.0, EXACT, 80, wait),
                     qd(32, 160, 14.6, 13.8, 17.0, 3.0, 30.0, EXACT, 87, wait)], 256),
        "ahci": ([qd(1, 50, 0.9, 0.5, 1.0, 1.0, 1.0, EXACT, 56, wait),
                  qd(32, 276, 15.4, 4.5, 16.0, 4.0, 29.0, EXACT, 80, wait)], 32),
        "ide": ([qd(1, 22, 0.8, 0.4, 0.3, 0.3, 0.4, AVG, 82, wait), qd(32, 9, 1.6, 0.6, 0.3, 0.2, 0.3, AVG, 67, wait)], 1),
    }


@pytest.mark.parametrize("controller", ["megasas", "ahci", "ide"])
def test_a_starved_healthy_guest_is_host_busy_not_failed(controller: str) -> None:
    points, device = starved(None)[controller]
    before = judge_queue_depth(points, device)  # no wait read (vSphere, or before it was recorded): judged
    assert not before.passed, before.explain()
    points, device = starved(LOADED_WAIT)[controller]
    after = judge_queue_depth(points, device)
    assert busy(after), after.explain()
    assert f"waited for a host CPU {LOADED_WAIT:g} %" in held_back_reason(after.properties)
    assert after.properties["qd1_vcpu_wait_pct"] == round(LOADED_WAIT, 1)


def test_the_allowance_starts_above_the_quiet_hosts_wait() -> None:
    points, device = starved(WAIT_MAX_PCT)["megasas"]
    assert not judge_queue_depth(points, device).passed  # a quiet host's wait judges the bar


#: Recorded: --inject tcq-off on virtio-scsi (QEMU 7.2, TCG, traced), the vCPUs waiting 67.73 % and 46.24 % of
#: the test's most contended window (the lead's r2 run and the kernels bench's 6.12 run, 2026-12-07).
TCQ_OFF_LOADED = {
    67.73: [qd(1, 33.9, 0.97, 0.69, 1.0, 1.0, 1.0, EXACT, 51.6, 67.73),
            qd(32, 44.3, 27.07, 0.86, 1.0, 1.0, 1.0, EXACT, 75.4, 67.73)],
    46.24: [qd(1, 100.1, 0.96, 0.75, 1.0, 1.0, 1.0, EXACT, 37.0, 46.24),
            qd(32, 73.2, 30.51, 1.0, 1.0, 1.0, 1.0, EXACT, 51.1, 46.24)],
}


@pytest.mark.parametrize("wait", sorted(TCQ_OFF_LOADED))
def test_tcq_off_still_fails_on_the_loaded_host(wait: float) -> None:
    v = judge_queue_depth(TCQ_OFF_LOADED[wait], 128)
    assert not v.passed and not held_back_reason(v.properties), v.explain()
    assert any("at offered depth 32 the host saw 1.0" in p for p in v.problems)
    assert any("IOPS scaled" in p for p in v.problems)


#: Recorded: the opt-in healthy run in CI (tests/e2e/test_opt_in_healthy.py, 2026-12-07, load about 30):
#: throttle on virtio-scsi, phase again: the guest completed 88 IO/s over a 5.1 s window (its diskstats read
#: an SSH round trip after each end of the host's), the host counted 139 IO/s over its 2.0 s. The other phases
#: passed: the recorded healthy phases stand in for them.
def again_at_load(wait: float | None) -> list[ThrottlePhase]:
    throttled, lifted, again = recorded("phases-virtio-blk-healthy")
    slow = dataclasses.replace(again, guest_s=5.12, guest_ios=450, guest_bytes=450 * 4096, host_s=2.0, host_ios=278,
                               host_bytes=278 * 4096, vcpu_wait_pct=wait)
    return [throttled, lifted, slow]


def test_throttle_rates_of_two_windows_apart_under_load_are_host_busy() -> None:
    limit = ThrottleLimits(iops=RULE_IOPS)
    before = judge_throttle(again_at_load(None), limit, "the rule")
    assert not before.passed and "again: the guest completed 88 IO/s" in before.explain()
    after = judge_throttle(again_at_load(80.65), limit, "the rule")
    assert busy(after), after.explain()
    assert "the guest's window ran 5.1 s against the host's 2.0 s" in held_back_reason(after.properties)
    assert after.properties["again_guest_window_s"] == 5.12 and after.properties["again_vcpu_wait_pct"] == 80.65
    quiet = judge_throttle(again_at_load(WAIT_MAX_PCT), limit, "the rule")
    assert not quiet.passed  # a quiet host's wait: the two sides must agree
    same_window = again_at_load(80.65)
    same_window[2] = dataclasses.replace(same_window[2], guest_s=2.0, guest_ios=176)
    assert not judge_throttle(same_window, limit, "the rule").passed  # the same interval: a real disagreement


def test_the_throttle_burst_fault_still_fails_on_the_loaded_host() -> None:
    phases = [dataclasses.replace(p, vcpu_wait_pct=80.65) for p in recorded("phases-virtio-scsi-burst")]
    v = judge_throttle(phases, ThrottleLimits(iops=RULE_IOPS), "the rule")
    assert not v.passed and not held_back_reason(v.properties), v.explain()


SCSI_30 = parse_command_timeout("io_timeout=30000\ndevice_timeout=30\n", "sdb", "sd")
SCSI_5 = parse_command_timeout("io_timeout=5000\ndevice_timeout=5\n", "sdb", "sd")
#: Recorded: the healthy test image's stall-tolerance in CI (load 13-25): one SSH probe sent in a 2.1 s hold,
#: not answered before the release; 8 held requests completed with no error after it. The probe's answer and
#: the vCPUs' wait were not recorded then: 2.6 s and 85 % (hotplug's vCPUs in the same run) stand in for them.
UNANSWERED = StallRun(hold_s=2.1, host_completions=0, guest_inflight_max=0, probes=1, probes_answered=0,
                      probe_rtt_max_ms=2600.0, guest_ios=52, guest_max_latency_ms=2150.0)


def test_an_unanswered_probe_while_the_vcpus_waited_is_host_busy() -> None:
    assert hold_problem(UNANSWERED) is not None  # no wait read: the harness error, as before
    loaded = dataclasses.replace(UNANSWERED, vcpu_wait_pct=85.0)
    assert hold_problem(loaded) is None
    v = judge_stall_tolerance(SCSI_30, DEFAULT_STALL_S, loaded)
    assert busy(v), v.explain()
    assert "answered none of 1 probes (over SSH)" in held_back_reason(v.properties) and v.properties["hold_vcpu_wait_pct"] == 85.0
    # the wait does not account for a probe 2.6 s late when the vCPUs waited 10 % of the hold
    assert hold_problem(dataclasses.replace(UNANSWERED, vcpu_wait_pct=10.0)) is not None


def test_the_short_timeout_fault_still_fails_on_the_loaded_host() -> None:
    v = judge_stall_tolerance(SCSI_5, DEFAULT_STALL_S, dataclasses.replace(UNANSWERED, vcpu_wait_pct=85.0))
    assert not v.passed and "after 5 s" in v.explain()


def test_a_fio_that_would_not_stop_while_the_vcpus_waited_is_host_busy() -> None:
    late = "fio io1m on vdc was still running 60 s after the suite stopped it (SIGINT)"
    found = busy_stop(late, BOUND_WAIT_MAX_PCT + 1, 60.0)
    assert isinstance(found, HostBusy) and f"{BOUND_WAIT_MAX_PCT + 1:g} %" in str(found) and late in str(found)
    assert busy_stop(late, BOUND_WAIT_MAX_PCT, 60.0) is None  # the guest's own: fio's error stands
    assert busy_stop(late, None, 60.0) is None  # the wait unknown (vSphere): no allowance


def test_multi_queue_skips_a_guest_with_one_vcpu() -> None:
    assert "1 vCPU" in not_applicable(2, 1) and "--guest-vcpus 2" in not_applicable(2, 1)
    assert not_applicable(2, 2) == "" and not_applicable(2) == ""
    assert "one queue configured" in not_applicable(1, 4) and "chooses" in not_applicable(None)
    # the judge itself no longer asks one CPU for two queues (it failed before: "expected 1")
    assert judge_multiqueue(2, 1, 1, {0: 1900}).passed
