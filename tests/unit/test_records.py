"""Records have no outcome until a phase decides it; settling never turns an unfinished rule into a pass."""

from __future__ import annotations

from model.judging.verdict import Number, RuleVerdict, repeat_properties
from reports.records import Record, settle


def _rec(name: str, **kw: object) -> Record:
    return Record(f"suites/test_x.py::{name}", name, "libvirt:virtio-blk:latency5ms", **kw)  # type: ignore[arg-type]


def test_a_new_record_has_no_outcome() -> None:
    assert _rec("queue-depth").outcome is None


def test_interrupted_run_settles_unfinished_as_error_and_unstarted_as_not_run() -> None:
    done = _rec("multi-queue", outcome="passed", started=True)
    cut = _rec("queue-depth", started=True, properties={"qd1_iops": 150.0})
    never = _rec("io-size")
    records, status = settle([done, cut, never], "SIGINT")
    assert [(r.rule, r.outcome) for r in records] == [("multi-queue", "passed"), ("queue-depth", "error"),
                                                       ("io-size", "not run")]
    assert records[1].message == "interrupted by SIGINT: did not finish"
    assert records[1].properties == {"qd1_iops": 150.0}  # partial numbers kept, and said to be partial
    assert "partial" in records[1].details
    assert records[2].message.startswith("not run")
    assert not status.complete and (status.unfinished, status.not_run) == (1, 1)
    assert status.properties() == {"complete": "false", "interrupted_by": "SIGINT"}
    assert status.banner().startswith("RUN INCOMPLETE: interrupted by SIGINT; 1 rule test did not finish; "
                                      "1 rule test not run.")
    assert cut.outcome is None  # settling returns new records; the live ones are untouched


def test_a_complete_run_says_so_and_has_no_banner() -> None:
    records, status = settle([_rec("a", outcome="passed", started=True), _rec("b", outcome="skipped")])
    assert status.complete and status.banner() == ""
    assert status.properties() == {"complete": "true"}
    assert [r.outcome for r in records] == ["passed", "skipped"]


def test_an_interrupt_after_every_verdict_still_marks_the_run_incomplete() -> None:
    _, status = settle([_rec("a", outcome="passed", started=True)], "SIGTERM")
    assert not status.complete and status.properties()["interrupted_by"] == "SIGTERM"


def test_a_record_keeps_its_verdict_and_measures_its_numbers_and_the_verdicts() -> None:
    verdict = RuleVerdict("queue-depth", (), ("host saw 1.0",), ("no command queuing",), {"qd32_host_depth": 1.0})
    rec = _rec("queue-depth", started=True, properties={"qd32_host_exact_requests": 153})
    rec.verdict = verdict
    assert rec.measured() == {"qd32_host_exact_requests": 153, "qd32_host_depth": 1.0, "notes": "no command queuing"}
    settled, _ = settle([rec], "SIGINT")
    assert settled[0].verdict is verdict and settled[0].outcome == "error"  # cut short after its verdict: kept


def test_a_records_repeats_fold_as_the_verdicts_repeats_do() -> None:
    """One folding: the numbers a test adds itself over its repeats (``NAME.rK``) get the same medians
    and text as the verdicts' properties (model.judging.verdict.repeat_properties), a number missing from
    one repeat included."""
    per_repeat: list[dict[str, Number]] = [{"qd1_iops": 150.0, "guest_driver": "sd", "depth": 4},
                                          {"qd1_iops": 170.0, "guest_driver": "sd"},
                                          {"qd1_iops": 160.0, "guest_driver": "virtio_blk", "depth": 6}]
    rec = _rec("queue-depth")
    for k, props in enumerate(per_repeat, 1):
        rec.repeat = k
        rec.add(**props)
    rec.repeat = 0
    rec.fold_repeats()
    folded = repeat_properties(per_repeat)
    assert {n: rec.properties[n] for n in ("qd1_iops", "guest_driver", "depth")} == {
        n: folded[n] for n in ("qd1_iops", "guest_driver", "depth")} == {
        "qd1_iops": 160.0, "guest_driver": "sd", "depth": 5.0}
    assert rec.properties["depth.r3"] == 6 and "depth.r2" not in rec.properties
