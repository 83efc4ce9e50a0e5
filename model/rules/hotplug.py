"""Rule 10, hot-plug: a disk the host adds to the running guest is seen by the guest within a bound,
with the serial and size the host configured, and a disk the host removes is released by the guest
and gone from the host's configuration within a bound. Each step is timed on both sides.

The host adds a disk on the controller under test (libvirt ``attachDeviceFlags``, a serial of its own,
after the guest's own disks), the guest waits for a disk with that serial; then the host removes it
(``detachDeviceAlias``) and both sides wait for it to go. The verdict fails when the guest never shows
the disk, shows another size, keeps it after the host removed it, or the host keeps it after the guest
released it.

Example::

    v = judge_hotplug(HotplugRun("virtio-blk", "vioc-dut90", 64 << 20, 0.31, None, None, None))
    v.problems  # ('the guest showed no disk with serial vioc-dut90 within 10 s of the host adding it ...',)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from model.blame import LIMIT_KEYS, Blame, BlameSettings
from model.judging.figures import PRESENCE_LEVELS, Change, Figure, Marker, Pair, StepSeries, TimelineFigure, pair_figure
from model.judging.host_busy import Overrun, fold_overruns
from model.judging.rule_option import flag
from model.judging.spec import PARAM, Metrics, MetricSpec
from model.judging.verdict import Number, RuleVerdict
from model.rules.limits import LimitComparison

RULE = "hotplug"
#: The settings (model/blame.py's trail keys) the rule's verdict depends on. Whether a new device is bound or scanned is a bus setting, not the disk's: the verdict's hint names it.
BLAME = BlameSettings(frozenset())
#: Repeats without --repeats.
DEFAULT_REPEATS = 1
REPEATABLE = True
#: Which of its metrics follow the host CPU the guest gets (model/across/contention.py).
HOST_CPU_BOUND: tuple[str, ...] = ()

#: What the rule records: the times of each step on each side, and the bounds and sizes it checks
#: against. The times follow the host's load under TCG: parameters, judged against the bounds only.
METRICS: Metrics = (
    (r"(attach|detach)_host_s|seen_guest_s|seen_s|gone_guest_s|gone_host_s|(seen|gone)_bound_s", MetricSpec("s", PARAM)),
    (r"(configured|guest)_size_bytes", MetricSpec("bytes", PARAM)),
    (r"hotplug_(serial|device)", MetricSpec("", PARAM)),
    (r"surprise_(fio_s|fio_bound_s|gone_guest_s|gone_host_s)", MetricSpec("s", PARAM)),
    (r"surprise_fio_exit_status", MetricSpec("", PARAM)),
    # how long the guest's vCPUs waited for a host CPU over each bounded interval (model/judging/host_busy.py)
    (r"(seen|gone)_vcpu_wait_pct", MetricSpec("%", PARAM)),
    (r"surprise_fio_reads", MetricSpec("requests", PARAM)),
    (r"surprise_fio_read_bytes", MetricSpec("bytes", PARAM)),
    # the limits rule's comparison on the added disk, as text (model/rules/limits.py)
    (r"added_(" + "|".join(LIMIT_KEYS) + ")_(guest|configured)", MetricSpec("", PARAM)),
)
#: Nothing the rule records is a noisy measured quantity it compares: no minimum effect to measure.
MIN_EFFECTS: Mapping[str, float] = {}
#: The rule's option (model/judging/rule_option.py): a surprise removal too, outside the default suite.
SURPRISE_REMOVAL = flag("--surprise-removal",
                        "hotplug also removes a disk while fio reads it (a surprise removal); not in the default "
                        "suite because Debian 6.1's virtio_blk answers reads of a removed disk with no data and no "
                        "error, a finding that fails every healthy virtio-blk run (docs/rules/hotplug.md)")
OPTIONS = (SURPRISE_REMOVAL,)

#: How long the guest may take to show a disk the host added, from the host's request: 5 s. Measured
#: here under TCG (2 cores shared with other runs, 8 repeats each), from attachDeviceFlags to the disk
#: in the guest's /sys/block as the suite heard of it over SSH: virtio-blk 0.28-0.71 s (ACPI PCI
#: hot-plug, then the virtio probe), virtio-scsi 0.18-0.56 s (the HBA's rescan event); the bound leaves
#: 7x the slowest, for a loaded host. A guest that never binds or scans the device waits it out whole.
SEEN_BOUND_S = 5.0
#: How long the guest and the host may take to let a removed disk go, from the host's request: 5 s, as
#: measured alike until the host's live configuration no longer showed the disk: virtio-blk 0.30-0.68 s
#: (the guest's answer to the ACPI eject), virtio-scsi 0.09-0.22 s (QEMU drops a SCSI disk at once).
GONE_BOUND_S = 5.0


#: Where the guest's kernel says whether a new device on the virtio bus gets its driver at once ("1") or
#: waits for one bound by hand ("0"). A hot-added virtio-blk is two devices: the PCI function, which
#: the PCI core binds to virtio-pci with ``device_attach`` (pci_bus_add_device), whatever
#: ``/sys/bus/pci/drivers_autoprobe`` says, and the virtio device virtio-pci registers on the virtio
#: bus, which is probed only if that bus autoprobes. So the virtio bus's switch is the one that keeps
#: the disk from appearing (measured: with the PCI bus's at 0 the disk appeared as fast as without).
VIRTIO_AUTOPROBE = "/sys/bus/virtio/drivers_autoprobe"
#: The PCI bus's switch: it keeps a device added by a bus rescan unbound, not one added by hot-plug.
PCI_AUTOPROBE = "/sys/bus/pci/drivers_autoprobe"
#: scsi_mod's scan mode: "sync" or "async" scans a new target at once, "manual" only when asked.
SCSI_SCAN = "/sys/module/scsi_mod/parameters/scan"


def off_setting(driver: str) -> tuple[str, str]:
    """The guest setting (path, value) that keeps a new disk of ``driver`` from appearing (the
    ``hotplug-off`` fault): a new target on a SCSI HBA is left unscanned (sd: scsi_mod's scan=manual),
    a new virtio device without its driver (virtio_blk: the virtio bus's drivers_autoprobe)."""
    return (SCSI_SCAN, "manual") if driver == "sd" else (VIRTIO_AUTOPROBE, "0")


@dataclass(frozen=True)
class Seen:
    """The hot-plugged disk as the guest showed it."""

    device: str  # the guest's name for it: vdc, sdc
    size_bytes: int
    guest_s: float  # the guest's own wait, from its first look to the disk (its clock)
    seen_s: float  # from the host's request to the guest's answer (the suite's clock)
    #: the limits rule's comparison on the added disk: each limit the host configured against the
    #: guest's view of it when it appeared (empty: not read)
    limits: tuple[LimitComparison, ...] = ()


@dataclass(frozen=True)
class Gone:
    """How the removal of an idle disk went on both sides (None: the side still showed it at the bound)."""

    detach_host_s: float  # the host's detach request
    guest_s: float | None  # the guest's wait for the disk to go, from the host's request returning
    host_s: float | None  # from the host's request until its configuration no longer shows the disk
    #: how long the guest's vCPUs waited for a host CPU over the bounded interval (% per vCPU; None: not read)
    vcpu_wait_pct: float | None = None


#: How long fio may take to end after the host removed the disk under it: 5 s. Measured here under TCG:
#: on virtio-scsi fio ended 0.23 s after the detach request, with EIO (sd fails the requests of a
#: removed device). A driver that waits on requests the device will never answer holds fio until the
#: block layer's 30 s timeout or for ever: the bound sits far below that and 20x above the measured end.
FIO_END_BOUND_S = 5.0
#: The surprise removal's workload (the suite's and its replay's): fio's 4 KiB random reads at depth 4
#: over the added disk, for SURPRISE_FIO_RUNTIME_S, far past the bound, so that only the removal ends
#: it; the host removes the disk FIO_BEFORE_REMOVAL_S after fio started: long enough under TCG for fio
#: to have requests in flight (it starts in 0.2-0.4 s here), short for the rule's cost.
SURPRISE_FIO_RUNTIME_S = 60
FIO_BEFORE_REMOVAL_S = 1.0
SURPRISE_BS_BYTES, SURPRISE_DEPTH = 4096, 4


def first_error(stdout: str, stderr: str) -> str:
    """fio's first error line of a run the removal ended (stderr first), "" if it printed none."""
    for line in (stderr + "\n" + stdout).splitlines():
        if "err=" in line or "error" in line.lower():
            return line.strip()[:200]
    return ""


@dataclass(frozen=True)
class Surprise:
    """A disk removed by the host while fio read from it."""

    device: str  # the guest's name for the disk
    fio_s: float | None  # from the host's detach request to fio's end (None: fio still ran at the bound)
    fio_exit_status: int
    fio_error: str  # fio's first error line ("" if it printed none)
    responsive: bool  # the guest answered a command over SSH after the removal
    guest_gone_s: float | None
    host_gone_s: float | None
    fio_bound_s: float = FIO_END_BOUND_S
    #: what fio's JSON counted over the whole run (None: it printed none): reads completed and bytes they
    #: brought, so that reads answered with no data (EOF from a disk whose size went to 0) are told
    #: apart from reads that never completed
    fio_reads: int | None = None
    fio_read_bytes: int | None = None
    request_bytes: int = 4096


@dataclass(frozen=True)
class HotplugRun:
    """One add-and-remove of a disk on one controller."""

    controller: str
    serial: str
    configured_size_bytes: int
    attach_host_s: float  # the host's attach request
    seen: Seen | None  # None: the guest showed no such disk within SEEN_BOUND_S
    gone: Gone | None  # None: no removal was judged (the guest never showed the disk)
    seen_bound_s: float = SEEN_BOUND_S
    gone_bound_s: float = GONE_BOUND_S
    surprise: Surprise | None = None  # None: not run (the guest never showed the first disk)
    #: how long the guest's vCPUs waited for a host CPU from the add request to the guest's answer (or
    #: the end of its wait), in % per vCPU (model/judging/host_busy.py); None: not read
    seen_vcpu_wait_pct: float | None = None


def judge_hotplug(run: HotplugRun) -> RuleVerdict:
    """Pass when the guest showed the disk within the bound with the configured size, and both sides let
    it go within the bound after the host removed it."""
    lines = [(f"the host added a disk with serial {run.serial} ({run.configured_size_bytes} bytes) on {run.controller}: "
             f"its request took {run.attach_host_s:.2f} s")]
    problems: list[str] = []
    notes: list[str] = []
    hint: Blame | None = None
    props: dict[str, Number] = {"hotplug_serial": run.serial, "configured_size_bytes": run.configured_size_bytes,
                                "attach_host_s": round(run.attach_host_s, 2), "seen_bound_s": run.seen_bound_s,
                                "gone_bound_s": run.gone_bound_s}
    pairs: list[Pair] = []
    # the bounds overrun: judged against the host's hold on the vCPUs over each interval (model/judging/host_busy.py)
    overruns: list[Overrun] = []
    if run.seen_vcpu_wait_pct is not None:
        props["seen_vcpu_wait_pct"] = run.seen_vcpu_wait_pct
    seen = run.seen
    if seen is None:
        overruns.append(Overrun(f"the guest showed no disk with serial {run.serial} within {run.seen_bound_s:g} s of the host "
                        f"adding it on {run.controller} (7x the slowest measured here under TCG): the guest did not bind or "
                        "scan the new device", run.seen_vcpu_wait_pct, None, run.seen_bound_s))
        hint = Blame("guest driver", f"the new disk on {run.controller} never appeared in the guest")
    else:
        props.update({"hotplug_device": seen.device, "guest_size_bytes": seen.size_bytes,
                      "seen_guest_s": round(seen.guest_s, 2), "seen_s": round(seen.seen_s, 2)})
        pairs.append(Pair("seen (guest) / attach (host)", round(seen.seen_s, 2), round(run.attach_host_s, 2), "s"))
        lines.append(f"the guest showed it as {seen.device} ({seen.size_bytes} bytes) {seen.seen_s:.2f} s after the "
                     f"host's request (its own wait: {seen.guest_s:.2f} s)")
        if seen.seen_s > run.seen_bound_s:
            overruns.append(Overrun(f"the guest showed {seen.device} {seen.seen_s:.2f} s after the host added it, past "
                                    f"the bound of {run.seen_bound_s:g} s", run.seen_vcpu_wait_pct, seen.seen_s,
                                    run.seen_bound_s))
        for c in seen.limits:
            props[f"added_{c.key}_guest"] = str(c.guest)
            if c.compared:
                props[f"added_{c.key}_configured"] = str(c.configured)
            if not c.matches:
                problems.append(f"the added disk {seen.device}: {c.limit}: the host configured {c.configured}, the "
                                f"guest sees {c.guest} (the limits rule's comparison)")
        if seen.size_bytes != run.configured_size_bytes:
            problems.append(f"the guest shows {seen.device} with {seen.size_bytes} bytes, the host configured "
                            f"{run.configured_size_bytes}")
            hint = Blame("guest driver", f"{seen.device} shows another size than the host configured")
    gone = run.gone
    if gone is None:
        notes.append("the removal was not judged: the guest never showed the disk")
    else:
        props["detach_host_s"] = round(gone.detach_host_s, 2)
        if gone.vcpu_wait_pct is not None:
            props["gone_vcpu_wait_pct"] = gone.vcpu_wait_pct
        kept: list[str] = []
        if _judge_gone("", seen.device if seen else "the disk", gone.guest_s, gone.host_s, run.gone_bound_s,
                       kept, props, (": it did not release the device", "its request to remove it")):
            hint = Blame("guest driver", "the guest kept a disk the host removed")
        overruns += [Overrun(k, gone.vcpu_wait_pct, None, run.gone_bound_s) for k in kept]
        if gone.guest_s is not None and gone.host_s is not None:
            pairs.append(Pair("gone (guest) / gone (host)", round(gone.guest_s, 2), round(gone.host_s, 2), "s"))
            lines.append(f"the host removed it (request {gone.detach_host_s:.2f} s): the guest let it go after "
                         f"{gone.guest_s:.2f} s, the host's configuration dropped it after {gone.host_s:.2f} s")
    if run.surprise is not None:
        hint = _judge_surprise(run.surprise, run.gone_bound_s, lines, problems, props, pairs) or hint
    fold_overruns(overruns, problems, notes, props)
    return RuleVerdict(RULE, tuple(lines), tuple(problems), tuple(notes), props,
                       (*pair_figure(*pairs), *hotplug_figures(run)), hint)


def hotplug_figures(run: HotplugRun) -> tuple[Figure, ...]:
    """The disk's presence on each side over time: the add and the idle removal on one clock
    (:func:`presence_timeline`), the surprise removal on its own (:func:`surprise_timeline`): the suite
    does not time the second add, so the two share no clock."""
    first = presence_timeline(run)
    return (first,) if run.surprise is None else (first, surprise_timeline(run.surprise, run.gone_bound_s))


def presence_timeline(run: HotplugRun) -> TimelineFigure:
    """The add and the idle removal on the suite's clock from the host's add request: the host shows the
    disk from its request's return (``attach_host_s``), the guest from its answer (``seen_s``). The remove
    request follows that answer at once; the guest drops the disk its own wait after the request returned
    (``detach_host_s + guest_s``), the host's configuration ``host_s`` after the request. A side that kept
    the disk keeps it to the end of the wait for it, the bound."""
    host = [Change(0.0, 0.0), Change(run.attach_host_s, 1.0)]
    guest = [Change(0.0, 0.0)]
    markers = [Marker("host: add request returned", run.attach_host_s)]
    seen, gone = run.seen, run.gone
    if seen is None:
        end = run.attach_host_s + run.seen_bound_s
        markers.append(Marker("guest's wait ended at the bound", end))
    else:
        guest.append(Change(seen.seen_s, 1.0))
        end = seen.seen_s
        if gone is not None:
            removed = seen.seen_s
            markers.append(Marker("host: remove request", removed))
            waited = removed + gone.detach_host_s
            if gone.guest_s is not None:
                guest.append(Change(waited + gone.guest_s, 0.0))
            if gone.host_s is not None:
                host.append(Change(removed + gone.host_s, 0.0))
            end = max(waited + (run.gone_bound_s if gone.guest_s is None else gone.guest_s),
                      removed + (run.gone_bound_s if gone.host_s is None else gone.host_s))
    return TimelineFigure(f"{run.controller}: the added disk present on each side", "s from the host's add request",
                          (StepSeries("host: disk present", "host", tuple(host)),
                           StepSeries("guest: disk present", "guest", tuple(guest))),
                          end, tuple(markers), levels=PRESENCE_LEVELS,
                          note=("The guest's times reach the suite over SSH (the round trip is in them); the guest's "
                                "drop is its own wait from the remove request's return, and the host's configuration "
                                "is read every 0.1 s once the guest's wait ended."))


def surprise_timeline(s: Surprise, gone_bound_s: float) -> TimelineFigure:
    """The surprise removal on the suite's clock from the host's remove request, fio reading the disk:
    when fio ended (or the bound, where it did not), when the host's configuration dropped the disk
    (``host_gone_s``), and the guest's drop, its own wait (``guest_gone_s``) after fio's end: the wait
    began only then, so the guest is drawn dropping the disk no earlier than that."""
    fio_end = s.fio_bound_s if s.fio_s is None else s.fio_s
    markers = [Marker("fio ended" if s.fio_s is not None else "fio still reading at the bound", fio_end)]
    host = [Change(0.0, 1.0)] + ([] if s.host_gone_s is None else [Change(s.host_gone_s, 0.0)])
    guest = [Change(0.0, 1.0)] + ([] if s.guest_gone_s is None else [Change(fio_end + s.guest_gone_s, 0.0)])
    end = max(fio_end + (gone_bound_s if s.guest_gone_s is None else s.guest_gone_s),
              s.fio_bound_s + gone_bound_s if s.host_gone_s is None else s.host_gone_s)
    return TimelineFigure(f"surprise removal of {s.device} under fio: present on each side",
                          "s from the host's remove request", (StepSeries("host: disk present", "host", tuple(host)),
                                                               StepSeries("guest: disk present", "guest", tuple(guest))),
                          end, tuple(markers), levels=PRESENCE_LEVELS,
                          note=("The guest's wait for the disk to go began after fio ended (or was stopped) and the "
                                "guest answered over SSH: its drop is drawn that wait after fio's end, the round trips "
                                "not counted. The second add is not timed: this removal has its own clock."))


def _judge_gone(step: str, device: str, guest_s: float | None, host_s: float | None, bound_s: float,
                problems: list[str], props: dict[str, Number], wording: tuple[str, str]) -> bool:
    """The disk gone on both sides within ``bound_s`` after a removal (the idle one, ``step`` "", or
    the surprise one): a problem per side that still shows it, the seconds of each side that let it
    go. ``wording``: what follows the guest's problem, and what the host's bound counts from.
    True if the guest kept it."""
    prefix = f"{step} removal: " if step else ""
    key = f"{step}_" if step else ""
    if guest_s is None:
        problems.append(f"{prefix}the guest still shows {device} {bound_s:g} s after the host removed it{wording[0]}")
    else:
        props[f"{key}gone_guest_s"] = round(guest_s, 2)
    if host_s is None:
        problems.append(f"{prefix}the host still shows the disk {bound_s:g} s after {wording[1]}")
    else:
        props[f"{key}gone_host_s"] = round(host_s, 2)
    return guest_s is None


def _judge_surprise(s: Surprise, gone_bound_s: float, lines: list[str], problems: list[str],
                    props: dict[str, Number], pairs: list[Pair]) -> Blame | None:
    hint = None
    props.update({"surprise_fio_bound_s": s.fio_bound_s, "surprise_fio_exit_status": s.fio_exit_status})
    if s.fio_reads is not None and s.fio_read_bytes is not None:
        props.update({"surprise_fio_reads": s.fio_reads, "surprise_fio_read_bytes": s.fio_read_bytes})
    empty = (s.fio_reads - s.fio_read_bytes // s.request_bytes
             if s.fio_reads is not None and s.fio_read_bytes is not None else 0)
    if s.fio_s is None and empty > 0:
        problems.append(f"surprise removal: fio on {s.device} had not ended {s.fio_bound_s:g} s after the host removed "
                        f"the disk under it: of its {s.fio_reads} reads, {empty} completed with no data (the removed "
                        "disk reads as empty, end of device, not as an error), so fio never saw an error and read on")
        hint = Blame("guest driver", f"reads of a removed disk ({s.device}) end with no data and no error")
    elif s.fio_s is None:
        problems.append(f"surprise removal: fio on {s.device} had not ended {s.fio_bound_s:g} s after the host removed "
                        "the disk under it: the guest waits on requests the device will never answer")
        hint = Blame("guest driver", f"I/O on a removed disk ({s.device}) hung")
    else:
        props["surprise_fio_s"] = round(s.fio_s, 2)
        lines.append(f"surprise removal: the host removed {s.device} while fio read it; fio ended {s.fio_s:.2f} s later "
                     f"with exit status {s.fio_exit_status}" + (f" ({s.fio_error})" if s.fio_error else ""))
        if s.fio_s > s.fio_bound_s:
            problems.append(f"surprise removal: fio ended {s.fio_s:.2f} s after the removal, past the bound of "
                            f"{s.fio_bound_s:g} s")
        if s.fio_exit_status == 0:
            problems.append(f"surprise removal: fio reported no error although {s.device} was removed under it")
            hint = Blame("guest driver", f"reads of a removed disk ({s.device}) reported no error")
    if not s.responsive:
        problems.append("surprise removal: the guest did not answer over SSH after the removal")
    _judge_gone("surprise", s.device, s.guest_gone_s, s.host_gone_s, gone_bound_s, problems, props, ("", "removing it"))
    if s.fio_s is not None and s.host_gone_s is not None:
        pairs.append(Pair("surprise: fio ended (guest) / gone (host)", round(s.fio_s, 2), round(s.host_gone_s, 2), "s"))
    return hint
