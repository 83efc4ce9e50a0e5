"""One fio run counted whole on both sides, for rules that compare totals one for one."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from guest.tools.fio import Fio, FioJob
from measure import hostload
from measure.common import keep_and_parse_fio, stop_tracer
from measure.disk import GuestDisk
from model.parse.blockstats import HostCountersDelta
from model.parse.fio_json import FioResult
from model.types import HostTrace

log = logging.getLogger("vioconform.measure")


@dataclass(frozen=True)
class CountedRun:
    """One fio run counted whole on both sides: fio's totals, the host's counter delta from
    before fio started to after it ended, and (``trace=True``) every request the host saw."""

    job: FioJob
    fio: FioResult
    host: HostCountersDelta
    host_trace: HostTrace | None = None
    host_trace_gap: str = ""  # why a tracing backend gave no trace (TraceIncomplete)


def run_counted(disk: GuestDisk, job: FioJob, trace: bool = False, raw_dir: Path | None = None,
                target: str | None = None) -> CountedRun:
    """Run ``job`` in the foreground and count what reached the host, for rules that compare
    totals one for one (no steady-state window). Keep the disk's controller family otherwise
    idle when tracing: QEMU's events cannot tell its disks apart.

    ``target`` is fio's file (default: the raw disk), e.g. a file on a filesystem of the disk."""
    tag = f"vioc-{job.name}-{disk.kernel_name}"
    log.info("%s (%s): fio %s %s bs=%d depth=%d %.0f s, counted whole%s", disk.config_id, disk.kernel_name,
             job.name, job.rw, job.bs_bytes, job.offered_depth, job.runtime_s, ", exact host tracing" if trace else "")
    fio = disk.tool(Fio)
    tracer = disk.backend.request_tracer(disk.guest, disk.attached) if trace else None
    cpu0 = disk.vcpu_times()
    before = disk.host_counters()
    host_trace: HostTrace | None = None
    try:
        if tracer is not None:
            tracer.start()
        # fio's JSON on stdout: no guest file, so a full guest filesystem cannot lose it
        out = fio.run(job, target or disk.device_path)
        host_trace, gap = stop_tracer(tracer, disk.config_id)
    except BaseException:
        if tracer is not None:
            tracer.abort()
        raise
    after = disk.host_counters()
    hostload.note(cpu0, disk.vcpu_times(), disk.config_id)
    result = keep_and_parse_fio(out, job, disk.kernel_name, raw_dir, tag)
    return CountedRun(job, result, HostCountersDelta.between(before, after), host_trace, gap)


def host_flushes(run: CountedRun) -> int:
    """Flushes the host saw: its counter, or the trace where that has more. QEMU 7.2 counts SCSI
    FUA writes and virtio-blk flushes in query-blockstats but not NVMe's flushes (measured:
    49 traced, 0 counted), and traces no virtio-blk flush; the larger of the two is right for each."""
    traced = sum(r.is_flush for r in run.host_trace.requests) if run.host_trace is not None else 0
    return max(run.host.flushes, traced)
