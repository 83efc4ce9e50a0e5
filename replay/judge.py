"""What the replay measures for each rule and how it judges it, with the rule's own judge from
``model.rules``: the same thresholds as the run. A rule the replay cannot measure yet raises
CannotTest (exit 125) with that reason, never a verdict it did not reach.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from model.device_limits import GuestLimits, parse_guest_path_limits
from model.errors import ParseError
from model.judging.verdict import RuleVerdict
from model.parse.fio_json import parse_fio_json
from model.parse.proc_diskstats import DiskStatsDelta, diskstats_for
from model.parse.proc_stat import cpu_busy_between
from model.parse.qemutrace import TracedRequest
from model.rules.queue_depth import DepthPoint, DeviceSaid, GuestPath, judge_queue_depth
from replay.guest_script import Job
from replay.qemu import CannotTest

#: The rules the replay can judge: their jobs and judge below.
JUDGED = ("queue-depth",)
#: The rule's request size (suites/test_queue_depth.py's BS_BYTES).
BS_BYTES = 4096
#: Seconds fio runs before the part of its run the replay judges (its ramp).
RAMP_S = 1.0


def jobs_for(rule: str, measure: Mapping[str, object]) -> list[Job]:
    """The fio jobs of ``rule`` as the run measured them (``measure``: configuration.json's)."""
    if rule not in JUDGED:
        raise CannotTest(f"the replay cannot judge rule {rule} yet (it judges {', '.join(JUDGED)}): the bundle "
                         "holds its evidence and commands for a replay by hand")
    depths = measure.get("depths") or [1, 32]
    window = float(str(measure.get("window_s") or 2.0))
    assert isinstance(depths, list)
    return [Job(f"qd{d}", (f"--name=qd{d}", "--rw=randread", f"--bs={BS_BYTES}", f"--iodepth={d}", "--numjobs=1",
                           "--ioengine=libaio", "--direct=1", "--time_based", f"--runtime={RAMP_S + window:g}s",
                           "--group_reporting")) for d in depths]


@dataclass(frozen=True)
class JobOutput:
    """One job's output from the guest, by part (replay/guest_script.py), and its host wall times."""

    parts: Mapping[str, str]
    begin_s: float
    end_s: float
    exit_status: int


def _part(out: JobOutput, name: str, job: str) -> str:
    text = out.parts.get(name, "")
    if not text.strip():
        raise CannotTest(f"the guest printed no {name} for fio job {job}: the evidence is incomplete")
    return text


def depth_point(job: str, out: JobOutput, requests: list[TracedRequest], device: str) -> DepthPoint:
    """The queue-depth rule's figures for one job: the guest's from its output, the host's the
    outstanding-at-issue of every traced request that started in the job's run past its ramp."""
    try:
        fio = parse_fio_json(_part(out, "fio", job), f"fio {job}").jobs[0]
        up0, up1 = float(_part(out, "uptime0", job)), float(_part(out, "uptime1", job))
        elapsed_ms = (up1 - up0) * 1000
        d0 = diskstats_for(_part(out, "diskstats0", job), device)
        d1 = diskstats_for(_part(out, "diskstats1", job), device)
        guest = DiskStatsDelta.between(d0, d1, elapsed_ms)
        cpu = cpu_busy_between(_part(out, "stat0", job), _part(out, "stat1", job), elapsed_ms)
    except (ParseError, ValueError, IndexError) as e:
        raise CannotTest(f"fio job {job}: the guest's output could not be read: {e}") from e
    samples = [sum(int(v) for v in line.split()) for line in out.parts.get("inflight", "").splitlines() if line.strip()]
    start_us, end_us = (out.begin_s + RAMP_S) * 1e6, out.end_s * 1e6
    depths = sorted(r.outstanding_at_issue for r in requests if start_us <= r.start_us <= end_us)
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


def judge(rule: str, config: Mapping[str, object], outputs: Mapping[str, JobOutput],
          requests: list[TracedRequest], device: str, path_text: str = "") -> RuleVerdict:
    """The rule's verdict on one replay, with its own judge and thresholds."""
    if rule != "queue-depth":
        raise CannotTest(f"the replay cannot judge rule {rule} yet")
    points = [depth_point(job, out, requests, device) for job, out in outputs.items()]
    said = config.get("advertised_queue_depth")
    advertised = DeviceSaid(int(said[0]), str(said[1])) if isinstance(said, list) and said else None
    qd = config.get("device_queue_depth")
    measure = config.get("measure")
    require = bool(measure.get("require_queuing")) if isinstance(measure, dict) else False
    # Without the guest's limits on the path (a bundle without the script) the verdict allows no
    # excuse for a guest that held less than offered.
    path = guest_path(path_text, device, config.get("probed_limits"))
    return judge_queue_depth(points, int(qd) if isinstance(qd, int) else None, require, path, advertised)
