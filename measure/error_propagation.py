"""One fio run while the host makes a range of the disk fail: what fio, the host and the guest's kernel saw.

The host's injector puts the range in place, fio runs in the background (so that a guest that hangs
on a failed request is seen at the bound, not at an SSH timeout), and the run ends with the range
healed whatever happened: the next rule finds the disk as it was. A run that has not ended at the
bound is healed at once (the host then answers the guest's waiting requests) and given
``RECOVERY_S`` more to end; one that does not end even then is a guest that hangs (GuestHung).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

from guest.tools.error_propagation import ErrorPath
from guest.tools.fio import Fio, FioJob, FioOutput
from guest.tools.system import WorkDir
from hypervisors.base import ErrorInjector
from measure.disk import GuestDisk
from model.error_injection import InjectedRange
from model.errors import HypervisorError
from model.parse.blockstats import HostRequestOutcomes

log = logging.getLogger("vioconform.measure")

#: How long a run that outlived its bound may take to end once the range healed: the guest's retries
#: and aborts then meet a host that answers (sd: 5 retries; a SCSI abort and reset take seconds).
RECOVERY_S = 60.0
#: How long fio that ended in time is given to print its output (one guest command).
OUTPUT_S = 10.0


class GuestHung(HypervisorError):
    """fio did not end even after the injected range healed: the guest hangs on the failed requests."""


@dataclass(frozen=True)
class InjectedRun:
    """What one run saw: fio's output (None if it had not ended at the bound), the host's completed and
    failed requests over the run, the kernel log's mark and the log after the run, and fio's time."""

    output: FioOutput | None
    host: HostRequestOutcomes
    kernel_mark: str
    kernel_log: str
    fio_s: float


def run_injected(disk: GuestDisk, injector: ErrorInjector, injected: InjectedRange, job: FioJob, target: str,
                 bound_s: float, raw_dir: Path | None = None, kernel_lines: int = 0) -> InjectedRun:
    """Run ``job`` on ``target`` with ``injected`` failing at the host; healed when it returns or raises.
    ``kernel_lines``: the error lines the run should make the guest's kernel print; fio starts once its
    rate limit has room for them all (guest/tools/error_propagation.py)."""
    tag = f"vioc-{job.name}-{disk.kernel_name}"
    kernel = disk.tool(ErrorPath)
    log.info("%s (%s): fio %s %s on %s with %s failing at the host", disk.config_id, disk.kernel_name, job.name,
             job.rw, target, injected.describe())
    try:
        injector.inject(injected)
        before = injector.outcomes()
        # the start returns once fio runs (after the kernel's rate limit had room): its time from here
        run = disk.tool(Fio).start(job, target, disk.tool(WorkDir).ensure(), tag, first=kernel.mark_command(kernel_lines))
        t0 = time.monotonic()
        ended = run.wait(bound_s)
        fio_s = time.monotonic() - t0
        if not ended:
            log.warning("%s: fio %s had not ended %.0f s after it started; healing the range", disk.config_id,
                        job.name, fio_s)
            injector.heal()
        finished = run.finish(OUTPUT_S if ended else RECOVERY_S, also=kernel.log_command())
        if not finished.ended:
            raise GuestHung(f"fio {job.name} on {target} did not end within {RECOVERY_S:g} s after the injected "
                            f"range healed ({bound_s:g} s after it started before that): the guest hangs on the "
                            "failed requests", disk.guest.console_tail())
        after = injector.outcomes()
    finally:
        injector.heal()
    mark, text = ErrorPath.split_log(finished.also_stdout)
    if raw_dir is not None:
        raw_dir.mkdir(parents=True, exist_ok=True)
        (raw_dir / f"{tag}.fio.json").write_text(finished.output.stdout)
        (raw_dir / f"{tag}.fio.stderr").write_text(finished.output.stderr)
        (raw_dir / f"{tag}.kernel-log").write_text(finished.also_stdout)  # the mark, MARK_END, the log
    return InjectedRun(finished.output if ended else None, after.since(before), mark, text, fio_s)


def run_healed(disk: GuestDisk, injector: ErrorInjector, job: FioJob, target: str,
               raw_dir: Path | None = None) -> tuple[FioOutput, HostRequestOutcomes]:
    """Run ``job`` in the foreground with nothing injected: fio's output and what the host counted."""
    tag = f"vioc-{job.name}-{disk.kernel_name}"
    before = injector.outcomes()
    out = disk.tool(Fio).run(job, target)
    host = injector.outcomes().since(before)
    if raw_dir is not None:
        raw_dir.mkdir(parents=True, exist_ok=True)
        (raw_dir / f"{tag}.fio.json").write_text(out.stdout)
        (raw_dir / f"{tag}.fio.stderr").write_text(out.stderr)
    return out, host
