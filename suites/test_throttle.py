"""throttle (docs/rules/throttle.md): an I/O limit on the disk under test at the host (``--disk iops=``/
``bps=``, else the rule's own, set at run time), lifted and set again under the running guest; in
each phase one window of 4 KiB random reads at depth 32 from both sides (measure/throttle.py), and
the limits the host holds, read back (model/rules/throttle.py judges)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from fixtures.options import SuiteOptions
from guest.tools.fio import FioJob
from hypervisors.base import ThrottleUnavailable
from measure.disk import GuestDisk
from measure.throttle import PhaseMeasurement, measure_phase
from model.judging.verdict import RuleVerdict
from model.parse.throttle_limits import ThrottleLimits
from model.rules.throttle import BS_BYTES, DEPTH, FAULT, RULE_IOPS, ThrottlePhase, judge_throttle, with_burst
from reports.records import Record
from reports.store.baseline import StoredBaseline
from suites.assertions import judge_rule

#: The rule's workload (model/rules/throttle.py's BS_BYTES, DEPTH).
JOB = FioJob("throttle", rw="randread", bs_bytes=BS_BYTES, iodepth=DEPTH)


def phase_of(p: PhaseMeasurement, asked: ThrottleLimits) -> ThrottlePhase:
    """The rule's figures of one measured phase; ``asked``: what the suite asked the host to hold."""
    if p.window is None:
        return ThrottlePhase(p.name, asked, p.held, p.said_by, fio_error=p.fio_error)
    m = p.window
    g, h, job = m.guest, m.host, m.fio.jobs[0]
    return ThrottlePhase(p.name, asked, p.held, p.said_by, guest_s=g.elapsed_ms / 1000, host_s=h.elapsed_ns / 1e9,
                         guest_ios=g.reads_completed + g.writes_completed,
                         guest_bytes=(g.sectors_read + g.sectors_written) * 512, host_ios=h.reads + h.writes,
                         host_bytes=h.rd_bytes + h.wr_bytes, guest_aqu_sz=g.avg_queue_size,
                         clat_mean_ms=job.read.clat_mean_us / 1000, offered_depth=m.job.offered_depth,
                         vcpu_wait_pct=m.vcpu_wait_pct)


@pytest.mark.rule("throttle")
def test_throttle(disk: GuestDisk, suite_options: SuiteOptions, record: Record,
                  stored_baseline: StoredBaseline | None) -> None:
    try:
        throttle = disk.backend.disk_throttle(disk.guest, disk.attached)
    except ThrottleUnavailable as e:
        pytest.skip(f"throttle: {e}")
    settings = disk.attached.spec.settings
    if settings.iops or settings.bps:  # libvirt's <iotune> holds them from the start
        asked, set_by = ThrottleLimits(iops=settings.iops or 0, bps=settings.bps or 0), f"--disk {settings}"
        first: ThrottleLimits | None = None
    else:
        asked, set_by = ThrottleLimits(iops=RULE_IOPS), "the rule"
        first = asked
    if FAULT in suite_options.inject:
        first = with_burst(asked)

    def once(raw: Path) -> RuleVerdict:
        phases = []
        try:
            for name, set_to in (("throttled", first), ("lifted", ThrottleLimits()), ("again", asked)):
                p = measure_phase(disk, throttle, name, set_to, JOB, suite_options.window_s, raw)
                phases.append(phase_of(p, ThrottleLimits() if name == "lifted" else asked))
        finally:
            throttle.restore()
        (raw / "throttle-phases.json").write_text(json.dumps([dataclasses.asdict(p) for p in phases], indent=1))
        return judge_throttle(phases, asked, set_by)

    # Rates are measured quantities: the majority of repeats decides.
    judge_rule(record, suite_options, once, exact=False, baseline=stored_baseline, disks=(disk,))
