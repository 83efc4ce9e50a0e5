"""Rule 4, buffered/direct regime against a baseline (the VxFS ``discovered_direct_iosz`` case).

A sequential copy's read side, once through the page cache and once with O_DIRECT, each
measured ``--repeats`` times on the host by mean request size and depth, and compared with the
baseline an earlier run saved (``--save-baseline``). Without ``--baseline`` the rule measures,
records and skips: it has nothing to compare with.
"""

from __future__ import annotations

import json
import platform
import stat
import time

import pytest

from fixtures.options import SuiteOptions
from guest.tools.fio import FioJob
from guest.tools.system import PageCache, Uname
from measure.disk import GuestDisk
from measure.window import measure
from model.errors import ParseError
from model.rules.buffered_direct import (
    COPY_BLOCK_BYTES,
    NO_BASELINE,
    RegimeSample,
    RegimeSeries,
    judge_regime,
    merge_baseline,
    parse_baseline,
)
from reports.records import Record
from reports.results import file_mode, write_atomic
from reports.store.baseline import StoredBaseline
from suites.assertions import conclude_against, raw_dir_for, trails_of
from suites.kernel_log_watch import watch
from suites.needs import needed


def _copy_job(mode: str) -> FioJob:
    return FioJob(f"copy-{mode}", rw="read", bs_bytes=COPY_BLOCK_BYTES, iodepth=1, ioengine="psync",
                  direct=mode == "direct")


@pytest.mark.rule("buffered-direct")
def test_buffered_direct_regime(disk: GuestDisk, suite_options: SuiteOptions, record: Record,
                                stored_baseline: StoredBaseline | None) -> None:
    raw = raw_dir_for(suite_options.results_dir, disk.config_id) / "buffered-direct"
    baseline = None
    source = ""
    if suite_options.baseline is not None:
        source = str(suite_options.baseline)
        try:
            all_configs = parse_baseline(suite_options.baseline.read_text(), source)
        except ParseError as e:
            raise pytest.UsageError(str(e)) from None
        baseline = all_configs.get(disk.config_id)
        if baseline is None:
            pytest.skip(f"the baseline {source} has no measurements of {disk.config_id} "
                        f"(it has {', '.join(sorted(all_configs)) or 'none'})")
    cache = needed(disk, PageCache, "buffered-direct")
    watch(record, (disk,))  # the kernel-log check's mark (conclude_against reads after it)
    now: dict[str, RegimeSeries] = {}
    for mode in ("buffered", "direct"):
        samples = []
        for i in range(suite_options.repeats_for("buffered-direct")):
            # Every copy starts cold: what an earlier run left in the page cache never reaches the host.
            cache.drop()
            m = measure(disk, _copy_job(mode), suite_options.window_s, raw_dir=raw / f"{mode}{i}", exact=False)
            samples.append(RegimeSample(m.host.avg_request_size_bytes, m.host_depth_median))
        now[mode] = RegimeSeries(mode, tuple(samples))
    if suite_options.save_baseline is not None:
        path = suite_options.save_baseline
        meta = {"saved": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "host": platform.node(),
                "guest_kernel": disk.tool(Uname).kernel_release(), "accel": disk.guest.accel,
                "guest_read_ahead_kb": str(disk.limits.read_ahead_kb)}
        # A new file gets the results' mode, a baseline saved before keeps its own; written through a
        # temporary file and a rename, never into whatever might have replaced the file meanwhile.
        file_bits = stat.S_IMODE(path.stat().st_mode) if path.is_file() else file_mode(suite_options.results_mode)
        write_atomic(path, merge_baseline(path.read_text() if path.is_file() else None, disk.config_id, now, meta),
                     file_bits)
        record.add(baseline_saved_to=str(path))
    verdict = judge_regime(now, baseline, source)
    (raw / "regime.json").write_text(json.dumps(verdict.properties, indent=1))
    if stored_baseline is None and baseline is None:
        record.verdict = verdict
        pytest.skip(f"{NO_BASELINE}. " + " | ".join(verdict.lines))
    # --baseline RUN: the stored run's metrics, as every rule compares them
    conclude_against(verdict, record, disk.config_id, raw, stored_baseline, trails_of((disk,)))
