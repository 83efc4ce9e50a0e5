"""direct-io in the replay: the run's four runs on its scratch disk (file-backed), each counted whole
by QEMU's counters (``query-blockstats`` over QMP, read before and after it): 200 O_DIRECT writes of
1 KiB and of 4 KiB at depth 1 (one for one), 100 O_DSYNC writes and 100 buffered writes each followed
by an fsync (each a flush at the host); the 4 KiB run's traced writes give the latency floor. Judged
by ``model.rules.direct_io`` with the device's write cache as the run's hypervisor said it (or as the
run asked for it, or as the guest probed it) and the guest's limits read after the set-up.
"""

from __future__ import annotations

from collections.abc import Mapping

from model.judging.verdict import RuleVerdict
from model.rules.direct_io import (
    REGION_BYTES,
    RULE,
    WRITES,
    Durability,
    OneForOne,
    judge_direct_io,
    latency_floor,
    write_cache,
)
from replay.guest_script import Job
from replay.rules import Replayed, ReplayRule
from replay.rules.evidence import (
    configured_limits,
    counted,
    fio,
    fio_job,
    guest_limits,
    host_ref,
    output,
    probed_limits,
    window,
)

#: The one-for-one runs' request sizes, then the two durability runs.
SIZES = (1024, 4096)
DSYNC, FSYNC = "dsync4k", "fsync4k"


def _writes(ref: str, name: str, bs: int, n: int, **options: object) -> Job:
    return fio(name, {"rw": "randwrite", "bs": bs, "iodepth": 1, "numjobs": 1, "ioengine": "libaio", "direct": 1,
                      "runtime": "120s", "group_reporting": True, "size": REGION_BYTES, "io_size": bs * n,
                      "randseed": 1, **options}, counted=ref)


def jobs(config: Mapping[str, object]) -> list[Job]:
    ref = host_ref(config)
    return [*(_writes(ref, f"direct{bs // 1024}k", bs, WRITES) for bs in SIZES),
            _writes(ref, DSYNC, 4096, WRITES // 2, sync="dsync"),
            _writes(ref, FSYNC, 4096, WRITES // 2, direct=0, ioengine="psync", fsync=1)]


def _flushes(r: Replayed, job: str) -> int:
    """As the run counts them (suites/test_direct_io.py's host_flushes): the counter, or the trace
    where that has more."""
    traced = sum(t.is_flush for t in window(r.requests, output(r, job), ramp_s=0))
    return max(counted(r, job).flushes, traced)


def judge(r: Replayed) -> RuleVerdict:
    fidelity = []
    for bs in SIZES:
        host = counted(r, f"direct{bs // 1024}k")
        fidelity.append(OneForOne(bs, fio_job(r, f"direct{bs // 1024}k").write.io_count, host.writes, host.wr_bytes))
    w = fio_job(r, "direct4k").write
    latency = latency_floor(w.clat_percentiles_us, w.clat_mean_us,
                            [t.latency_us for t in window(r.requests, output(r, "direct4k"), ramp_s=0) if t.is_write])
    adv = r.config.get("advertised")
    said = adv.get("write_cache") if isinstance(adv, dict) else None
    said_by = adv.get("said_by", {}) if isinstance(adv, dict) else {}
    now = guest_limits(r)
    volatile, source = write_cache(said if isinstance(said, bool) else None,
                                   str(said_by.get("write_cache", "")) if isinstance(said_by, dict) else "",
                                   configured_limits(r.config).write_cache, probed_limits(r.config).write_cache,
                                   now.write_cache, now.fua)
    durability = [Durability("O_DSYNC writes", fio_job(r, DSYNC).write.io_count, _flushes(r, DSYNC)),
                  Durability("fsync after each buffered write", fio_job(r, FSYNC).sync.io_count, _flushes(r, FSYNC))]
    return judge_direct_io(fidelity, durability, volatile, source, latency)


REPLAY = ReplayRule(RULE, jobs, judge)
