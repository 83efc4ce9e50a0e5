"""--baseline REF resolved against the results store before any guest; --repeats per rule; a
record's repeats folded into medians."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures.options import SuiteOptions
from fixtures.outcomes import RuleFailure
from model.across.against_baseline import BaselineMissing
from model.judging.verdict import RuleVerdict
from reports.records import Record, RunStatus, settle
from reports.store import Store, StoreError
from reports.store.baseline import resolve_baseline
from suites.assertions import conclude_against
from tests.unit.test_store import BLK, QD, SERIES, SUITE, healthy, write_run

NVME_SERIES = "libvirt_local_nvme_lat5ms_embedded"


def test_a_run_id_a_directory_and_last_resolve_to_the_stored_series(tmp_path: Path, store_url: str) -> None:
    d = write_run(tmp_path, "20261120-020000", healthy())
    by_dir = resolve_baseline(str(d), store_url, SERIES)
    assert by_dir.run.id == 1 and by_dir.source == f"run 1 ({d.resolve()})"
    qd = by_dir.for_rule("queue-depth", QD)
    assert qd is not None and qd["qd32_host_depth"].values == (25.1, 25.3, 24.9, 25.2)
    assert by_dir.for_rule("queue-depth", "libvirt:nvme:latency5ms") is None
    assert resolve_baseline("1", store_url, SERIES).run.id == 1
    assert resolve_baseline("last", store_url, SERIES).run.id == 1


def test_bad_baselines_are_refused_with_the_reason(tmp_path: Path, store_url: str) -> None:
    with pytest.raises(StoreError, match="has no run 9"):
        resolve_baseline("9", store_url, SERIES)
    with pytest.raises(StoreError, match=f"has no complete run of series {NVME_SERIES} with a verdict; run the "
                                         "suite once without --baseline first"):
        resolve_baseline("last", store_url, NVME_SERIES)
    with pytest.raises(StoreError, match="neither a stored run id, a results directory, 'last'"):
        resolve_baseline("yesterday", store_url, NVME_SERIES)
    with pytest.raises(StoreError, match="--store none gives no store"):
        resolve_baseline("1", None, NVME_SERIES)
    records, status = settle([Record("m", "io-size", QD, outcome="passed", started=True),
                              Record("n", "queue-depth", QD, started=True)], "SIGINT")
    cut = write_run(tmp_path, "20261121-020000", records, status)
    with pytest.raises(StoreError, match="is incomplete \\(interrupted\\): it is never used as a baseline"):
        resolve_baseline(str(cut), store_url, SERIES)
    assert RunStatus().complete


def test_repeats_per_rule() -> None:
    base = SuiteOptions("libvirt", None, "qemu:///system", "auto", ("virtio-blk",), "latency", 5.0, 3.0,
                        (), (), None, 120.0, Path("r"), Path("r/junit.xml"))
    assert [base.repeats_for(r) for r in ("queue-depth", "buffered-direct", "limits")] == [1, 2, 1]
    five = SuiteOptions(**{**base.__dict__, "repeats": 5})
    assert [five.repeats_for(r) for r in ("queue-depth", "buffered-direct", "limits")] == [5, 5, 1]


def test_a_records_repeats_fold_into_medians() -> None:
    rec = Record("n", "queue-depth", QD)
    for k, iops in enumerate((150.0, 170.0, 160.0), 1):
        rec.repeat = k
        rec.add(qd1_iops=iops, guest_driver="sd")
    rec.repeat = 0
    rec.fold_repeats()
    assert rec.properties["qd1_iops"] == 160.0 and rec.properties["qd1_iops.r2"] == 170.0
    assert rec.properties["guest_driver"] == "sd"


def test_last_follows_the_series_across_builds_and_never_crosses_into_another(tmp_path: Path,
                                                                              store_url: str) -> None:
    """--baseline last is the newest run of the job's series, whatever QEMU or kernel it ran on;
    a run of another series (another fault, another image), newer, is never taken."""
    first = write_run(tmp_path, "20261120-020000", healthy(), suite={**SUITE, "qemu.version": "7.2.0"})
    built = write_run(tmp_path, "20261121-020000", healthy(),
                      suite={**SUITE, "qemu.version": "8.0.0", "guest.kernel": "6.12.0"})
    faulty = write_run(tmp_path, "20261122-020000", healthy(), suite={**SUITE, "inject": "tcq-off"})
    named = write_run(tmp_path, "20261123-020000", healthy(), suite={**SUITE, "series": "qemu_nightly"})
    assert _stored(store_url, first, built, faulty, named) == [1, 2, 3, 4]
    assert resolve_baseline("last", store_url, SERIES).run.id == 2  # across the QEMU and kernel change
    assert resolve_baseline("last", store_url, "libvirt_local_virtio_blk_virtio_scsi_inject_tcq_off_lat5ms_"
                                               "embedded").run.id == 3
    assert resolve_baseline("last", store_url, "qemu_nightly").run.id == 4
    # a run given by id or directory may be of another series: compared, and every verdict says so
    assert resolve_baseline("3", store_url, SERIES).source == (
        f"run 3 ({faulty.resolve()}), of another series (libvirt_local_virtio_blk_virtio_scsi_inject_tcq_off_lat5ms_"
        "embedded)")
    assert resolve_baseline("2", store_url, SERIES).source == f"run 2 ({built.resolve()})"
    with pytest.raises(StoreError, match="has no complete run of series libvirt_local_virtio_blk_lat5ms_embedded"):
        resolve_baseline("last", store_url, "libvirt_local_virtio_blk_lat5ms_embedded")


def _stored(store_url: str, *dirs: Path) -> list[int]:
    store = Store(store_url)
    try:
        return [store.import_dir(d)[0] for d in dirs]
    finally:
        store.close()


def _errors_only() -> list[Record]:
    """A run whose guest never came up (``--machine none``): every rule an ERROR, no numbers."""
    return [Record("suites/test_queue_depth.py::t[a]", "queue-depth", QD, {}, "error", "SetupError: XML error: No PCI "
                   "buses available", started=True),
            Record("suites/test_io_size.py::t[b]", "io-size", BLK, {}, "error", "not run: XML error", started=True)]


def test_a_run_in_which_no_rule_reached_a_verdict_is_never_the_baseline(tmp_path: Path, store_url: str) -> None:
    """The issue's runs: 1 healthy; 2 with --machine none, every rule ERROR; 3 with --baseline last
    compared with run 2, found 'no baseline for this configuration' and passed."""
    records, status = settle(_errors_only())
    assert not status.complete and status.errors_only == 2
    assert status.banner().startswith("RUN INCOMPLETE: no rule reached a verdict (2 rule tests ended in ERROR, "
                                      "none passed or failed).")
    assert status.properties()["complete"] == "false"
    now = write_run(tmp_path, "20261121-020000", records, status)
    # a store written before this fix holds such a run as complete: it is no baseline either
    old = write_run(tmp_path, "20261121-030000", records, RunStatus())
    first = write_run(tmp_path, "20261120-020000", healthy())
    assert _stored(store_url, now, old, first) == [1, 2, 3]
    store = Store(store_url)
    assert [(r.id, r.complete) for r in store.runs()] == [(3, True), (1, False), (2, True)]  # by start
    store.close()
    base = resolve_baseline("last", store_url, SERIES)
    assert base.run.source == str(first.resolve()) and base.for_rule("queue-depth", QD) is not None
    with pytest.raises(StoreError, match=r"no rule reached a verdict in run 2 .*: it is never used as a baseline"):
        resolve_baseline("2", store_url, SERIES)


def test_a_run_of_skips_alone_stays_complete() -> None:
    _, status = settle([Record("n", "buffered-direct", QD, outcome="skipped", message="no --baseline", started=True)])
    assert status.complete and status.errors_only == 0


def test_last_takes_each_configuration_from_the_newest_run_with_a_verdict_for_it(tmp_path: Path,
                                                                                  store_url: str) -> None:
    first = write_run(tmp_path, "20261120-020000", healthy())
    # the next night: queue-depth cut short by a guest error (its partial numbers are no baseline)
    second = healthy()
    second[0] = Record(second[0].nodeid, "queue-depth", QD, {"qd32_host_depth": 3.0}, "error",
                       "GuestCommandError: the SSH connection to the guest was lost")
    _stored(store_url, first, write_run(tmp_path, "20261121-020000", second))
    base = resolve_baseline("last", store_url, SERIES)
    assert base.run.id == 2 and base.source_for("io-size", BLK) == base.source == f"run 2 ({tmp_path / '20261121-020000'})"
    qd = base.for_rule("queue-depth", QD)
    assert qd is not None and qd["qd32_host_depth"].values == (25.1, 25.3, 24.9, 25.2)
    assert base.source_for("queue-depth", QD) == f"run 1 ({first.resolve()})"
    # an error in both runs: no baseline, and the sentence says why
    assert base.for_rule("limits", BLK) is None
    assert base.missing("limits", BLK) == (
        f"no baseline for limits on {BLK} in run 2 ({tmp_path / '20261121-020000'}): its outcome there is error "
        f"(guest lost), and none of the 1 older complete runs of series {SERIES} has a verdict for it")
    assert base.missing("multi-queue", BLK).endswith(f"it did not run multi-queue on {BLK}, and none of the 1 older "
                                                     f"complete runs of series {SERIES} has a verdict for it")
    # a run id is that run only
    by_id = resolve_baseline("2", store_url, SERIES)
    assert by_id.for_rule("queue-depth", QD) is None
    assert by_id.missing("queue-depth", QD).endswith("its outcome there is error (GuestCommandError: the SSH "
                                                     "connection to the guest was lost)")


def test_a_rule_whose_only_error_was_a_missing_baseline_is_a_baseline(tmp_path: Path, store_url: str) -> None:
    """A rule new to a pipeline that always passes --baseline last: its first run is an ERROR (no
    baseline), its numbers and its own verdict were reached, so the next run compares with them."""
    rec = healthy()[:1]
    rec[0] = Record(rec[0].nodeid, "queue-depth", QD, rec[0].properties, "error",
                    f"BaselineMissing: no baseline for queue-depth on {QD} in run 1: it did not run queue-depth")
    _stored(store_url, write_run(tmp_path, "20261120-020000", rec))
    base = resolve_baseline("last", store_url, SERIES)
    assert base.for_rule("queue-depth", QD) is not None


def _verdict(host_depth: float) -> RuleVerdict:
    return RuleVerdict("queue-depth", ("measured",), (), (), {"qd32_host_depth": host_depth})


def test_a_rule_asked_to_compare_without_a_baseline_is_an_error_never_a_pass(tmp_path: Path, store_url: str) -> None:
    _stored(store_url, write_run(tmp_path, "20261120-020000", healthy()))
    base = resolve_baseline("1", store_url, SERIES)
    rec = Record("n", "queue-depth", "libvirt:nvme:latency5ms")
    with pytest.raises(BaselineMissing) as e:
        conclude_against(_verdict(20.0), rec, "libvirt:nvme:latency5ms", tmp_path, base)
    assert str(e.value).startswith(f"no baseline for queue-depth on libvirt:nvme:latency5ms in run 1 "
                                   f"({tmp_path / '20261120-020000'}): it did not run queue-depth on "
                                   "libvirt:nvme:latency5ms. The rule itself passed; the comparison --baseline asked "
                                   "for was not made")
    assert rec.verdict is not None and rec.verdict.passed  # its own verdict and numbers are kept
    assert rec.verdict.properties["baseline_metrics_compared"] == 0
    assert "no baseline for queue-depth on libvirt:nvme:latency5ms in run 1" in rec.verdict.notes[0]
    # a failing rule stays a failure, the missing baseline said in it
    failing = RuleVerdict("queue-depth", ("measured",), ("host saw 1.0",), (), {"qd32_host_depth": 1.0})
    with pytest.raises(RuleFailure, match="note: no baseline for queue-depth on libvirt:nvme"):
        conclude_against(failing, Record("n", "queue-depth", "x"), "libvirt:nvme:latency5ms", tmp_path, base)
    # a baseline that shares no metric with the run compared nothing: no pass either
    with pytest.raises(BaselineMissing, match="it holds none of the metrics this run measured"):
        conclude_against(RuleVerdict("queue-depth", (), (), (), {"other_number": 1.0}), Record("n", "queue-depth", QD),
                         QD, tmp_path, base)


def test_the_issue_regression_fails_against_last(tmp_path: Path, store_url: str) -> None:
    """Run 3 of the issue (nr_requests 16: qd32_host_depth 20 -> 13) against --baseline last, with the
    run of errors stored between: compared with run 1, and worse."""
    _stored(store_url, write_run(tmp_path, "20261120-020000", healthy(qd32=(20.0,))),
            write_run(tmp_path, "20261121-020000", _errors_only(), RunStatus()))  # stored as complete, the old way
    base = resolve_baseline("last", store_url, SERIES)
    assert base.run.id == 1
    with pytest.raises(RuleFailure, match=r"worse than the baseline run 1 .*: qd32_host_depth: 20 -> 13 requests"):
        conclude_against(_verdict(13.0), Record("n", "queue-depth", QD), QD, tmp_path, base)


def test_a_comparison_the_busy_host_left_nothing_to_judge_is_an_error(tmp_path: Path, store_url: str) -> None:
    """Every number of the rule with a direction follows the host's CPU, and this run's vCPUs waited
    30 % of a window: no comparison was made, so the pass is no pass (model/across/against_baseline.py)."""
    _stored(store_url, write_run(tmp_path, "20261120-020000", healthy()))
    base = resolve_baseline("1", store_url, SERIES)
    rec = Record("n", "queue-depth", QD, {"host_vcpu_wait_pct": 30.0})
    with pytest.raises(BaselineMissing, match=r"no metric of queue-depth on .* could be judged against run 1 .*"
                                              r"waited for a host CPU 30 % in this run.*run it on a quieter host"):
        conclude_against(_verdict(13.0), rec, QD, tmp_path, base)
    assert rec.verdict is not None and rec.verdict.passed and rec.verdict.properties["baseline_metrics_not_judged"] == 1
    # the same numbers on a quiet host are judged: 25 -> 13 requests is a regression
    with pytest.raises(RuleFailure, match="qd32_host_depth"):
        conclude_against(_verdict(13.0), Record("n", "queue-depth", QD, {"host_vcpu_wait_pct": 5.0}), QD, tmp_path,
                         base)
