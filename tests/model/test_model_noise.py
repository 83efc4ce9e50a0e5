"""Run-to-run noise (model/across/run_to_run.py): one value per run, the CV across runs, the effect it implies."""

from __future__ import annotations

import math

import pytest

from model.across.moves import Series
from model.across.run_to_run import (
    EFFECT_PER_CV,
    MIN_EFFECT_FLOOR,
    min_effect_for,
    run_to_run,
    run_value,
    worst_by_name,
)


def s(*values: float) -> Series:
    return Series("IO/s", "higher-better", values)


def test_a_run_counts_once_with_the_median_of_its_repeats() -> None:
    assert run_value(s(90, 100, 1000)) == 100  # an outlier repeat does not move the run's value
    assert run_value(s(1, 2, 3, 4)) == 2.5


def test_cv_is_taken_across_runs_not_repeats() -> None:
    key = ("queue-depth", "libvirt:virtio-scsi", "qd1_iops")
    # Repeats inside each run are wildly spread; the runs' medians are 95, 100, 105.
    runs = [{key: s(10, 95, 500)}, {key: s(100)}, {key: s(1, 105, 900)}]
    (row,) = run_to_run(runs)
    assert (row.runs, row.mean, row.stdev) == (3, 100, 5)
    assert row.cv == pytest.approx(0.05)


def test_a_metric_in_one_run_only_has_no_spread() -> None:
    a = ("io-size", "c", "split_factor")
    b = ("io-size", "c", "fio_iops")
    rows = run_to_run([{a: s(1), b: s(5)}, {b: s(6)}])
    assert [r.name for r in rows] == ["fio_iops"]


def test_constant_metric_and_zero_mean() -> None:
    key = ("multi-queue", "c", "queues_used")
    (row,) = run_to_run([{key: s(4)}, {key: s(4)}, {key: s(4)}])
    assert row.cv == 0
    (row,) = run_to_run([{key: s(-1)}, {key: s(1)}])
    assert row.mean == 0 and math.isinf(row.cv)


def test_min_effect_is_three_sigma_of_a_difference_with_a_floor() -> None:
    assert pytest.approx(4.2426, abs=1e-4) == EFFECT_PER_CV
    assert min_effect_for(0.05) == pytest.approx(0.2121, abs=1e-4)
    assert min_effect_for(0.0) == MIN_EFFECT_FLOOR


def test_worst_configuration_sets_the_name_s_effect() -> None:
    k1 = ("queue-depth", "libvirt:virtio-scsi", "qd1_iops")
    k2 = ("queue-depth", "libvirt:virtio-blk", "qd1_iops")
    runs = [{k1: s(100), k2: s(100)}, {k1: s(102), k2: s(120)}]
    worst = worst_by_name(run_to_run(runs))
    assert worst["qd1_iops"].config == "libvirt:virtio-blk"


def test_the_minimum_effect_covers_the_widest_change_between_healthy_runs() -> None:
    """Heavy-tailed noise (a latency of 5 us in one run, 40 us in the next, as the TCG latencies
    here): 3 x sqrt 2 x CV alone would call the healthy jump a move."""
    key = ("direct-io", "c", "latency_guest_min_us")
    runs = [{key: Series("us", "lower-better", (v,))} for v in (5, 6, 5, 40, 5, 6, 5, 5, 6, 5)]
    (row,) = run_to_run(runs)
    assert row.widest == pytest.approx(7.0)  # 5 -> 40
    assert row.min_effect == pytest.approx(7.0) and row.min_effect > min_effect_for(row.cv)
    steady = run_to_run([{key: Series("us", "lower-better", (v,))} for v in (100, 102, 98, 101)])[0]
    assert steady.min_effect == min_effect_for(steady.cv)  # normal-looking noise: the 3-sigma rule decides
