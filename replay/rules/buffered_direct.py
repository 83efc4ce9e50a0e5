"""buffered-direct in the replay: as the run does, each copy's read side ``repeats`` times through the
page cache and then as many times with O_DIRECT (a sequential read of 1 MiB requests at depth 1 with
psync, the page cache dropped before each, the run's window from fio's ramp after its first request);
each copy measured on the host from QEMU's trace over the window: its mean request size and its mean requests in flight (each
second's, Little's law on the traced requests, the median of the seconds: what the run's counters give).
Judged by ``model.rules.buffered_direct`` against the run's own baseline as the bundle carries it
(``baseline_file``: the copies of ``--baseline FILE``; ``stored_baseline``: ``--baseline RUN``, compared
as the run compared it): the same baseline gives the same allowance. A bundle with neither (an older
run's) cannot be judged: the rule compares with a baseline or measures only.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping

from model.errors import ParseError
from model.judging.verdict import RuleVerdict
from model.parse.qemutrace import TracedRequest
from model.rules.buffered_direct import (
    BASELINE_FORMAT,
    COPY_BLOCK_BYTES,
    DEFAULT_REPEATS,
    MODES,
    RULE,
    RegimeSample,
    RegimeSeries,
    judge_regime,
    parse_baseline,
)
from replay.guest_script import Job
from replay.qemu import CannotTest
from replay.rules import JobOutput, Replayed, ReplayRule
from replay.rules.evidence import RAMP_S, fio, output
from replay.rules.stored_run import against_stored

#: Seconds fio reads past the window: its end (and its clock's start, a little before its first request
#: reaches the host) stays outside the window, as the run stops fio only after its window closed.
TAIL_S = 0.5
#: As the run's PageCache.drop: dirty pages written back, clean ones dropped, so each copy reads the disk.
DROP_CACHES = "sync; echo 3 > /proc/sys/vm/drop_caches"


def _measure(config: Mapping[str, object]) -> tuple[int, float]:
    """The run's copies of each kind and its window (s)."""
    measure = config.get("measure")
    m = measure if isinstance(measure, dict) else {}
    repeats = m.get("repeats")
    return (repeats if isinstance(repeats, int) and repeats > 0 else DEFAULT_REPEATS,
            float(str(m.get("window_s") or 2.0)))


def jobs(config: Mapping[str, object]) -> list[Job]:
    """``buffered0``, ``buffered1``..., then ``direct0``...: the run's order."""
    repeats, span = _measure(config)
    return [fio(f"{mode}{i}", {"rw": "read", "bs": COPY_BLOCK_BYTES, "iodepth": 1, "numjobs": 1, "ioengine": "psync",
                               "direct": int(mode == "direct"), "time_based": True,
                               "runtime": f"{RAMP_S + span + TAIL_S:g}s",
                               "group_reporting": True}, prepare=DROP_CACHES)
            for mode in MODES for i in range(repeats)]


def in_flight_per_second(requests: list[TracedRequest], start_s: float, span_s: float) -> list[float]:
    """The mean requests in flight in each second of ``span_s`` from ``start_s`` (host wall clock):
    the time the traced requests spent in that second over the second (a last part-second counts
    for what it is; a window under a second is one part)."""
    out = []
    t = start_s * 1e6
    end = (start_s + span_s) * 1e6
    while t < end - 1:
        step = min(1e6, end - t)
        busy = sum(max(0.0, min(r.end_us, t + step) - max(r.start_us, t)) for r in requests)
        out.append(busy / step)
        t += step
    return out


def sample(r: Replayed, job: str, span_s: float) -> RegimeSample:
    """One copy's host figures over its window: as in the run, the window opens fio's ramp after its
    first request reached the host (a loaded host starts fio seconds late)."""
    out: JobOutput = output(r, job)
    reads = [t for t in r.requests if not t.is_flush and not t.is_write]
    first = next((t.start_us for t in reads if out.begin_s * 1e6 <= t.start_us <= out.end_s * 1e6), None)
    if first is None:
        raise CannotTest(f"fio job {job}: QEMU traced no read of the disk during the copy: the evidence is incomplete")
    start = first / 1e6 + RAMP_S
    inside = [t for t in reads if start * 1e6 <= t.start_us <= (start + span_s) * 1e6]
    if not inside:
        raise CannotTest(f"fio job {job}: QEMU traced no read of the disk in the copy's window: the evidence is incomplete")
    return RegimeSample(statistics.fmean(t.length_bytes for t in inside),
                        statistics.median(in_flight_per_second(reads, start, span_s)))


def file_baseline(config: Mapping[str, object]) -> tuple[dict[str, RegimeSeries] | None, str]:
    """The copies of the run's ``--baseline FILE`` for its configuration, and the file's name as the
    verdict names it; (None, "") where the run had no such file."""
    carried = config.get("baseline_file")
    if carried is None:
        return None, ""
    if not isinstance(carried, dict) or not isinstance(carried.get("series"), dict):
        raise CannotTest(f"the bundle's baseline_file holds no copies of this configuration: {carried!r}")
    source = str(carried.get("source", ""))
    doc = {"vioconform_baseline": BASELINE_FORMAT, "configs": {"this": carried["series"]}}
    try:
        return parse_baseline(json.dumps(doc), f"the bundle's baseline_file ({source})")["this"], source
    except ParseError as e:
        raise CannotTest(str(e)) from e


def judge(r: Replayed) -> RuleVerdict:
    repeats, span = _measure(r.config)
    baseline, source = file_baseline(r.config)
    if baseline is None and r.config.get("stored_baseline") is None:
        raise CannotTest("the bundle carries no baseline (a bundle of an older run): buffered-direct judges its copies "
                         "against the run's baseline, and without one it measures only")
    now = {mode: RegimeSeries(mode, tuple(sample(r, f"{mode}{i}", span) for i in range(repeats))) for mode in MODES}
    return against_stored(judge_regime(now, baseline, source), r.config)


REPLAY = ReplayRule(RULE, jobs, judge)
