"""bench.trace_overhead's arithmetic on made-up pairs: each pair's cost, the intervals beside the
median and the mean, and what it says of the 3 % goal."""

from __future__ import annotations

import random

import pytest

pytest.importorskip("libvirt")  # the bench imports the libvirt backend (tox -e unit has none)

from bench.trace_overhead import Slice, bootstrap_median, order, pair_costs, quiet_pairs, t_mean, verdict
from bench.trace_profile import Interval


def test_a_pairs_cost_is_its_traced_loss_in_percent_of_its_untraced_iops() -> None:
    assert pair_costs([4000.0, 3000.0], [3880.0, 3090.0]) == pytest.approx([3.0, -3.0])


def test_the_pairs_alternate_abba() -> None:
    assert [order(p) for p in range(4)] == [(False, True), (True, False), (False, True), (True, False)]


def test_paired_costs_resolve_a_shift_that_separate_windows_drown() -> None:
    """Untraced IOPS drifting over 2,700-3,900 (the spread separate windows saw), traced 1 % lower
    than its neighbour with 1 % noise of its own: the median's interval holds 1 % and is narrower
    than the 3 % goal; the medians of the two sides alone differ by more than the cost."""
    rng = random.Random(7)
    untraced = [rng.uniform(2700, 3900) for _ in range(30)]
    traced = [u * (0.99 + rng.gauss(0, 0.01)) for u in untraced]
    med, mean = bootstrap_median(pair_costs(untraced, traced)), t_mean(pair_costs(untraced, traced))
    for i in (med, mean):
        assert i.low_pct < 1.0 < i.high_pct and i.width_pct < 3.0, i
    assert verdict(med) == "goal 3 %: met"


def test_the_verdict_needs_the_whole_interval() -> None:
    assert verdict(Interval(1.0, -0.4, 2.5)) == "goal 3 %: met"
    assert verdict(Interval(5.0, 3.5, 6.0)) == "goal 3 %: MISSED"
    assert verdict(Interval(2.0, 0.5, 4.0)).startswith("goal 3 %: unresolved")
    assert verdict(Interval(0.0, -2.0, 2.0)).startswith("goal 3 %: unresolved")  # under, but 4 % wide


def test_t_interval_of_two_pairs_uses_students_quantile() -> None:
    i = t_mean([1.0, 3.0])
    assert i.value_pct == 2.0 and i.low_pct == pytest.approx(2.0 - 12.71) and i.high_pct == pytest.approx(2.0 + 12.71)


def test_quiet_pairs_are_those_whose_vcpus_waited_little_on_both_sides() -> None:
    """A pair where the guest waited for the host's CPU (over model/across/contention.py's 10 %) in either
    slice measures the host's other jobs: left out, as is one whose wait is unknown."""
    untraced = [Slice(3000, 6.5), Slice(1200, 40.0), Slice(3100, 8.0), Slice(2900, None)]
    traced = [Slice(2950, 7.0), Slice(2500, 9.0), Slice(3000, 35.0), Slice(2800, 6.0)]
    assert quiet_pairs(untraced, traced) == ([3000], [2950])
