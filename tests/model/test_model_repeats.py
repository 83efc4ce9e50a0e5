"""Repeats of a rule (--repeats) and a stored baseline (--baseline RUN): the pure arithmetic."""

from __future__ import annotations

import pytest

from model.across.against_baseline import against_baseline, series_of
from model.across.moves import Series
from model.judging.verdict import RuleVerdict, combine_repeats, repeat_properties


def _v(passed: bool, depth: float, problem: str = "host saw 1") -> RuleVerdict:
    return RuleVerdict("queue-depth", (f"host depth {depth}",), () if passed else (problem,),
                       properties={"qd32_host_depth": depth, "qd32_host_source": "trace"})


def test_one_repeat_is_the_verdict_itself() -> None:
    v = _v(True, 25.0)
    assert combine_repeats([v], exact=False) is v


def test_measured_rules_go_by_the_majority_and_note_the_minority() -> None:
    c = combine_repeats([_v(True, 25.0), _v(False, 3.0, "noisy"), _v(True, 24.0)], exact=False)
    assert c.passed and c.lines[0].startswith("3 repeats: 2 passed, 1 failed; judged by the majority")
    assert any("repeat 2: noisy" in n for n in c.notes)
    assert c.properties["qd32_host_depth.r1"] == 25.0 and c.properties["qd32_host_depth.r2"] == 3.0
    assert c.properties["qd32_host_depth"] == 24.0  # the median
    assert c.properties["qd32_host_source"] == "trace" and (c.properties["repeats"], c.properties["repeats_passed"]) == (3, 2)
    failed = combine_repeats([_v(False, 1.0), _v(False, 1.1), _v(True, 25.0)], exact=False)
    assert not failed.passed and failed.problems == ("repeat 1: host saw 1", "repeat 2: host saw 1")
    assert not combine_repeats([_v(True, 25.0), _v(False, 1.0)], exact=False).passed  # a tie is not a majority


def test_exact_checks_fail_on_any_repeat_and_name_it() -> None:
    c = combine_repeats([_v(True, 25.0), _v(False, 25.0, "a flush missing"), _v(True, 25.0)], exact=True)
    assert not c.passed and c.problems == ("repeat 2: a flush missing",)
    assert "every repeat must pass" in c.lines[0]


def test_repeat_properties_and_series_round_trip() -> None:
    props = repeat_properties([{"qd1_iops": 150.0}, {"qd1_iops": 160.0}, {"qd1_iops": 155.0}])
    assert props == {"qd1_iops.r1": 150.0, "qd1_iops.r2": 160.0, "qd1_iops.r3": 155.0, "qd1_iops": 155.0}
    s = series_of({**props, "guest_driver": "sd"})
    assert s == {"qd1_iops": Series("IO/s", "higher-better", (150.0, 160.0, 155.0))}  # the median is no sample
    assert series_of({"qd1_iops": 150})["qd1_iops"].values == (150.0,)


def test_a_baseline_fails_a_worse_move_and_notes_the_rest() -> None:
    base = {"qd32_iops": Series("IO/s", "higher-better", (5000.0,)),
            "split_factor": Series("x", "lower-better", (1.0,)),
            "qd32_host_exact_requests": Series("requests", "parameter", (15000.0,))}
    v = RuleVerdict("queue-depth", ("measured",), ())
    worse = against_baseline(v, {"qd32_iops": 150.0, "split_factor": 1.0, "qd32_host_exact_requests": 450.0},
                             base, "run 7")
    assert not worse.passed
    assert worse.problems == ("worse than the baseline run 7: qd32_iops: 5000 -> 150 IO/s (-97%, worse)",)
    assert any("qd32_host_exact_requests" in n for n in worse.notes)  # a parameter moved: noted, never failed
    assert worse.lines[-1].startswith("against the baseline run 7: 3 metrics compared, 2 moved")
    assert (worse.properties["baseline_worse"], worse.properties["baseline_moved"]) == (
        "qd32_iops", "qd32_host_exact_requests")
    # within the measured noise (qd32_iops needs 7.8 %): passes, and says what was compared
    same = against_baseline(v, {"qd32_iops": 4800.0, "split_factor": 1.0}, base, "run 7")
    assert same.passed and same.properties["baseline_metrics_compared"] == 2
    assert (same.properties["baseline_worse"], same.properties["baseline_moved"]) == ("", "")
    none = against_baseline(v, {"qd32_iops": 1.0}, None, "run 7")
    assert none.passed and none.notes == ("no baseline for this configuration in run 7",)


@pytest.mark.parametrize("n", [2, 5])
def test_properties_of_n_repeats_have_every_sample(n: int) -> None:
    props = repeat_properties([{"x": float(k)} for k in range(n)])
    assert [props[f"x.r{k}"] for k in range(1, n + 1)] == [float(k) for k in range(n)]
