"""Assertion helpers for rules: the failure names the configuration, the numbers and where the raw data is.

A rule fails through these helpers (or a plain ``assert`` in its own test): they raise
``RuleFailure`` and the report shows FAILED, a verdict. Any other exception in a rule test (fio,
SSH, the guest, the hypervisor) is an ERROR: no verdict was reached (fixtures/outcomes.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from fixtures.outcomes import RuleFailure
from measure import hostload
from measure.kept import kept_settings
from model.across.against_baseline import BaselineMissing, against_baseline
from model.judging.host_busy import HostBusy, held_back_reason
from model.judging.verdict import combine_repeats
from model.rules import blame
from reports.records import raw_dir
from suites import kernel_log_watch

if TYPE_CHECKING:
    from fixtures.options import SuiteOptions
    from measure.disk import GuestDisk
    from model.blame import Trail
    from model.judging.verdict import RuleVerdict
    from reports.records import Record
    from reports.store.baseline import StoredBaseline


def fail_unless(passed: bool, rule: str, config: str, explanation: str, raw_dir: Path) -> None:
    """Fail the rule test with its full explanation unless ``passed``."""
    __tracebackhide__ = True
    if not passed:
        raise RuleFailure(f"{rule} failed on {config}\n{explanation}\nraw data: {raw_dir}", pytrace=False)


def raw_dir_for(results_dir: Path, config_id: str) -> Path:
    """Where a configuration's raw measurements go: ``results/raw/libvirt_virtio-scsi_latency5ms``
    (reports.records.raw_dir, which the JUnit file names too)."""
    return raw_dir(results_dir, config_id)


def conclude(verdict: RuleVerdict, record: Record, config: str, raw_dir: Path,
             trails: Sequence[Trail] = ()) -> None:
    """Keep the verdict in the record (its numbers for JUnit, its figures for the report), then
    fail with its explanation, every number in it, unless it passed. A failure names the layer
    at fault (model.blame, from ``trails``: the rule's disks' settings at each layer) in its last
    line and in the record. A verdict that passed only because it left a bound unjudged (the host
    held the guest's vCPUs back: model/judging/host_busy.py) is no pass: an ERROR (HostBusy)."""
    __tracebackhide__ = True
    record.verdict = verdict
    explanation = verdict.explain()
    held_back = held_back_reason(verdict.properties)
    if verdict.passed and held_back:
        raise HostBusy(f"{verdict.rule} on {config} could not be judged: the host was busy: {held_back}\n"
                       f"{explanation}\nraw data: {raw_dir}")
    if not verdict.passed:
        b = blame(verdict.rule, trails, verdict.hint)
        record.blame, record.blame_reason = b.layer, b.reason
        explanation += f"\nblame: {b.layer}: {b.reason}"
    fail_unless(verdict.passed, verdict.rule, config, explanation, raw_dir)


def trails_of(disks: Sequence[GuestDisk]) -> list[Trail]:
    """The settings of the rule's disks at each layer, for the blame of a failure."""
    return [t for d in disks for t in d.trails()]


def judge_repeated(record: Record, config: str, raw_dir: Path, repeats: int, once: Callable[[Path], RuleVerdict],
                   exact: bool, baseline: StoredBaseline | None = None, disks: Sequence[GuestDisk] = ()) -> None:
    """Measure and judge a rule ``repeats`` times (``once(raw_dir)`` is one measurement and its
    verdict; with several repeats each gets ``raw_dir/rK`` and what it adds to the record is
    ``NAME.rK``), combine the verdicts (model.judging.verdict.combine_repeats: ``exact`` checks fail
    on any failing repeat, measured ones by the majority), compare with the stored ``baseline``
    when one is given, and conclude; a failure is blamed on a layer from ``disks``' settings.
    The guest of ``disks`` has its kernel log checked over all the repeats (suites/kernel_log_watch.py), and
    ``disks``' settings are set back afterwards where a repeat left one changed (measure/kept.py), also
    when it failed or errored: the next rule sees the disks as they were."""
    __tracebackhide__ = True
    kernel_log_watch.watch(record, disks)  # the kernel-log check's mark: before the first repeat (suites/kernel_log_watch.py)
    verdicts = []
    with kept_settings(disks):
        for k in range(1, repeats + 1):
            record.repeat = k if repeats > 1 else 0
            try:
                verdicts.append(once(raw_dir / f"r{k}" if repeats > 1 else raw_dir))
            finally:
                record.repeat = 0
        kernel_log_watch.read_with_next(record)  # the read-back rides with the kept settings' read, after it
    record.fold_repeats()
    conclude_against(combine_repeats(verdicts, exact), record, config, raw_dir, baseline, trails_of(disks))


def judge_rule(record: Record, options: SuiteOptions, once: Callable[[Path], RuleVerdict], *, exact: bool,
               baseline: StoredBaseline | None, disks: Sequence[GuestDisk], own_dir: bool = True) -> None:
    """:func:`judge_repeated` for the rule of ``record`` on ``disks`` (the first names the configuration),
    with what the rule declares: its repeats (``options.repeats_for``: --repeats, else its module's
    ``DEFAULT_REPEATS``; never more than one for a rule that is not ``REPEATABLE``) and its raw files in
    the configuration's raw directory (``raw_dir_for``), in a folder named after the rule unless
    ``own_dir`` is False (queue-depth, io-size and limits write beside the others)."""
    __tracebackhide__ = True
    config = disks[0].config_id
    raw = raw_dir_for(options.results_dir, config)
    judge_repeated(record, config, raw / record.rule if own_dir else raw, options.repeats_for(record.rule), once,
                   exact, baseline, disks)


def conclude_against(verdict: RuleVerdict, record: Record, config: str, raw_dir: Path,
                     baseline: StoredBaseline | None, trails: Sequence[Trail] = ()) -> None:
    """Compare ``verdict`` with the stored ``baseline`` (``--baseline``; None: no comparison asked
    for) and conclude. A baseline with nothing to compare for this rule and configuration is never
    a plain pass: a failing verdict fails with the reason in a note, a passing one is an ERROR
    (BaselineMissing), its verdict and numbers kept in the record. First the guest's kernel log
    since the rule's mark is judged into ``verdict`` (suites/kernel_log_watch.py)."""
    __tracebackhide__ = True
    verdict = kernel_log_watch.fold(record, verdict, raw_dir)
    share = hostload.take(record.nodeid)
    if share is not None:  # the evidence a later comparison with this run needs (model/parse/hostcpu.py)
        record.add(host_vcpu_wait_pct=share.wait_pct, host_vcpu_run_pct=share.run_pct)
    if baseline is None:
        conclude(verdict, record, config, raw_dir, trails)
        return
    series = baseline.for_rule(verdict.rule, config)
    source = baseline.source_for(verdict.rule, config)
    missing = baseline.missing(verdict.rule, config) if series is None else ""
    verdict = against_baseline(verdict, {**record.properties, **verdict.properties}, series, source, missing)
    if not missing and verdict.properties.get("baseline_metrics_compared") == 0:
        missing = baseline.missing(verdict.rule, config, "it holds none of the metrics this run measured")
    elif (not missing and verdict.properties.get("baseline_metrics_judged") == 0
          and verdict.properties.get("baseline_metrics_not_judged")):
        missing = (f"no metric of {verdict.rule} on {config} could be judged against {source}: "
                   f"{verdict.properties.get('baseline_not_judged')}; run it on a quieter host")
    conclude(verdict, record, config, raw_dir, trails)
    if missing:
        raise BaselineMissing(f"{missing}. The rule itself passed; the comparison --baseline asked for was not "
                              "made: give --baseline a run that has this configuration's verdict, or leave "
                              "--baseline out")
