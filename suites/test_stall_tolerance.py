"""The stall-tolerance rule (docs/rules/stall-tolerance.md): the guest's command timeout for the scratch disk is at least the storage
stall it must ride out (``--stall-s``), and a stall at the host shorter than that timeout passes with
no error, abort, reset or read-only filesystem (measure/stall_tolerance.py holds the disk; model/rules/
stall_tolerance.py judges)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures.options import SuiteOptions
from guest.tools.stall_tolerance import Stall
from hypervisors.base import DiskHold, HoldUnavailable
from measure.disk import GuestDisk
from measure.stall_tolerance import StallMeasurement, measure_stall
from model.judging.verdict import RuleVerdict
from model.rules.stall_tolerance import (
    STALL_HOLD_S,
    STALL_S,
    StallRun,
    hold_problem,
    judge_stall_tolerance,
    judged,
    recovery_lines,
)
from model.stall_workload import drain_bound_s
from reports.records import Record
from reports.store.baseline import StoredBaseline
from suites.assertions import judge_rule
from suites.needs import needed


class StallNotHeld(RuntimeError):
    """The hold proved nothing about the guest (model.rules.stall_tolerance.hold_problem): an ERROR,
    never a verdict."""


def stall_run(m: StallMeasurement) -> StallRun:
    """The rule's figures from one measured stall."""
    j = m.fio.jobs[0]
    return StallRun(hold_s=m.hold_s, host_completions=m.host_completions, guest_inflight_max=m.guest_inflight_max,
                    probes=m.probes, probes_answered=m.probes_answered, probe_rtt_max_ms=m.probe_rtt_max_ms,
                    guest_ios=j.read.io_count + j.write.io_count,
                    guest_max_latency_ms=max(j.read.clat_max_us, j.write.clat_max_us) / 1000, fio_error=m.fio_error,
                    host_events=m.host_events, host_events_source=m.host_events_source,
                    guest_log=recovery_lines(m.kernel_log), readonly=m.readonly, vcpu_wait_pct=m.vcpu_wait_pct)


@pytest.mark.rule("stall-tolerance")
def test_stall_tolerance(scratch_disk: GuestDisk, suite_options: SuiteOptions, record: Record,
                         stored_baseline: StoredBaseline | None) -> None:
    disk = scratch_disk
    stall = needed(disk, Stall, "stall-tolerance")
    hold: DiskHold | None
    try:
        hold, not_run = disk.backend.disk_hold(disk.guest, disk.attached), ""
    except HoldUnavailable as e:
        hold, not_run = None, str(e)
    hold_s = suite_options.option(STALL_HOLD_S)

    def once(raw: Path) -> RuleVerdict:
        timeout = stall.command_timeout(disk.kernel_name, disk.limits.driver)
        if hold is None:
            return judge_stall_tolerance(timeout, suite_options.option(STALL_S), None, not_run)
        run = stall_run(measure_stall(disk, hold, hold_s, drain_bound_s(hold_s, timeout.timeout_s), raw))
        problem = hold_problem(run, judged(timeout, run))
        if problem is not None:
            raise StallNotHeld(f"stall-tolerance on {disk.config_id}: {problem}")
        return judge_stall_tolerance(timeout, suite_options.option(STALL_S), run)

    # A timeout under the bar and an error in a stall the guest should not notice are exact: every repeat must pass.
    judge_rule(record, suite_options, once, exact=True, baseline=stored_baseline, disks=(disk,))
