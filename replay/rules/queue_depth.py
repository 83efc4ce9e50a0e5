"""queue-depth in the replay: each of the run's depths as a time-based fio job of 4 KiB random
reads, measured in a window of the run's length inside fio's run, as the run measures it; the host's
depth is the outstanding-at-issue of each request QEMU traced in the window, the guest's its
``/proc/diskstats`` aqu-sz over the window, inflight samples and CPU; judged by
``model.rules.queue_depth`` with what the device advertised in the run (configuration.json) and the
guest's limits on the disk's path read after the set-up.
"""

from __future__ import annotations

from collections.abc import Mapping

from model.device_limits import GuestLimits, parse_guest_path_limits
from model.errors import ParseError
from model.judging.verdict import RuleVerdict
from model.parse.proc_diskstats import DiskStatsDelta, diskstats_for
from model.parse.proc_stat import cpu_busy_between
from model.rules.queue_depth import BS_BYTES, RULE, DepthPoint, DeviceSaid, GuestPath, judge_queue_depth
from replay.guest_script import Job
from replay.qemu import CannotTest
from replay.rules import Replayed, ReplayRule
from replay.rules.evidence import fio_job, part, window, windowed


def jobs(config: Mapping[str, object]) -> list[Job]:
    """One job per depth the run measured, each measured over the run's window after fio's ramp."""
    measure = config.get("measure")
    m = measure if isinstance(measure, dict) else {}
    depths = m.get("depths") or [1, 32]
    span = float(str(m.get("window_s") or 2.0))
    assert isinstance(depths, list)
    return [windowed(f"qd{d}", {"rw": "randread", "bs": BS_BYTES, "iodepth": d, "numjobs": 1, "ioengine": "libaio",
                                "direct": 1, "group_reporting": True}, span) for d in depths]


def depth_point(r: Replayed, job: str) -> DepthPoint:
    """The rule's figures for one job: the guest's from its output, the host's the outstanding-at-issue
    of every traced request that started in the job's run past its ramp."""
    out = r.outputs[job]
    fio = fio_job(r, job)
    try:
        up0, up1 = float(part(out, "uptime0", job)), float(part(out, "uptime1", job))
        elapsed_ms = (up1 - up0) * 1000
        d0 = diskstats_for(part(out, "diskstats0", job), r.device)
        d1 = diskstats_for(part(out, "diskstats1", job), r.device)
        guest = DiskStatsDelta.between(d0, d1, elapsed_ms)
        cpu = cpu_busy_between(part(out, "stat0", job), part(out, "stat1", job), elapsed_ms)
    except (ParseError, ValueError) as e:
        raise CannotTest(f"fio job {job}: the guest's output could not be read: {e}") from e
    samples = [sum(int(v) for v in line.split()) for line in out.parts.get("inflight", "").splitlines() if line.strip()]
    depths = sorted(t.outstanding_at_issue for t in window(r.requests, out))
    if not depths:
        raise CannotTest(f"fio job {job}: QEMU traced no request of the disk during the job: the evidence is incomplete")

    def pct(p: float) -> float:
        return float(depths[min(len(depths) - 1, int(len(depths) * p / 100))])

    levels = fio.iodepth_level_pct
    return DepthPoint(offered_depth=int(job.removeprefix("qd")), iops=fio.total_iops,
                      fio_depth_mode=max(levels, key=lambda k: levels[k]) if levels else "?",
                      guest_aqu_sz=guest.avg_queue_size,
                      guest_inflight_mean=sum(samples) / len(samples) if samples else 0.0,
                      host_depth=pct(50), host_depth_min=pct(10), host_depth_max=pct(90),
                      host_source=f"exact (QEMU trace events, replay), median; p10-p90 of {len(depths)} requests",
                      guest_cpu_busy_pct=cpu.busiest_pct, guest_cpu_all_pct=cpu.all_pct, fio_cpu_pct=fio.cpu_pct)


def guest_path(text: str, device: str, probed: object) -> GuestPath | None:
    """The guest's limits on the disk's path from the replay's reading (``text``: the sysfs tool's
    ``key=value`` lines), with the driver's values from the run's probe; None where none was read."""
    if not text.strip():
        return None
    try:
        now = parse_guest_path_limits(text, device)
        limits = GuestLimits(**probed) if isinstance(probed, dict) else None
    except (ParseError, TypeError) as e:
        raise CannotTest(f"the guest's limits on the disk's path could not be read: {e}") from e
    return GuestPath.of(now, limits, BS_BYTES)


def judge(r: Replayed) -> RuleVerdict:
    """The verdict with the rule's own judge and the run's thresholds."""
    points = [depth_point(r, job) for job in r.outputs]
    said = r.config.get("advertised_queue_depth")
    advertised = DeviceSaid(int(said[0]), str(said[1])) if isinstance(said, list) and said else None
    qd = r.config.get("device_queue_depth")
    measure = r.config.get("measure")
    require = bool(measure.get("require_queuing")) if isinstance(measure, dict) else False
    # Without the guest's limits on the path (a bundle without the script) the verdict allows no
    # excuse for a guest that held less than offered.
    path = guest_path(r.path_text, r.device, r.config.get("probed_limits"))
    return judge_queue_depth(points, int(qd) if isinstance(qd, int) else None, require, path, advertised)


REPLAY = ReplayRule(RULE, jobs, judge)
