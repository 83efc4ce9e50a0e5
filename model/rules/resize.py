"""Rule 10, resize: a disk the host grows while the guest runs I/O on it is seen at its new size by
the running guest, without a rescan by hand, within a bound per driver; the I/O in flight does not fail.

The host grows the scratch disk by :data:`GROW_BYTES` (libvirt ``virDomainBlockResize``, QEMU's
``block_resize`` on the disk's node: local and remote alike) while fio reads and writes its first
MiBs, then shrinks it back to its size, so that later rules find the disk as the suite made it. For
each step the rule records how long the host's call took, how long after it the guest's
``/sys/block/<disk>/size`` showed the size the host then reports, and the kernel log line that tells
which path told the guest (:func:`mechanism`: virtio_blk's config-change interrupt, the SCSI
"capacity data has changed" unit attention or virtio-scsi's parameter-change event, both ending in
sd's revalidation). It fails when the guest does not see the host's size within the bound, sees
another size, or when fio saw an error.

Then the case the grow is for (:class:`FsGrow`): with ext4 over the whole disk, mounted, the host grows
the disk again, and once the guest sees it ``resize2fs`` grows the mounted filesystem online; statfs
must show it larger by the grow, less ext4's own overhead. A failed resize2fs fails the rule with its
message, blamed on the guest (its filesystem and tools).

Example::

    v = judge_resize(run, bound_for("virtio_blk"))
    v.problems  # ('grow: the guest still saw 1073741824 bytes 5.0 s after the host grew the disk ...',)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from model.blame import Blame, BlameSettings
from model.judging.figures import Change, Figure, Marker, StepSeries, TimelineFigure
from model.judging.host_busy import Overrun, fold_overruns
from model.judging.spec import PARAM, Metrics, MetricSpec
from model.judging.verdict import Number, RuleVerdict
from model.parse.filesystem import FsSize

RULE = "resize"
#: The settings (model/blame.py's trail keys) the rule's verdict depends on. No sysfs setting decides whether the guest learns a new size: a notice the driver acts on does.
BLAME = BlameSettings(frozenset())
#: Repeats without --repeats.
DEFAULT_REPEATS = 1
REPEATABLE = True
#: Which of its metrics follow the host CPU the guest gets (model/across/contention.py).
HOST_CPU_BOUND: tuple[str, ...] = ()

#: What the scratch disk grows by: 64 MiB, a whole number of every logical block size and of
#: the 1 MiB a partition table aligns to, small enough that a sparse file grows by nothing on disk.
GROW_BYTES = 64 << 20
#: The I/O in flight through the resizes: 4 KiB random reads and writes, 4 in flight, over the disk's
#: first 16 MiB (well inside the size it shrinks back to), until stopped (the runtime is a cap).
IO_BLOCK_BYTES = 4096
IO_DEPTH = 4
IO_REGION_BYTES = 16 << 20
IO_RUNTIME_S = 120
#: How long fio may take to stop and print its JSON once signalled (one 4 KiB request in flight
#: ends in milliseconds; the rest is fio writing its output under TCG).
FIO_STOP_S = 10.0
#: Where the filesystem grown online is mounted.
MOUNT = "/mnt/vioc-resize"

_STEP = r"(grow|shrink)_"
#: What the rule records (model/judging/spec.py). The seconds follow the host's load under TCG and
#: are judged against the bound only: parameters, like the sizes and the bound.
METRICS: Metrics = (
    (_STEP + r"(host_from_bytes|host_to_bytes|guest_bytes)", MetricSpec("bytes", PARAM)),
    (_STEP + r"(host_s|guest_seen_s)", MetricSpec("s", PARAM)),
    (_STEP + r"mechanism", MetricSpec("", PARAM)),
    # how long the guest's vCPUs waited for a host CPU over the step's bounded interval (model/judging/host_busy.py)
    (_STEP + r"vcpu_wait_pct", MetricSpec("%", PARAM)),
    (r"resize_bound_s", MetricSpec("s", PARAM)),
    (r"fio_errors", MetricSpec("requests", PARAM)),
    (r"fs_grow_(before|after|device|resize2fs)_bytes", MetricSpec("bytes", PARAM)),
    (r"fs_grow_s", MetricSpec("s", PARAM)),
    (r"fs_grow_ok", MetricSpec("", PARAM)),
)
#: Nothing the rule records is a noisy measured quantity it compares across runs: no minimum effect.
MIN_EFFECTS: Mapping[str, float] = {}

#: How long the guest may take to see a new size, by the disk's guest driver. Every path is one
#: notice (an interrupt or an event) and one work item that reads the size (virtio_blk: the config
#: space; sd: READ CAPACITY), well under a second on an idle host. Measured under TCG on this 2-core
#: machine with other guests running (docs/rules/resize.md gives the figures): 0.03-0.24 s from the
#: host's return to the guest answering over SSH that it shows the size, the round trip included
#: (virtio-blk and virtio-scsi, 4 runs each). The bound is 5 s for each: 20 times the largest
#: measured, room for a loaded host, and still a bound: without a notice the guest never sees it.
SEEN_BOUND_S: Mapping[str, float] = {"virtio_blk": 5.0, "sd": 5.0, "nvme": 5.0}
#: For a driver not measured: the same one-notice-one-read path is assumed.
DEFAULT_BOUND_S = 5.0


@dataclass(frozen=True)
class Bound:
    """How long the guest may take to show a new size, and where the figure comes from."""

    seconds: float
    source: str


def bound_for(driver: str) -> Bound:
    """The bound for a disk of guest driver ``driver`` (``virtio_blk``, ``sd``, ``nvme``)."""
    if driver in SEEN_BOUND_S:
        return Bound(SEEN_BOUND_S[driver], f"measured on {driver} (SEEN_BOUND_S)")
    return Bound(DEFAULT_BOUND_S, f"{driver} not measured: the bound of one notice and one read (DEFAULT_BOUND_S)")


#: Kernel log lines that say how the guest learned a size, most telling first, each with the path it
#: names. sd re-reads the capacity (its ``logical blocks:`` line) only when something rescans the
#: device: on virtio-scsi the parameter-change event (virtio_scsi's ``virtscsi_handle_param_change``
#: calls ``scsi_rescan_device``). The unit attention 2a/09 a command meets (``Capacity data has
#: changed``) makes sd send a uevent only: alone, it tells the kernel nothing of the new size.
#: Last, the block layer's line that every driver's ``set_capacity_and_notify`` prints.
MECHANISMS: tuple[tuple[str, str], ...] = (
    ("new size:", "virtio_blk's config-change interrupt"),
    ("logical blocks:", "sd's revalidation (READ CAPACITY) on a rescan: virtio-scsi's parameter-change event"),
    ("detected capacity change", "the block layer's capacity change (set_capacity_and_notify)"),
    ("Capacity data has changed", "a SCSI unit attention 2a/09 only (sd sends a uevent and does not re-read the size)"),
)


def mechanism(kernel_lines: Sequence[str], disk: str) -> str | None:
    """The kernel log line that names how the guest learned ``disk``'s new size, with the path it
    names (``"virtio_blk's config-change interrupt: virtio_blk virtio3: [vdb] new size: ..."``);
    None where no line does (the guest never learned it, or its kernel prints nothing). The unit
    attention's line names the SCSI device (``sd 0:0:1:0``), not the disk: it is taken as it is."""
    for needle, path in MECHANISMS:
        for line in kernel_lines:
            if needle in line and (f"{disk}]" in line or f"{disk}:" in line or needle == "Capacity data has changed"):
                return f"{path}: {line.strip()}"
    return None


@dataclass(frozen=True)
class ResizeStep:
    """One change of the disk's size: what the host asked and then reported, how long its call took,
    what the guest showed at the end of its wait and after how long (None: not within the wait)."""

    name: str  # "grow" or "shrink"
    host_from_bytes: int
    host_to_bytes: int
    host_s: float
    guest_bytes: int
    guest_seen_s: float | None
    mechanism: str | None
    #: how long the guest's vCPUs waited for a host CPU from the host's return to the guest's answer (or
    #: the end of its wait), in % per vCPU (model/judging/host_busy.py); None: not read
    vcpu_wait_pct: float | None = None


#: How much of a grow ext4 may keep for itself (what statfs's total leaves out). The grow adds a block group
#: with a full group's inode table (mke2fs's 8192 inodes of 256 bytes per 128 MiB group: 2 MiB) even where
#: it fills half the group, and its two bitmap blocks: 2 MiB + 8 KiB of GROW_BYTES, 3.1 %. Measured: statfs's
#: total grew by 65003520 of 67108864 bytes on virtio-blk and virtio-scsi (3.14 % kept). 5 % leaves room
#: for a group that holds a backup superblock and group descriptors (sparse_super: groups 1, 3, 5, 7, 9...).
EXT4_OVERHEAD_FRACTION = 0.05


@dataclass(frozen=True)
class FsGrow:
    """An ext4 filesystem over the whole disk, mounted, grown online (``resize2fs``) after the guest saw
    the disk grow: its size (statfs) before the disk grew and after resize2fs, the disk's size the guest
    saw, what resize2fs said (``error``: "" where it succeeded, else its message; ``resize2fs_bytes``: the
    size it reported) and how long it took. ``not_run``: why it was not tried (the guest never saw the disk
    grow); ``after`` None: not read (resize2fs failed)."""

    before: FsSize | None
    after: FsSize | None
    device_bytes: int
    error: str = ""
    resize2fs_bytes: int | None = None
    seconds: float = 0.0
    not_run: str = ""


@dataclass(frozen=True)
class ResizeRun:
    """One run of the rule on a disk: its steps, what fio said of the I/O running through them, and
    the filesystem grown online afterwards (None: not tried)."""

    disk: str
    driver: str
    steps: tuple[ResizeStep, ...]
    fio_errors: int
    fio_said: str = ""
    #: why the host did not shrink the disk back (the hypervisor's refusal: vSphere only grows a disk), or ""
    not_shrunk: str = ""
    fs: FsGrow | None = None


def _fs_part(fs: FsGrow, disk: str) -> tuple[list[str], list[str], dict[str, Number], Blame | None]:
    """The online grow's line, problems, numbers, and the layer a failed resize2fs blames."""
    if fs.not_run:
        return [f"online filesystem grow: not tried: {fs.not_run}"], [], {}, None
    props: dict[str, Number] = {"fs_grow_device_bytes": fs.device_bytes, "fs_grow_ok": int(not fs.error),
                                "fs_grow_s": round(fs.seconds, 3)}
    if fs.before is not None:
        props["fs_grow_before_bytes"] = fs.before.total_bytes
    if fs.after is not None:
        props["fs_grow_after_bytes"] = fs.after.total_bytes
    if fs.resize2fs_bytes is not None:
        props["fs_grow_resize2fs_bytes"] = fs.resize2fs_bytes
    what = f"resize2fs on the mounted ext4 of {disk} (the disk now {fs.device_bytes} bytes)"
    if fs.error:
        return ([f"online filesystem grow: {what} failed after {fs.seconds:.2f} s: {fs.error}"],
                [f"online filesystem grow: {what} failed: {fs.error}"], props,
                Blame("guest driver", f"the guest saw the disk's new size ({fs.device_bytes} bytes) and its filesystem "
                      f"could not grow into it online: resize2fs said {fs.error!r}"))
    if fs.before is None or fs.after is None:
        return [f"online filesystem grow: {what} in {fs.seconds:.2f} s; statfs not read"], [], props, None
    grew = fs.after.total_bytes - fs.before.total_bytes
    least = int(GROW_BYTES * (1 - EXT4_OVERHEAD_FRACTION))
    lines = [(f"online filesystem grow: {what} took {fs.seconds:.2f} s; statfs total {fs.before.total_bytes} -> "
              f"{fs.after.total_bytes} bytes (+{grew}; the disk grew by {GROW_BYTES})")]
    problems = []
    if grew < least:
        problems.append(f"online filesystem grow: after {what} succeeded, statfs shows the filesystem {grew} bytes larger, "
                        f"less than the {least} bytes of the disk's {GROW_BYTES}-byte grow it should have taken (ext4 "
                        f"keeps at most {EXT4_OVERHEAD_FRACTION:.0%} for itself: EXT4_OVERHEAD_FRACTION)")
    elif grew > GROW_BYTES:
        problems.append(f"online filesystem grow: statfs shows the filesystem {grew} bytes larger after {what}, more "
                        f"than the {GROW_BYTES} bytes the disk grew by")
    return lines, problems, props, None


def _step_problems(step: ResizeStep, bound: Bound) -> tuple[list[str], list[Overrun]]:
    """The step's problems: another size than the host's, and the bound overrun (judged against the
    host's hold on the vCPUs: model/judging/host_busy.py)."""
    grew = "grew" if step.name == "grow" else "shrank"
    if step.guest_seen_s is None and step.guest_bytes == step.host_from_bytes:
        return [], [Overrun(f"{step.name}: the guest still saw {step.guest_bytes} bytes {bound.seconds:.1f} s after the host {grew} "
                f"the disk from {step.host_from_bytes} to {step.host_to_bytes} bytes (bound {bound.seconds:.1f} s: "
                f"{bound.source}); no notice reached the driver, or it did not act on it", step.vcpu_wait_pct, None,
                        bound.seconds)]
    if step.guest_seen_s is None:
        return [(f"{step.name}: the guest saw {step.guest_bytes} bytes after the host {grew} the disk from "
                f"{step.host_from_bytes} to {step.host_to_bytes} bytes: another size than the host configured")], []
    if step.guest_seen_s > bound.seconds:
        return [], [Overrun(f"{step.name}: the guest saw the new size {step.guest_seen_s:.2f} s after the host {grew} "
                            f"the disk, beyond the bound of {bound.seconds:.1f} s ({bound.source})", step.vcpu_wait_pct,
                            step.guest_seen_s, bound.seconds)]
    return [], []


def judge_resize(run: ResizeRun, bound: Bound) -> RuleVerdict:
    lines = [f"{run.disk} ({run.driver}), the guest's bound {bound.seconds:.1f} s ({bound.source})"]
    problems: list[str] = []
    overruns: list[Overrun] = []
    props: dict[str, Number] = {"resize_bound_s": bound.seconds, "fio_errors": run.fio_errors}
    for s in run.steps:
        seen = "never" if s.guest_seen_s is None else f"after {s.guest_seen_s:.2f} s"
        lines.append(f"{s.name}: host {s.host_from_bytes} -> {s.host_to_bytes} bytes in {s.host_s:.2f} s; the guest "
                     f"saw {s.guest_bytes} bytes {seen}; told by: {s.mechanism or 'no kernel log line'}")
        step_problems, step_overruns = _step_problems(s, bound)
        problems += step_problems
        overruns += step_overruns
        props |= {f"{s.name}_host_from_bytes": s.host_from_bytes, f"{s.name}_host_to_bytes": s.host_to_bytes,
                  f"{s.name}_guest_bytes": s.guest_bytes, f"{s.name}_host_s": round(s.host_s, 3),
                  f"{s.name}_mechanism": s.mechanism or "none"}
        if s.guest_seen_s is not None:
            props[f"{s.name}_guest_seen_s"] = round(s.guest_seen_s, 3)
        if s.vcpu_wait_pct is not None:
            props[f"{s.name}_vcpu_wait_pct"] = s.vcpu_wait_pct
    if run.not_shrunk:
        lines.append(f"shrink: not done ({run.not_shrunk}); the disk keeps its grown size for the rest of the run")
    lines.append(f"fio through the resizes: {run.fio_errors} error(s)")
    if run.fio_errors:
        problems.append(f"fio saw {run.fio_errors} error(s) while the host resized the disk (expected 0): "
                        f"{run.fio_said[-400:] or 'fio said nothing more'}")
    hint = None
    notes: list[str] = []
    fold_overruns(overruns, problems, notes, props)
    if run.fs is not None:
        fs_lines, fs_problems, fs_props, hint = _fs_part(run.fs, run.disk)
        lines, problems, props = lines + fs_lines, problems + fs_problems, props | fs_props
        if run.fs.not_run:
            notes.append(f"online filesystem grow not tried: {run.fs.not_run}")
    return RuleVerdict(RULE, tuple(lines), tuple(problems), tuple(notes), props, resize_figures(run, bound), hint)


def resize_figures(run: ResizeRun, bound: Bound) -> tuple[Figure, ...]:
    """Each step's sizes over time, host and guest, from the host's request (:func:`step_timeline`); the
    guest's size before a step is what it showed at the end of the step before (the first: the host's)."""
    figures: list[Figure] = []
    before: int | None = None
    for step in run.steps:
        figures.append(step_timeline(run.disk, step, step.host_from_bytes if before is None else before, bound))
        before = step.guest_bytes
    return tuple(figures)


def step_timeline(disk: str, step: ResizeStep, guest_before_bytes: int, bound: Bound) -> TimelineFigure:
    """One step's sizes on the suite's clock from the host's request: the host's size changes when its call
    returned (``host_s``), the guest's when it answered that it shows the host's size (``host_s +
    guest_seen_s``). A guest that did not within the bound keeps its size to the end of its wait, where
    it shows ``guest_bytes``. The seconds between two steps are not measured: each step has its own figure."""
    returned = step.host_s
    host = StepSeries("host size", "host", (Change(0.0, step.host_from_bytes), Change(returned, step.host_to_bytes)))
    guest = [Change(0.0, guest_before_bytes)]
    markers = [Marker("host call returned", returned)]
    if step.guest_seen_s is not None:
        seen = returned + step.guest_seen_s
        if step.guest_bytes != guest_before_bytes:
            guest.append(Change(seen, step.guest_bytes))
        markers.append(Marker("guest showed the host's size", seen))
        if step.guest_seen_s > bound.seconds:
            markers.append(Marker("the bound", returned + bound.seconds))
        end = seen
    else:
        end = returned + bound.seconds
        if step.guest_bytes != guest_before_bytes:
            guest.append(Change(end, step.guest_bytes))
        markers.append(Marker("guest's wait ended at the bound", end))
    return TimelineFigure(f"{step.name}: {disk}'s size, host and guest", f"s from the host's {step.name} request",
                          (host, StepSeries("guest size", "guest", tuple(guest))), end, tuple(markers), "bytes",
                          note=("The host's size changes when its call returned; the guest's time runs from that "
                                "return to its answer over SSH that it shows the size (an upper bound: the round "
                                "trip is in it). The time between the steps is not measured."))
