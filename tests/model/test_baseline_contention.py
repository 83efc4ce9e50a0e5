"""A busy host is not a slower guest: host-CPU-bound numbers are judged against a baseline only
when neither run's vCPUs waited for the host beyond WAIT_MAX_PCT (model/across/contention.py).

The numbers are the queue-depth rule's on virtio-blk under TCG on this project's 2-core machine:
the guest's vCPU wait (libvirt's vcpu.0.delay over the window) and its IOPS at depth 32, on an
idle host, a lightly busy one, and beside one to three busy loops."""

from __future__ import annotations

import pytest

from model.across.against_baseline import against_baseline, host_contention, series_of
from model.across.contention import HOST_CPU_BOUND, WAIT_MAX_PCT
from model.across.moves import Series, moved_metrics
from model.judging.verdict import RuleVerdict
from model.parse.hostcpu import HostCpuShare, VcpuTimes, from_domain_stats

PASSED = RuleVerdict("queue-depth", ("measured",), ())
#: an idle host's run (wait 6.68 %) as the baseline
QUIET = {"qd32_iops": 5071.2, "qd32_host_average_depth": 27.9, "host_request_bytes_p50": 4096.0,
         "host_vcpu_wait_pct": 6.68}


def _base(props: dict[str, float]) -> dict[str, Series]:
    return series_of(props)


def test_a_healthy_run_on_a_busy_host_is_not_a_regression() -> None:
    """Three busy loops beside the guest: its vCPUs waited 21.64 %, qd32_iops fell 24 %. Before the
    wait was recorded this failed as "worse than the baseline"."""
    busy = {"qd32_iops": 3841.3, "qd32_host_average_depth": 22.8, "host_request_bytes_p50": 4096.0,
            "host_vcpu_wait_pct": 21.64}
    v = against_baseline(PASSED, busy, _base(QUIET), "run 1")
    assert v.passed, v.problems
    assert v.properties["baseline_metrics_not_judged"] == 2 and v.properties["baseline_metrics_judged"] == 1
    assert "21.64 % in this run and 6.68 % in the baseline" in str(v.properties["baseline_not_judged"])
    assert any(n.startswith("moved since the baseline, not judged (a busy host): qd32_iops: 5071.2 -> 3841.3")
               for n in v.notes), v.notes
    # the same numbers without the wait figures: judged, and (as before) a regression
    blind = against_baseline(PASSED, {k: x for k, x in busy.items() if k != "host_vcpu_wait_pct"},
                             _base({k: x for k, x in QUIET.items() if k != "host_vcpu_wait_pct"}), "run 1")
    assert not blind.passed and "qd32_iops" in str(blind.properties["baseline_worse"])


def test_quiet_runs_are_judged_and_a_real_regression_fails() -> None:
    light = {**QUIET, "qd32_iops": 4844.5, "host_vcpu_wait_pct": 9.29}  # load 1.3-2: inside the noise
    assert against_baseline(PASSED, light, _base(QUIET), "run 1").passed
    capped = {**QUIET, "qd32_iops": 1000.0, "host_vcpu_wait_pct": 7.4}  # a guest that caps its queue
    v = against_baseline(PASSED, capped, _base(QUIET), "run 1")
    assert not v.passed and v.properties["baseline_worse"] == "qd32_iops"
    assert v.properties["baseline_metrics_not_judged"] == 0


def test_numbers_that_do_not_follow_the_host_cpu_are_judged_on_a_busy_host() -> None:
    split = {**QUIET, "host_request_bytes_p50": 512.0, "host_vcpu_wait_pct": 30.0}
    v = against_baseline(PASSED, split, _base(QUIET), "run 1")
    assert not v.passed and v.properties["baseline_worse"] == "host_request_bytes_p50"


def test_one_runs_evidence_is_enough_and_none_is_no_allowance() -> None:
    old = _base({k: x for k, x in QUIET.items() if k != "host_vcpu_wait_pct"})  # a run from before the figure
    assert "30 % in this run" in host_contention(series_of({"host_vcpu_wait_pct": 30.0}), old)
    assert host_contention(series_of({"qd32_iops": 1.0}), old) == ""
    assert host_contention(series_of({"host_vcpu_wait_pct": WAIT_MAX_PCT}), _base(QUIET)) == ""
    busy_then = _base({**QUIET, "host_vcpu_wait_pct": 25.0})
    assert "25 % in the baseline" in host_contention(series_of({"host_vcpu_wait_pct": 5.0}), busy_then)


@pytest.mark.parametrize("name", ["qd32_iops", "qd1_iops", "fio_iops", "iops_scaling", "latency_added_p50_us",
                                  "latency_guest_min_us", "qd32_host_average_depth", "qd32_host_exact_depth_p90",
                                  "qd32_guest_aqu_sz", "qd32_guest_inflight_mean", "buffered_depth_median",
                                  "hold_probe_rtt_max_ms", "guest_max_latency_ms"])
def test_host_cpu_bound_names(name: str) -> None:
    assert HOST_CPU_BOUND.fullmatch(name)


@pytest.mark.parametrize("name", ["split_factor", "host_request_bytes_p50", "misaligned_requests",
                                  "crossing_fraction", "buffered_request_bytes_median", "guest_avg_request_bytes"])
def test_not_host_cpu_bound_names(name: str) -> None:
    assert not HOST_CPU_BOUND.fullmatch(name)


def test_vcpu_shares_from_libvirt_statistics() -> None:
    """libvirt's vCPU group (ns): two vCPUs over 2 s, 1.2 s run and 0.4 s waiting in all."""
    a = from_domain_stats({"vcpu.current": 2, "vcpu.maximum": 2, "vcpu.0.time": 10**9, "vcpu.0.delay": 10**8,
                           "vcpu.1.time": 10**9, "vcpu.1.delay": 0, "vcpu.0.state": 1}, 100.0)
    b = from_domain_stats({"vcpu.current": 2, "vcpu.0.time": 2 * 10**9, "vcpu.0.delay": 4 * 10**8,
                           "vcpu.1.time": 12 * 10**8, "vcpu.1.delay": 10**8}, 102.0)
    assert a == VcpuTimes(2, 2 * 10**9, 10**8, 100.0)
    assert b is not None and HostCpuShare.between(a, b) == HostCpuShare(30.0, 10.0)
    assert from_domain_stats({"vcpu.current": 1, "vcpu.0.time": 5}, 1.0) is None  # libvirt without delay
    assert from_domain_stats({}, 1.0) is None
    assert HostCpuShare.between(b, a) is None  # counters going back: another VM of the same name
    assert HostCpuShare.between(a, VcpuTimes(1, 3 * 10**9, 10**9, 101.0)) is None  # vCPUs changed


def test_the_hosts_own_figures_are_evidence_never_a_move() -> None:
    """A CI run compared io-size with its baseline minutes before on the same guest, and the vCPU
    wait (a parameter) was reported as moved: how busy the host was is no change of the guest."""
    v = against_baseline(PASSED, {**QUIET, "host_vcpu_wait_pct": 9.9, "host_vcpu_run_pct": 40.0},
                         _base({**QUIET, "host_vcpu_run_pct": 10.0}), "run 1")
    assert v.passed and v.properties["baseline_moved"] == "" and v.properties["baseline_metrics_compared"] == 3
    a = {("r", "c", "host_vcpu_wait_pct"): Series("%", "parameter", (1.0, 1.1, 1.2, 1.0))}
    b = {("r", "c", "host_vcpu_wait_pct"): Series("%", "parameter", (30.0, 31.0, 32.0, 30.0))}
    assert moved_metrics(a, b) == []
