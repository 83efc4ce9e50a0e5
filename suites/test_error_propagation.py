"""Rule 8, error propagation (docs/rules/error-propagation.md).

On the scratch disk: the host makes a range fail with EIO for reads, then for writes, while fio in
the guest reads (then writes) requests over the range and beyond it, going on past errors; each run
is compared on three sides (fio, the host's counters, the guest's kernel log). Then the range heals
and the same requests are written and read back, verified. ``--inject swallow-errors`` runs fio on
a device-mapper mirror over the disk and a RAM disk instead, which hides the errors.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures.options import SuiteOptions
from guest.tools.devmapper import MirrorUnavailable, SwallowingMirror
from guest.tools.error_propagation import ErrorPath
from guest.tools.fio import FioJob
from hypervisors.base import ErrorInjector, ErrorPolicyContradicted, InjectionUnavailable
from measure.disk import GuestDisk
from measure.error_propagation import run_healed, run_injected
from model.error_injection import Kind
from model.judging.verdict import RuleVerdict
from model.kernel_log_check import InjectedErrors
from model.parse.fio_errors import parse_fio_error_run
from model.parse.fio_json import parse_fio_json
from model.parse.kernel_io_errors import window_after
from model.rules.error_propagation import (
    DEPTH,
    RULE,
    SWALLOW,
    WORKLOAD,
    Attempts,
    Bound,
    HealRun,
    InjectionNotFired,
    PhaseRun,
    attempts_for,
    bound_for,
    injected,
    judge_error_propagation,
    kernel_error_sectors,
    not_fired,
)
from reports.records import Record
from reports.store.baseline import StoredBaseline
from suites.assertions import judge_rule
from suites.kernel_log_watch import expect_io_errors
from suites.needs import needed


def _job(name: str, rw: str, **kw: object) -> FioJob:
    gap = WORKLOAD.stride_bytes - WORKLOAD.request_bytes
    return FioJob(name, rw=f"{rw}:{gap}", bs_bytes=WORKLOAD.request_bytes, iodepth=DEPTH,
                  size_bytes=WORKLOAD.span_bytes, io_bytes=WORKLOAD.requests * WORKLOAD.request_bytes, offset_bytes=WORKLOAD.offset_bytes,
                  continue_on_error=True, runtime_s=60, **kw)  # type: ignore[arg-type]


def _target(disk: GuestDisk, mapper: SwallowingMirror | None) -> str:
    if mapper is None:
        return disk.device_path
    return mapper.create(disk.kernel_name, WORKLOAD.end_bytes, SWALLOW)


def _phase(disk: GuestDisk, injector: ErrorInjector, kind: Kind, mapper: SwallowingMirror | None, bound: Bound,
           raw: Path) -> PhaseRun:
    target = _target(disk, mapper)
    try:
        run = run_injected(disk, injector, injected(kind), _job(f"errprop-{kind}", kind), target, bound.seconds, raw,
                           kernel_lines=len(WORKLOAD.touching(injected(kind))))
    finally:
        if mapper is not None:
            mapper.remove(SWALLOW)
    fio = None
    if run.output is not None:
        fio = parse_fio_error_run(run.output.stdout, run.output.stderr, kind, source=f"fio errprop-{kind} on {target}")
    return PhaseRun(injected(kind), disk.kernel_name, target, fio, run.host, window_after(run.kernel_log,
                    run.kernel_mark), run.fio_s)


def _heal(disk: GuestDisk, injector: ErrorInjector, raw: Path) -> HealRun:
    out, host = run_healed(disk, injector, _job("errprop-healed", "write", verify="crc32c"), disk.device_path, raw)
    source = f"fio errprop-healed on {disk.device_path}"
    fio = parse_fio_error_run(out.stdout, out.stderr, "write", source=source)
    job = parse_fio_json(out.stdout, source).jobs[0]  # the writes and their verifying reads
    return HealRun(fio.errors, host.failed_reads + host.failed_writes, job.write.io_count + job.read.io_count)


@pytest.mark.rule("error-propagation")
def test_error_propagation(scratch_disk: GuestDisk, suite_options: SuiteOptions, record: Record,
                           stored_baseline: StoredBaseline | None) -> None:
    disk = scratch_disk
    try:
        injector = disk.backend.error_injector(disk.guest, disk.attached)
    except InjectionUnavailable as e:
        pytest.skip(f"{RULE} cannot run on {disk.config_id}: {e}")
    kernel = needed(disk, ErrorPath, RULE)
    mapper = needed(disk, SwallowingMirror, RULE) if "swallow-errors" in suite_options.inject else None
    timeouts = kernel.timeouts(disk.kernel_name)
    bound = bound_for(timeouts.scsi_timeout_s, timeouts.io_timeout_ms)
    attempts: Attempts | None = attempts_for(disk.limits.driver, timeouts.nvme_max_retries)
    # What the kernel-log check is told: the range the host fails on this disk, and the sectors the
    # kernel's error lines name (the failed requests' first sectors): those lines are the rule's own.
    first, last = kernel_error_sectors(WORKLOAD, "read")
    record.add(injected_device=disk.kernel_name, injected_first_sector=injected("read").first_sector,
               injected_sectors=injected("read").sectors, kernel_error_sectors=f"{first}-{last}")

    def once(raw: Path) -> RuleVerdict:
        # the kernel-log check (suites/kernel_log_watch.py, watching since judge_repeated began) is told too
        expect_io_errors(record, *(InjectedErrors(disk.kernel_name, lo, hi - lo + 1)
                                   for lo, hi in {kernel_error_sectors(WORKLOAD, kind) for kind in ("read", "write")}))
        phases: list[PhaseRun] = []
        heal = None
        try:
            for kind in ("read", "write"):
                phase = _phase(disk, injector, kind, mapper, bound, raw)
                phases.append(phase)
                why = not_fired(phase)
                if why is not None:
                    raise InjectionNotFired(f"{disk.config_id}: {why}")
                if phase.fio is None:
                    break
            else:
                heal = _heal(disk, injector, raw)
        except InjectionUnavailable as e:
            pytest.skip(f"{RULE} cannot run on {disk.config_id}: {e}")
        except ErrorPolicyContradicted as e:  # the hypervisor under test failed: a verdict, not an ERROR
            return judge_error_propagation(WORKLOAD, [], None, attempts, bound, policy=e.policy)
        except MirrorUnavailable as e:
            pytest.skip(f"--inject swallow-errors cannot apply on {disk.config_id}: {e}")
        finally:
            injector.heal()
        return judge_error_propagation(WORKLOAD, phases, heal, attempts, bound)

    # Where an error goes is exact: every repeat must pass.
    judge_rule(record, suite_options, once, exact=True, baseline=stored_baseline, disks=(disk,))
