"""Rule 1, queue-depth propagation: the verdict arithmetic, free of any hypervisor import.

With offered depth N on a latency-bound disk, the depth the host observes must follow
min(N, the device's configured queue depth), and IOPS must scale with it. The Solaris 11
``mpt_sas`` signature is a host depth of 1-3 while the application queues 32.

Example::

    v = judge_queue_depth([point_qd1, point_qd32], device_queue_depth=128)
    assert v.passed, v.explain()
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from model.blame import Blame, BlameSettings
from model.device_limits import DepthLimit, GuestLimits, GuestPathLimits, IoMax
from model.judging.figures import DepthFigure, DepthGroup
from model.judging.host_busy import WAIT_MAX_PCT, fold_held, rate_wait_text
from model.judging.rule_option import RuleOption, flag
from model.judging.spec import HIGHER, PARAM, Metrics, MetricSpec
from model.judging.verdict import Number, RuleVerdict, kib

RULE = "queue-depth"
#: The rule's reads: 4 KiB random reads, one request each (io.max's byte limits count with it); the
#: run's and the replay's.
BS_BYTES = 4096
#: The settings (model/blame.py's trail keys) the rule's verdict depends on.
BLAME = BlameSettings(frozenset({"queue_depth", "nr_requests"}))
#: Repeats without --repeats.
DEFAULT_REPEATS = 1
REPEATABLE = True
#: Which of its metrics follow the host CPU the guest gets (model/across/contention.py).
HOST_CPU_BOUND: tuple[str, ...] = (r"qd\d+_iops", "iops_scaling")

#: Offered depths of the rule: 1 (the IOPS baseline) and 32, the Solaris case's depth.
DEFAULT_DEPTHS: tuple[int, ...] = (1, 32)
#: The deepest offered depth fio's libaio engine can get: one fio job asks the kernel's io_setup()
#: for ``iodepth`` events, and Linux refuses (EAGAIN) more than fs.aio-max-nr (default 65536,
#: system-wide, minus what other processes hold). Measured in the embedded guest (Debian 6.1,
#: fio 3.33, 2 vCPUs, 512 MiB): depth 65536 ran (13,311 reads in 2 s on virtio-blk); 65537 and
#: 100000 end with fio's "error": 11 (EAGAIN, func=io_queue_init) and 0 I/Os. Depths past a
#: device's queue depth (virtio-scsi 128, virtio-blk 256, NVMe 1023) only queue up in the guest.
MAX_DEPTH = 65536


def offered_depths(text: str) -> tuple[int, ...]:
    """``--depths``: whole numbers separated by commas, 1 to :data:`MAX_DEPTH`, sorted, each once;
    ValueError with the reason otherwise."""
    try:
        depths = tuple(sorted({int(x) for x in text.split(",") if x.strip()}))
    except ValueError:
        raise ValueError(f"--depths takes whole numbers separated by commas, e.g. 1,32; got {text!r}") from None
    if not depths or depths[0] < 1:
        raise ValueError(f"--depths needs depths of 1 or more, e.g. 1,32; got {text!r}")
    if depths[-1] > MAX_DEPTH:
        raise ValueError(
            f"--depths {depths[-1]} is above {MAX_DEPTH}, the most fio's libaio engine can keep in flight: "
            f"Linux's io_setup() refuses more events than fs.aio-max-nr (default {MAX_DEPTH}); got {text!r}")
    return depths


#: The rule's options (model/judging/rule_option.py): the depths it offers, and whether a device without
#: command queuing fails it.
DEPTHS = RuleOption("--depths", offered_depths, DEFAULT_DEPTHS,
                    f"offered queue depths for the queue-depth rule, 1 to {MAX_DEPTH} "
                    f"(default: {','.join(map(str, DEFAULT_DEPTHS))})")
REQUIRE_QUEUING = flag("--require-queuing", "fail the queue-depth rule on a device without command queuing (e.g. IDE)")
OPTIONS = (DEPTHS, REQUIRE_QUEUING)

#: Minimum host-observed depth as a fraction of the depth the guest gave the device:
#: min(offered, device limit, what the guest's block layer held). Measured here (QEMU 7.2
#: TCG, 2 vCPUs, 5 ms null-co disk): the host saw a median of 20-27 in flight for a guest
#: offering 32 (0.63-0.84), 12-19 with the host or the guest loaded, and 0.77-1.0 at depth 1;
#: tcq-off gives 0.3-1.0 at 32, 13x under 0.4 x 32 = 12.8.
#:
#: What the guest held is iostat's aqu-sz (/proc/diskstats weighted time over the same window):
#: it counts a request from its allocation in the block layer, I/O scheduler included, to its
#: completion, so a queue that builds up in front of the driver is in it. ``inflight`` in sysfs
#: counts only what the driver holds, which the fault itself caps. tcq-off on virtio-scsi,
#: measured here in 8 runs (4 of them with a busy process on the host or guest): aqu-sz 10.5-31.5
#: (30.1 in the README's run), inflight 0.5-1.0, host 1.0 traced (0.3-0.7 Little's law): the
#: bar 0.4 x aqu-sz is 4.2-12.6, 4x or more above the host; against inflight it would pass. A
#: slow guest CPU lowers both sides together: healthy, the host's Little's-law depth is
#: 0.81-1.04 of aqu-sz (0.48 in windows fio entered late) and the traced median 0.92 or more,
#: 2x and more above 0.4. So a guest that held 16 of 32 needs 6.4, not 12.8.
HOST_DEPTH_MIN_FRACTION = 0.4

#: Whatever the guest held, the host must see at least this fraction of min(offered, device
#: limit): a guest whose own block layer holds almost nothing cannot excuse the device. The
#: Solaris case showed 1-3 at 32 (0.03-0.09), tcq-off here 0.3-1.0 (0.01-0.03); 0.1 (3.2 of
#: 32) is above both, and 4-8x below what a healthy guest gives the host here (12-27, traced).
HOST_DEPTH_ABSOLUTE_MIN_FRACTION = 0.1

#: Minimum IOPS(N)/IOPS(1) as a fraction of the expected ratio: min(expected depth ratio, the
#: ratio of what the guest held, aqu-sz). Measured here: 4,000-5,000 IOPS at depth 32 over 140
#: at depth 1 (28-35x against 32x expected, aqu-sz ratio 29x), 14-29x with the host or the
#: guest loaded (7-10x in windows fio entered late); tcq-off 0.9-1.3x while its aqu-sz ratio
#: is 18-33x. 0.4 (12.8x for 32) separates the two by an order of magnitude; a guest that
#: held 8 of 32 (aqu-sz ratio 9) needs 0.4 x 9 = 3.6x and scales about 9x (Little's law).
IOPS_SCALING_MIN_FRACTION = 0.4

#: Whatever the guest held, IOPS must scale at least this fraction of the expected depth ratio
#: (3.2x for 1 to 32): tcq-off gives 0.9-1.3x, a healthy guest here 7-35x (7x in a window fio
#: entered late).
IOPS_SCALING_ABSOLUTE_MIN_FRACTION = 0.1

#: The guest's busiest vCPU must have been busy (not idle: model/parse/proc_stat.py) at least this share
#: of the window for a guest that held less than offered in its block layer to excuse the device.
#: Measured here (TCG, 2 vCPUs, 3 s windows at depth 32, host at load 9-12 on its 2 cores): healthy
#: guests holding 21-27 of 32 were busy 40-68 % (11 windows, both virtio controllers), 86-98 %
#: with a busy loop in the guest; a guest throttled by io.max riops=400 idled: 15 and 34 %. Under
#: TCG a healthy guest keeps fewer than 32 queued mostly for the time its completions take to reach
#: it, which it spends idle, so the bar stays under the healthy guests' figures with a margin. The
#: CPU alone does not tell a configured limit from a slow guest (nr_requests 8 on the same host:
#: 49-58 %), which is why the allowance also needs every guest limit on the path at or above the
#: offered depth (GuestPath).
GUEST_CPU_BUSY_MIN_PCT = 30.0

#: The host may not see more than was offered; above this factor the measurement is broken
#: (counters of the wrong disk, or a clock problem), which is reported as a failure too.
HOST_DEPTH_MAX_OVER_OFFERED = 1.25

_QD = r"qd\d+_"  # each offered depth's prefix (qd1_, qd32_)

#: What the rule records (model/judging/spec.py): what reaches the host is the rule's point (higher is
#: better); the bars it derived, the guest's settings and its CPU are the verdict's parameters. The
#: suite adds each window's exact figures (``host_exact_*``: measure.window's exact_summary), its
#: Little's-law depth and the guest's own queue limits and driver.
METRICS: Metrics = (
    (r"iops_scaling_required(_from_(offered|guest))?", MetricSpec("x", PARAM)),
    (_QD + r"host_required(_from_(offered|guest))?", MetricSpec("requests", PARAM)),
    (_QD + r"iops", MetricSpec("IO/s", HIGHER)),
    (_QD + r"host_depth(_min|_max)?", MetricSpec("requests", HIGHER)),
    (_QD + r"host_average_depth", MetricSpec("requests", HIGHER)),
    (_QD + r"host_exact_depth_(median|p90)", MetricSpec("requests", HIGHER)),
    (_QD + r"host_exact_io_length_mean", MetricSpec("bytes", PARAM)),
    (_QD + r"host_exact_requests", MetricSpec("requests", PARAM)),
    (_QD + r"guest_(aqu_sz|inflight_mean)", MetricSpec("requests", HIGHER)),
    (_QD + r"fio_depth_mode", MetricSpec("requests", PARAM)),
    (r"iops_scaling", MetricSpec("x", HIGHER)),
    (r"device_queue_depth|device_queue_depth_advertised|guest_queue_depth|guest_nr_requests",
     MetricSpec("requests", PARAM)),
    # the evidence for a guest that held less than offered: its CPU and its own limits
    (_QD + r"(guest_cpu_(busy|all)|fio_cpu|vcpu_wait)_pct|guest_cpu_busy_min_pct", MetricSpec("%", PARAM)),
    (r"guest_limit_[a-z_]+|guest_async_depth", MetricSpec("requests", PARAM)),
    (r"guest_scheduler|guest_cgroup|guest_io_max|guest_driver", MetricSpec("", PARAM)),
)

#: compare's minimum effect per metric (model/across/moves.py's MIN_EFFECTS says how each is derived from
#: run-to-run noise). Each comment: the CV and the widest change between two healthy runs with 3 s / 2 s
#: windows, and the configuration each came from. The maximum and 90th percentile of the depth at 32
#: never moved in those runs (31); in 9 healthy virtio-blk runs of this rule on a host at load average
#: 4-14 they were 30 or 31 (the third figures on their lines): 3 x sqrt 2 x 1.46 % = 6.2 %, and one
#: request of 31 is 3.2 %, so the 2 % floor would fail a healthy run against a healthy baseline on
#: 31 -> 30. The bars (``*_required``) and the traced request counts are counts of what happened:
#: they move with the IOPS of their window.
MIN_EFFECTS: Mapping[str, float] = {
    "iops_scaling": 0.124,  # CV 2.93 % / 1.28 %, widest 8.9 % / 4.7 % (virtio-blk / virtio-scsi)
    "qd1_guest_aqu_sz": 0.080,  # CV 1.89 % / 0.91 %, widest 5.4 % / 3.2 % (virtio-blk / virtio-scsi)
    "qd1_guest_inflight_mean": 0.887,  # CV 14.14 % / 13.90 %, widest 56.2 % / 88.7 % (virtio-scsi / virtio-scsi)
    "qd1_host_average_depth": 0.152,  # CV 3.57 % / 1.50 %, widest 9.2 % / 4.5 % (virtio-blk / virtio-blk)
    "qd1_host_depth": 0.020,  # CV 0.00 % / 0.00 %, widest 0.0 % / 0.0 % (virtio-blk / virtio-blk)
    "qd1_host_depth_max": 0.020,  # CV 0.00 % / 0.00 %, widest 0.0 % / 0.0 % (virtio-blk / virtio-blk)
    "qd1_host_depth_min": 0.020,  # CV 0.00 % / 0.00 %, widest 0.0 % / 0.0 % (virtio-blk / virtio-blk)
    "qd1_host_exact_depth_median": 0.020,  # CV 0.00 % / 0.00 %, widest 0.0 % / 0.0 % (virtio-blk / virtio-blk)
    "qd1_host_exact_depth_p90": 0.020,  # CV 0.00 % / 0.00 %, widest 0.0 % / 0.0 % (virtio-blk / virtio-blk)
    "qd1_iops": 0.109,  # CV 2.57 % / 1.08 %, widest 6.5 % / 3.4 % (virtio-blk / virtio-blk)
    "qd32_guest_aqu_sz": 0.067,  # CV 1.58 % / 0.98 %, widest 4.1 % / 3.2 % (virtio-scsi / virtio-blk)
    "qd32_guest_inflight_mean": 0.502,  # CV 7.17 % / 10.42 %, widest 25.3 % / 50.2 % (virtio-blk / virtio-blk)
    "qd32_host_average_depth": 0.091,  # CV 2.14 % / 1.16 %, widest 6.8 % / 3.4 % (virtio-scsi / virtio-blk)
    "qd32_host_depth": 0.130,  # CV 2.94 % / 2.81 %, widest 8.3 % / 13.0 % (virtio-scsi / virtio-blk)
    "qd32_host_depth_max": 0.062,  # CV 0.00 % / 0.00 % / 1.46 %, widest 0.0 % / 0.0 % / 3.3 % (virtio-blk x3)
    "qd32_host_depth_min": 0.400,  # CV 6.68 % / 9.11 %, widest 18.2 % / 40.0 % (virtio-scsi / virtio-blk)
    "qd32_host_exact_depth_median": 0.130,  # CV 2.94 % / 2.81 %, widest 8.3 % / 13.0 % (virtio-scsi / virtio-blk)
    "qd32_host_exact_depth_p90": 0.062,  # CV 0.00 % / 0.00 % / 1.46 %, widest 0.0 % / 0.0 % / 3.3 % (virtio-blk x3)
    # CV 1.85 % / 1.35 %, widest 5.6 % / 4.3 % (virtio-scsi / virtio-blk); a third measurement, 3 healthy
    # runs on a quiet host (vCPU wait 5-6 %), had one run's virtio-scsi 4322 against 4714 and 4753: 10.0 %
    "qd32_iops": 0.100,
    # counts of what happened
    "iops_scaling_required": 0.102,  # CV 2.41 % / 1.19 %, widest 7.3 % / 3.6 % (virtio-blk / virtio-scsi)
    "iops_scaling_required_from_guest": 0.102,  # CV 2.41 % / 1.19 %, widest 7.3 % / 3.6 % (virtio-blk / virtio-scsi)
    "qd1_host_exact_requests": 0.116,  # CV 2.73 % / 1.24 %, widest 7.9 % / 3.9 % (virtio-blk / virtio-blk)
    "qd1_host_required": 0.091,  # CV 2.15 % / 1.32 %, widest 5.4 % / 2.6 % (virtio-blk / virtio-scsi)
    "qd1_host_required_from_guest": 0.091,  # CV 2.15 % / 1.32 %, widest 5.4 % / 2.6 % (virtio-blk / virtio-scsi)
    "qd32_host_exact_requests": 0.069,  # CV 1.64 % / 1.38 %, widest 4.5 % / 4.9 % (virtio-scsi / virtio-blk)
    "qd32_host_required": 0.067,  # CV 1.58 % / 0.98 %, widest 4.1 % / 3.2 % (virtio-scsi / virtio-blk)
    "qd32_host_required_from_guest": 0.067,  # CV 1.58 % / 0.98 %, widest 4.1 % / 3.2 % (virtio-scsi / virtio-blk)
}


@dataclass(frozen=True)
class DepthPoint:
    """Both sides' depth figures for one offered depth (one fio run)."""

    offered_depth: int
    iops: float
    fio_depth_mode: str  # fio's iodepth_level bucket with most I/Os: what fio *submitted*
    guest_aqu_sz: float  # /proc/diskstats weighted time over the window (iostat aqu-sz)
    guest_inflight_mean: float  # /sys/block/X/inflight samples
    host_depth: float  # the verdict's figure: median over one-second windows
    host_depth_min: float
    host_depth_max: float
    host_source: str  # "average (Little's law on QMP counters)", "exact (traced requests)"
    #: the guest's busiest vCPU over the window, % busy (/proc/stat); None: not measured
    guest_cpu_busy_pct: float | None = None
    guest_cpu_all_pct: float | None = None  # all its vCPUs together
    fio_cpu_pct: float | None = None  # fio's own usr+sys over its run, % of one CPU
    #: how long the guest's vCPUs waited for a host CPU over the window, % per vCPU; None: not read
    vcpu_wait_pct: float | None = None


@dataclass(frozen=True)
class GuestPath:
    """The guest's own limits on the disk's I/O path, as the rule judges them: each depth setting
    with the value the driver gave it (model.device_limits.DepthLimit), the cgroup io.max entries for the
    disk, the I/O scheduler and its async_depth (writes and async requests only: never on the
    path of the rule's synchronous reads), and the rule's request size (io.max's byte limits
    become reads per second with it)."""

    limits: tuple[DepthLimit, ...] = ()
    io_max: tuple[IoMax, ...] = ()
    scheduler: str = ""
    async_depth: int | None = None
    cgroup: str = ""
    bs_bytes: int = 4096

    @classmethod
    def of(cls, now: GuestPathLimits, probed: GuestLimits | None, bs_bytes: int) -> GuestPath:
        return cls(now.depth_limits(probed), now.io_max, now.scheduler, now.async_depth, now.cgroup, bs_bytes)

    def describe(self) -> str:
        limits = ", ".join(f"{lim.name} {lim.value}" + (f" (the driver set {lim.driver_value})"
                                                        if lim.driver_value not in (None, lim.value) else "")
                           for lim in self.limits) or "none read"
        sched = self.scheduler or "unknown"
        if self.async_depth is not None:
            sched += f" (async_depth {self.async_depth}: writes and async requests only, not these reads)"
        io_max = "; ".join(e.text() for e in self.io_max) or "none"
        return f"guest limits on the path: {limits}; scheduler {sched}; cgroup io.max: {io_max}"


@dataclass(frozen=True)
class Limiter:
    """A guest setting that lets fewer requests be in flight than were offered."""

    what: str  # "/sys/block/vda/queue/nr_requests = 8 (the driver set 256)"
    allows: float  # the requests in flight it lets through
    #: the device's own limit it is under (the driver's value where the device's is unknown);
    #: None: unknown, so it cannot be told from the device's advertisement
    under: int | float | None
    remedy: str
    #: still the value the guest's driver gave it when it probed the disk: the driver (or what the
    #: device advertised) set it, not the guest's configuration
    driver_set: bool = False

    @property
    def configured(self) -> bool:
        """Below the device's own limit and changed since the probe: the guest's configuration, not
        the device nor its driver, set it."""
        return self.under is not None and self.allows < self.under and not self.driver_set


def limiters(path: GuestPath, offered: int, device_queue_depth: int | None,
             base: DepthPoint | None = None, advertised_queue_depth: int | None = None) -> list[Limiter]:
    """The guest limits on ``path`` under the depth the device could take at ``offered``
    (``expected_depth``: a limit at the device's own is no limit of the guest's). The device's own
    limit is what the hypervisor says it advertises (``advertised_queue_depth``), else what was
    asked of it, else the driver's value. An io.max limit on reads counts by the requests it lets
    be in flight: its reads per second times the time a request took at the lowest offered depth
    (``base``: Little's law, aqu-sz over IOPS); without ``base`` it counts as a limit of unknown size."""
    out = []
    want = expected_depth(offered, device_queue_depth)
    own = advertised_queue_depth if advertised_queue_depth is not None else device_queue_depth
    for lim in path.limits:
        if lim.value >= want:
            continue
        ref = own if own is not None else lim.driver_value
        driver = f" (the driver set {lim.driver_value})" if lim.driver_value not in (None, lim.value) else ""
        out.append(Limiter(f"{lim.path} = {lim.value}{driver}", lim.value, ref,
                           f"write {min(offered, ref) if ref else offered} or more to {lim.path}",
                           driver_set=lim.driver_value is not None and lim.value >= lim.driver_value))
    for entry in path.io_max:
        cap = entry.read_iops_cap(path.bs_bytes)
        if cap is None:
            continue
        remedy = f"lift the limit ({entry.cgroup}/io.max) or run the guest's I/O outside that cgroup"
        if base is None or base.iops <= 0 or base.guest_aqu_sz <= 0:
            out.append(Limiter(f"{entry.text()} caps reads of this disk", 0.0, None, remedy))
            continue
        latency_s = base.guest_aqu_sz / base.iops
        allows = cap * latency_s
        if allows < want:
            out.append(Limiter(f"{entry.text()} caps reads of {kib(path.bs_bytes)} at {cap:,.0f}/s, which at the "
                               f"{latency_s * 1000:.1f} ms a request took at depth {base.offered_depth} lets about "
                               f"{allows:.1f} be in flight", allows, device_queue_depth or offered, remedy))
    return out


def _no_excuse(p: DepthPoint, path: GuestPath | None, below: list[Limiter]) -> str:
    """Why the guest holding less than offered cannot excuse the device at ``p`` ("" if it can):
    the allowance needs a busy guest CPU and no guest limit under the offered depth."""
    why = []
    if path is None:
        why.append("the guest's limits on the path were not read")
    elif below:
        why.append("a guest limit is under the offered depth: " + "; ".join(x.what for x in below))
    if p.guest_cpu_busy_pct is None:
        why.append("the guest's CPU time over the window is unknown")
    elif p.guest_cpu_busy_pct < GUEST_CPU_BUSY_MIN_PCT:
        why.append(f"the guest's CPU was not busy: its busiest vCPU was busy {p.guest_cpu_busy_pct:.0f} % of the "
                   f"window, under {GUEST_CPU_BUSY_MIN_PCT:.0f} %")
    return "; ".join(why)


def _held_back(bar: Bar, *points: DepthPoint) -> str:
    """Why a missed ``bar`` is not judged ("": it is): the guest's vCPUs waited for a host CPU more than
    WAIT_MAX_PCT of a window it rests on (``points``'), so the depths it kept up and its IOPS followed the
    host's free CPU, and the figure still meets the floor (``absolute``) whatever the guest held. The
    floors stay judged at any load: tcq-off's figures stay under them at every wait recorded here (host
    depth 1.0 of 32, IOPS scaling 0.73-1.31x with the vCPUs waiting 5.8-67.7 %), healthy guests' above
    them (scaling 8.7-50.5x at waits up to 73 %: docs/rules/queue-depth.md)."""
    waits = [p.vcpu_wait_pct for p in points if p.vcpu_wait_pct is not None]
    if not waits or max(waits) <= WAIT_MAX_PCT or bar.got < bar.absolute:
        return ""
    return f"{rate_wait_text(max(waits))}, and it meets the floor of {bar.absolute:.1f} no load excuses"


def expected_depth(offered: int, device_queue_depth: int | None) -> int:
    return offered if device_queue_depth is None else min(offered, device_queue_depth)


@dataclass(frozen=True)
class Bar:
    """What one measured figure had to reach, from two references: what the workload offered
    (bounded by the device limit) and what the guest's block layer actually held. The bar is
    ``fraction`` of the smaller one, and never under ``absolute_fraction`` of the offered one."""

    got: float
    offered_ref: float
    guest_ref: float
    fraction: float
    absolute_fraction: float

    @property
    def from_offered(self) -> float:
        return self.fraction * self.offered_ref

    @property
    def from_guest(self) -> float:
        return self.fraction * min(self.offered_ref, self.guest_ref)

    @property
    def absolute(self) -> float:
        return self.absolute_fraction * self.offered_ref

    @property
    def required(self) -> float:
        return max(self.absolute, self.from_guest)

    @property
    def met(self) -> bool:
        return self.got >= self.required

    @property
    def excused_by_guest(self) -> bool:
        """Met only because the guest held less than offered: the guest kept the figure low."""
        return self.met and self.got < self.from_offered

    def offered_text(self, offered: tuple[str, ...], unit: str = "") -> str:
        """The bar from the offered depth alone: "12.8 = 0.4 x min(32, device limit 256)"."""
        return f"{self.from_offered:.1f}{unit} = {self.fraction} x {_min_of(offered)}"

    def text(self, offered: tuple[str, ...], guest: str, unit: str = "") -> str:
        """How the bar was set, every number in it. ``offered``: the terms of the offered
        reference ("32", "device limit 128"); ``guest``: the guest's figure ("aqu-sz 30.1")."""
        off = _min_of(offered)
        both = _min_of((*offered, guest))
        if self.absolute > self.from_guest:
            return (f"{self.absolute:.1f}{unit} = {self.absolute_fraction} x {off}, whatever the guest held "
                    f"({self.fraction} x {both} = {self.from_guest:.1f}{unit})")
        if self.guest_ref < self.offered_ref:
            return (f"{self.from_guest:.1f}{unit} = {self.fraction} x {both}, what reached the guest's block layer "
                    f"(from the offered depth alone {self.from_offered:.1f}{unit} = {self.fraction} x {off}; "
                    f"never under {self.absolute:.1f}{unit} = {self.absolute_fraction} x {off})")
        return f"{self.from_offered:.1f}{unit} = {self.fraction} x {off} (guest: {guest}, no less)"


def _min_of(terms: tuple[str, ...]) -> str:
    return terms[0] if len(terms) == 1 else f"min({', '.join(terms)})"


def _depth_bar(p: DepthPoint, device_queue_depth: int | None) -> Bar:
    return Bar(p.host_depth, expected_depth(p.offered_depth, device_queue_depth), p.guest_aqu_sz,
               HOST_DEPTH_MIN_FRACTION, HOST_DEPTH_ABSOLUTE_MIN_FRACTION)


def _scaling_bar(base: DepthPoint, top: DepthPoint, device_queue_depth: int | None) -> Bar:
    want = expected_depth(top.offered_depth, device_queue_depth) / expected_depth(base.offered_depth,
                                                                                   device_queue_depth)
    held = top.guest_aqu_sz / base.guest_aqu_sz if base.guest_aqu_sz > 0 else float("inf")
    got = top.iops / base.iops if base.iops > 0 else 0.0
    return Bar(got, want, held, IOPS_SCALING_MIN_FRACTION, IOPS_SCALING_ABSOLUTE_MIN_FRACTION)


def _cpu_text(p: DepthPoint) -> str:
    if p.guest_cpu_busy_pct is None:
        return "CPU unknown"
    all_pct = f", all {p.guest_cpu_all_pct:.0f} %" if p.guest_cpu_all_pct is not None else ""
    fio = f", fio {p.fio_cpu_pct:.0f} % of one" if p.fio_cpu_pct is not None else ""
    return f"CPU busiest vCPU {p.guest_cpu_busy_pct:.0f} %{all_pct}{fio}"


def _lines(pts: tuple[DepthPoint, ...], device_queue_depth: int | None, path: GuestPath | None) -> list[str]:
    """What was measured at each offered depth, and the bar the host had to reach."""
    lines = [f"device queue depth: {device_queue_depth if device_queue_depth else 'unknown'}",
             path.describe() if path is not None else "guest limits on the path: not read"]
    for p in pts:
        bar = _depth_bar(p, device_queue_depth)
        lines.append(
            f"offered {p.offered_depth:>3}: IOPS {p.iops:,.0f}; guest: fio at depth {p.fio_depth_mode}, "
            f"aqu-sz {p.guest_aqu_sz:.1f}, inflight {p.guest_inflight_mean:.1f}; host depth "
            f"{p.host_depth:.1f} (per-second {p.host_depth_min:.1f}-{p.host_depth_max:.1f}, {p.host_source}); "
            f"needs {bar.required:.1f} (from offered {bar.from_offered:.1f}, from guest-held "
            f"{bar.from_guest:.1f}, floor {bar.absolute:.1f}); guest {_cpu_text(p)}")
    return lines


def _properties(pts: tuple[DepthPoint, ...], device_queue_depth: int | None,
                path: GuestPath | None) -> dict[str, Number]:
    """Every number of every depth, by name, for the JUnit record (``qd32_host_depth``, ...)."""
    props: dict[str, Number] = {"device_queue_depth": device_queue_depth or 0,
                                "guest_cpu_busy_min_pct": GUEST_CPU_BUSY_MIN_PCT}
    if path is not None:
        props.update({f"guest_limit_{lim.path.rsplit('/', 1)[-1]}": lim.value for lim in path.limits})
        props.update({"guest_scheduler": path.scheduler or "unknown", "guest_cgroup": path.cgroup or "none",
                      "guest_io_max": "; ".join(e.text() for e in path.io_max) or "none"})
        if path.async_depth is not None:
            props["guest_async_depth"] = path.async_depth
    for p in pts:
        k = f"qd{p.offered_depth}"
        props.update({f"{k}_iops": round(p.iops, 1), f"{k}_host_depth": round(p.host_depth, 2),
                      f"{k}_host_depth_min": round(p.host_depth_min, 2),
                      f"{k}_host_depth_max": round(p.host_depth_max, 2),
                      f"{k}_guest_aqu_sz": round(p.guest_aqu_sz, 2),
                      f"{k}_guest_inflight_mean": round(p.guest_inflight_mean, 2),
                      f"{k}_fio_depth_mode": p.fio_depth_mode, f"{k}_host_source": p.host_source})
        cpu = {"guest_cpu_busy_pct": p.guest_cpu_busy_pct, "guest_cpu_all_pct": p.guest_cpu_all_pct,
               "fio_cpu_pct": p.fio_cpu_pct, "vcpu_wait_pct": p.vcpu_wait_pct}
        props.update({f"{k}_{name}": round(v, 1) for name, v in cpu.items() if v is not None})
        bar = _depth_bar(p, device_queue_depth)
        props.update({f"{k}_host_required": round(bar.required, 2),
                      f"{k}_host_required_from_offered": round(bar.from_offered, 2),
                      f"{k}_host_required_from_guest": round(bar.from_guest, 2)})
    if len(pts) > 1:
        scaling = _scaling_bar(pts[0], pts[-1], device_queue_depth)
        props.update({"iops_scaling": round(scaling.got, 2), "iops_scaling_required": round(scaling.required, 2),
                      "iops_scaling_required_from_offered": round(scaling.from_offered, 2),
                      "iops_scaling_required_from_guest": round(scaling.from_guest, 2)})
    return props


@dataclass(frozen=True)
class DeviceSaid:
    """What the hypervisor says the device advertises as its queue depth, and where it said it
    ("cmd_per_lun 1 of /machine/peripheral/ua-vioc-virtio-scsi/virtio-backend")."""

    queue_depth: int
    said_by: str


def judge_queue_depth(points: list[DepthPoint] | tuple[DepthPoint, ...], device_queue_depth: int | None,
                      require_queuing: bool = False, guest_path: GuestPath | None = None,
                      advertised: DeviceSaid | None = None) -> RuleVerdict:
    """Judge the points (at least one; the lowest offered depth is the IOPS baseline).

    The host is judged against what reached the guest's block layer (aqu-sz) as well as
    against the offered depth: a depth lost between the guest's block layer and the device
    (tcq-off) fails. A guest that held less than offered excuses the device only on evidence
    that its CPU could not keep the depth queued: its busiest vCPU busy (GUEST_CPU_BUSY_MIN_PCT)
    and no guest limit on the path (``guest_path``: not read, no excuse) under the offered depth.
    A guest limit under the offered depth and under the device's own limit fails the rule: the
    guest's configuration, not the device, kept the depth low. ``device_queue_depth`` is what the
    suite asked of the device (the depth expected); ``advertised`` what the hypervisor says the
    device advertises (its own limit, where said): a limit the driver set from it is no configuration."""
    if not points:
        raise ValueError("judge_queue_depth needs at least one measured depth")
    pts = tuple(sorted(points, key=lambda p: p.offered_depth))
    base, top = pts[0], pts[-1]
    problems: list[str] = []
    notes: list[str] = []
    held: list[str] = []
    if device_queue_depth == 1:
        notes.append("no command queuing: the device accepts one command at a time")
        if require_queuing:
            problems.append("the device has no command queuing and --require-queuing is set")

    def below(p: DepthPoint) -> list[Limiter]:
        if guest_path is None:
            return []
        return limiters(guest_path, p.offered_depth, device_queue_depth, base,
                        advertised.queue_depth if advertised is not None else None)

    want = expected_depth(top.offered_depth, device_queue_depth)
    under = (f"the offered {top.offered_depth}" if want == top.offered_depth
             else f"{want} = min(offered {top.offered_depth}, device limit {device_queue_depth})")
    hint = None
    for lim in below(top):
        if lim.configured:
            hint = Blame("guest configuration", f"{lim.what} caps the depth under {under}, under the device's own "
                                                f"limit {lim.under}")
            problems.append(
                f"the guest's configuration caps the depth under {under}: {lim.what}, under "
                f"the device's own limit {lim.under}. The layer that kept the depth low is the guest configuration, "
                f"not the device nor a slow guest CPU: {lim.remedy}")
    for p in pts:
        bar = _depth_bar(p, device_queue_depth)
        offered: tuple[str, ...] = (str(p.offered_depth), f"device limit {device_queue_depth}")
        guest = f"aqu-sz {p.guest_aqu_sz:.1f}"
        if not bar.met:
            missed = (f"at offered depth {p.offered_depth} the host saw {p.host_depth:.1f} in flight; expected at least "
                      f"{bar.text(offered, guest)}. The guest queued {p.guest_aqu_sz:.1f} in its block layer (aqu-sz), "
                      f"its driver held {p.guest_inflight_mean:.1f} (inflight) and fio submitted at depth "
                      f"{p.fio_depth_mode}")
            busy = _held_back(bar, p)
            (held if busy else problems).append(f"{missed}: {busy}" if busy else f"{missed}.")
        elif bar.excused_by_guest:
            why = _no_excuse(p, guest_path, below(p))
            if why:
                problems.append(
                    f"at offered depth {p.offered_depth} the host saw {p.host_depth:.1f} in flight; expected at least "
                    f"{bar.offered_text(offered)}. The guest's block layer held only {p.guest_aqu_sz:.1f} (aqu-sz), "
                    "which excuses the device only where the guest's CPU was busy and no guest limit on the path is "
                    f"under the offered depth: {why}")
            else:
                notes.append(
                    f"at offered depth {p.offered_depth} the guest's block layer held only {p.guest_aqu_sz:.1f} "
                    f"(aqu-sz); the host's {p.host_depth:.1f} meets {bar.text(offered, guest)}. The guest, not "
                    f"the device, kept the depth low (a busy or slow guest CPU: its busiest vCPU was busy "
                    f"{p.guest_cpu_busy_pct:.0f} % of the window, and no guest limit on the path is under "
                    f"{p.offered_depth})")
        if p.host_depth > HOST_DEPTH_MAX_OVER_OFFERED * p.offered_depth:
            problems.append(f"at offered depth {p.offered_depth} the host saw {p.host_depth:.1f} in flight, more "
                            "than offered: the host counters are not those of this disk's I/O")
    if top.offered_depth > base.offered_depth:
        bar = _scaling_bar(base, top, device_queue_depth)
        offered = (f"{bar.offered_ref:g}",)
        guest = f"aqu-sz ratio {top.guest_aqu_sz:.1f}/{base.guest_aqu_sz:.1f} = {bar.guest_ref:.1f}"
        scaled = (f"IOPS scaled {bar.got:.1f}x from depth {base.offered_depth} ({base.iops:,.0f}) to depth "
                  f"{top.offered_depth} ({top.iops:,.0f})")
        if bar.offered_ref > 1 and not bar.met:
            missed, busy = f"{scaled}; expected at least {bar.text(offered, guest, 'x')}", _held_back(bar, base, top)
            (held if busy else problems).append(f"{missed}: {busy}" if busy else missed)
        elif bar.offered_ref > 1 and bar.excused_by_guest:
            why = _no_excuse(top, guest_path, below(top))
            if why:
                problems.append(f"{scaled}; expected at least {bar.offered_text(offered, 'x')}. The guest's block "
                                f"layer held less than offered, which excuses the device only on evidence: {why}")
            else:
                notes.append(f"{scaled}: under {bar.from_offered:.1f}x, but the guest's block layer held less than "
                             f"offered, and it meets {bar.text(offered, guest, 'x')}")
    figure = DepthFigure(tuple(DepthGroup(p.offered_depth, p.guest_aqu_sz, p.host_depth,
                                          _depth_bar(p, device_queue_depth).required) for p in pts))
    props = _properties(pts, device_queue_depth, guest_path)
    fold_held(held, notes, props)
    lines = _lines(pts, device_queue_depth, guest_path)
    if advertised is not None:
        props["device_queue_depth_advertised"] = advertised.queue_depth
        lines[0] += (f"; the device advertises {advertised.queue_depth}" + (
            "" if advertised.queue_depth == device_queue_depth else f" where {device_queue_depth} was asked")
            + f" ({advertised.said_by})")
    return RuleVerdict(RULE, tuple(lines), tuple(problems), tuple(notes), props, (figure,), hint)
