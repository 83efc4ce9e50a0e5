"""What both kinds of measurement share: keeping and parsing fio's output, stopping the tracer."""

from __future__ import annotations

import logging
from pathlib import Path

from guest.tools.fio import FioJob, FioOutput
from hypervisors.base import RequestTracer
from model.errors import TraceIncomplete
from model.parse.fio_json import FioResult, parse_fio_run
from model.types import HostTrace

log = logging.getLogger("vioconform.measure")


def stop_tracer(tracer: RequestTracer | None, config_id: str) -> tuple[HostTrace | None, str]:
    """The trace, or None and the reason where it missed requests the counters saw."""
    if tracer is None:
        return None, ""
    try:
        return tracer.stop(), ""
    except TraceIncomplete as e:
        log.warning("%s: %s; using the host counters instead", config_id, e)
        return None, e.gap


def keep_and_parse_fio(out: FioOutput, job: FioJob, dev: str, raw_dir: Path | None, tag: str) -> FioResult:
    """Keep fio's output in ``raw_dir`` (if given: stdout as ``.fio.json``, stderr beside it) and
    parse it. fio's own failure (a job error, no results) is a FioError carrying what fio said."""
    if raw_dir is not None:
        raw_dir.mkdir(parents=True, exist_ok=True)
        (raw_dir / f"{tag}.fio.json").write_text(out.stdout)
        if out.stderr:
            (raw_dir / f"{tag}.fio.stderr").write_text(out.stderr)
    return parse_fio_run(out.stdout, out.stderr, out.status, source=f"fio {job.name} on {dev}")
