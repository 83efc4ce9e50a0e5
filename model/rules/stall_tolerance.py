"""The stall-tolerance rule (docs/rules/stall-tolerance.md): a storage stall as long as a SAN failover must not turn into aborts,
resets, I/O errors or a read-only filesystem in the guest.

Two parts:

- *static*: the guest's command timeout for the disk (``/sys/block/X/device/timeout`` on a SCSI
  disk, ``queue/io_timeout`` on a blk-mq driver with a timeout handler: NVMe, and SCSI, whose value
  it is) is at least the stall it must ride out (``--stall-s``, :data:`DEFAULT_STALL_S`). A driver
  with no timeout handler (Linux 6.1's virtio_blk: no ``queue/io_timeout``) never gives up on a
  request: it passes.
- *dynamic*: the host holds every request of the scratch disk for a few seconds (``--stall-hold-s``)
  while the guest keeps I/O queued; when the hold is shorter than the guest's timeout, the held
  requests must complete with no error in the guest (fio's and the kernel's), no abort or reset
  at the host (QEMU's trace events) and no filesystem of the disk read-only. A hold as long as the
  timeout or longer is recorded, not judged: what each side did is in the verdict's notes.

That the hold is the host's (the guest's vCPUs run on) is the harness's to show, never the
verdict's: :func:`hold_problem` says why a hold proves nothing (the guest had none queued, the host
completed requests through it, or the guest did not answer while the disk was held).

Example::

    t = CommandTimeout("sdb", 5.0, "/sys/block/sdb/queue/io_timeout 5000 ms", "sd")
    judge_stall_tolerance(t, 30.0).passed  # False: the guest gives up after 5 s, under the 30 s stall
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from model.blame import BlameSettings
from model.judging.host_busy import Overrun, fold_overruns, not_judged
from model.judging.rule_option import RuleOption, positive_float
from model.judging.spec import LOWER, PARAM, Metrics, MetricSpec
from model.judging.verdict import Number, RuleVerdict
from model.parse.stall_evidence import CommandTimeout, HostEvent

RULE = "stall-tolerance"
#: The settings (model/blame.py's trail keys) the rule's verdict depends on.
BLAME = BlameSettings(frozenset({"io_timeout_ms"}))
#: Repeats without --repeats.
DEFAULT_REPEATS = 1
REPEATABLE = True
#: Which of its metrics follow the host CPU the guest gets (model/across/contention.py): sSH answers while the disk is held, and the held requests' slowest (the hold, plus the guest's own completion work).
HOST_CPU_BOUND: tuple[str, ...] = ("hold_probe_rtt_max_ms", "guest_max_latency_ms")

#: The stall the guest must ride out without giving up on a command, by default. Two sources agree
#: on 30 s: VMware's guest OS guidance for a path failover ("I/O might pause for 30 to 60 seconds
#: until ... failover is complete", vSphere's iSCSI SAN Configuration Guide, "Set Guest Operating
#: System Timeout", which sets Windows' disk TimeOutValue to 60 s for it) gives 30 s as the shortest
#: failover; and 30 s is Linux's own default SCSI command timeout (sd's SD_TIMEOUT, the
#: ``device/timeout`` a stock guest shows; IBM's Linux on Z "Setting the SCSI command timeout",
#: Red Hat's Online Storage Reconfiguration Guide, 1.17), so a stock guest passes and a guest set
#: lower fails. Longer failovers (VMware Tools' udev rule sets 180 s for Linux disks, VMware KB
#: 1009465; NetApp's guest OS tunings 190 s) are ``--stall-s 180``.
DEFAULT_STALL_S = 30.0
#: The longest --stall-s and --stall-hold-s: the longest the suite waits for any guest command
#: (guest/tools/tool.py's DEFAULT_TIMEOUT_S, 300 s). A stall longer than that could not be told
#: from a guest that hangs, and a longer bar would ask a guest to wait longer than the suite does.
MAX_STALL_S = 300.0
#: How long the dynamic part holds the disk by default: a few seconds, well under any timeout the
#: static part lets pass (30 s), so the default suite judges it; with the I/O around it, the rule
#: takes 3.1-3.4 s per controller in the default suite under TCG here. A longer hold
#: (``--stall-hold-s``) shows what the guest does when a stall outlasts its timeout (recorded, not judged).
DEFAULT_HOLD_S = 2.0
#: The shortest --stall-hold-s: the guest is asked over SSH every ~0.3 s while the disk is held
#: (one answer took 20-725 ms under TCG here, with fio's held requests queued): a hold under 1 s
#: leaves too few answers to show that the guest's vCPUs ran on.
MIN_HOLD_S = 1.0
#: Requests the host may complete while it holds the disk: the one QEMU's throttle lets through
#: before it starts holding (its bucket starts empty). Measured here, every controller: 0 or 1.
HOLD_LEAK_MAX = 1


def stall_seconds(text: str, shortest: float = 0.0) -> float:
    """``--stall-s``: a stall above 0 s and ``shortest`` or more (a hold: :func:`hold_seconds`), up to
    :data:`MAX_STALL_S`; ValueError with the reason otherwise."""
    v = positive_float(text)
    problem = (f"{text!r} s is above {MAX_STALL_S:g} s, the longest the suite waits on a guest: the stall-tolerance "
               "rule could not tell a stall that long from a guest that hangs; give one such as 30 or 180"
               if v > MAX_STALL_S else
               f"{text!r} s is under {shortest:g} s: the guest is asked over SSH every 0.3 s while its disk is held, "
               "and a shorter hold shows too few answers; give 1 or more, e.g. 2" if v < shortest else "")
    if problem:
        raise ValueError(problem)
    return v


def hold_seconds(text: str) -> float:
    """``--stall-hold-s``: :data:`MIN_HOLD_S` to :data:`MAX_STALL_S`; ValueError with the reason otherwise."""
    return stall_seconds(text, MIN_HOLD_S)


#: The rule's options (model/judging/rule_option.py): the stall it judges against, and how long it holds.
STALL_S = RuleOption("--stall-s", stall_seconds, DEFAULT_STALL_S,
                     "the storage stall (a SAN path failover) the guest must ride out: the stall-tolerance rule "
                     f"fails a disk whose command timeout is shorter, up to {MAX_STALL_S:g} "
                     f"(default: {DEFAULT_STALL_S:g}, the shortest failover of VMware's guest OS guidance)", "S")
STALL_HOLD_S = RuleOption("--stall-hold-s", hold_seconds, DEFAULT_HOLD_S,
                          "how long the stall-tolerance rule holds every request of the scratch disk at the host, "
                          f"{MIN_HOLD_S:g} to {MAX_STALL_S:g}; a hold as long as the guest's timeout or longer is "
                          f"recorded, not judged (default: {DEFAULT_HOLD_S:g})", "S")
OPTIONS = (STALL_S, STALL_HOLD_S)

#: What in the guest's kernel log during the stall shows it gave up on a request, reset the
#: device or lost data: Linux 6.1's own words (sd and libata's EH: "abort", "hard resetting link",
#: "Emask ... (timeout)"; nvme: "I/O 12 QID 1 timeout, aborting", "reset controller"; the block
#: layer: "I/O error, dev sdb"; ext4/xfs: "Remounting filesystem read-only").
RECOVERY_LINE = re.compile(r"abort|reset|time ?out|timed out|I/O error|blk_update_request|error|read-only|offline",
                           re.IGNORECASE)

#: What the rule records (model/judging/spec.py): settings and bars are parameters; the held
#: requests' wait and the drain after the release are lower-better; counts of what went wrong too.
METRICS: Metrics = (
    (r"command_timeout_s|stall_s_required|hold_s", MetricSpec("s", PARAM)),
    (r"stall_judged", MetricSpec("bool", PARAM)),
    (r"hold_host_completions|hold_guest_inflight|guest_ios", MetricSpec("requests", PARAM)),
    (r"hold_probes(_answered)?", MetricSpec("probes", PARAM)),
    (r"hold_vcpu_wait_pct", MetricSpec("%", PARAM)),
    (r"hold_probe_rtt_max_ms|guest_max_latency_ms", MetricSpec("ms", LOWER)),
    (r"host_aborts|host_resets|guest_errors|guest_recovery_lines|readonly_mounts", MetricSpec("events", LOWER)),
)

#: compare's minimum effects (model/across/moves.py says how each is derived from run-to-run noise):
#: 11 healthy runs of the default suite on one host (bench.rules --repeats 10). The SSH probes'
#: slowest answer during the hold follows the host's CPU; the held requests' slowest is the hold
#: itself (2 s) give or take a few ms. The event counts were 0 in every run: the 2 % floor applies.
MIN_EFFECTS: Mapping[str, float] = {
    "hold_probe_rtt_max_ms": 0.770,  # CV 18.14 % / 14.83 %, widest 73.2 % (virtio-blk / virtio-scsi)
    "guest_max_latency_ms": 0.020,  # CV 0.05 % / 0.08 %, widest 0.2 % (virtio-blk / virtio-scsi)
}


@dataclass(frozen=True)
class StallRun:
    """One hold of the disk, both sides.

    The host held every request for ``hold_s`` (from the throttle's start to its release) and
    completed ``host_completions`` meanwhile; the guest had up to ``guest_inflight_max`` requests in
    flight at the device and answered ``probes_answered`` of ``probes`` probes sent in the
    hold (the slowest round trip in ``probe_rtt_max_ms``, over ``probes_over``). After the release fio ended (``fio_error`` empty
    unless it reported one), its slowest request took ``guest_max_latency_ms``. ``host_events``
    are the device model's aborts and resets over the whole run (``host_events_source`` says which
    events were watched, or why none); ``guest_log`` the kernel's lines of the window that show
    recovery (:data:`RECOVERY_LINE`); ``readonly`` the disk's filesystems mounted read-only after."""

    hold_s: float
    host_completions: int
    guest_inflight_max: int
    probes: int
    probes_answered: int
    probe_rtt_max_ms: float
    guest_ios: int
    guest_max_latency_ms: float
    fio_error: str = ""
    host_events: tuple[HostEvent, ...] = ()
    host_events_source: str = ""
    guest_log: tuple[str, ...] = ()
    readonly: tuple[str, ...] = ()
    #: the channel the probes' round trips went over: "SSH" (the run), "the serial console" (the replay).
    #: Whether the guest answered is the same measurement over either; the round trip's time is the channel's.
    probes_over: str = "SSH"
    #: how long the guest's vCPUs waited for a host CPU over the hold, % per vCPU; None: not read
    vcpu_wait_pct: float | None = None

    @property
    def aborts(self) -> int:
        return sum(e.kind in ("abort", "cancel") for e in self.host_events)

    @property
    def resets(self) -> int:
        return sum(e.kind == "reset" for e in self.host_events)


def recovery_lines(log_lines: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """The kernel log lines that show the guest recovering from, or failing on, a request."""
    return tuple(line for line in log_lines if RECOVERY_LINE.search(line))


def judged(timeout: CommandTimeout, run: StallRun) -> bool:
    """Whether the stall is judged: it was shorter than the guest's timeout, or the guest has none."""
    return timeout.timeout_s is None or run.hold_s < timeout.timeout_s


def _unanswered(run: StallRun) -> Overrun:
    """The probes the guest left unanswered in the hold, as a bound it overran: the hold (``took_s``: the
    slowest answer, where one came after the release), with the vCPUs' wait over it
    (model/judging/host_busy.py: a wait that accounts for it leaves it unjudged)."""
    return Overrun(f"the guest answered none of {run.probes} probes (over {run.probes_over}) sent while the disk was held "
                   f"for {run.hold_s:.1f} s", run.vcpu_wait_pct,
                   run.probe_rtt_max_ms / 1000 if run.probe_rtt_max_ms > 0 else None, run.hold_s)


def hold_problem(run: StallRun, judge: bool = True) -> str | None:
    """Why a hold proves nothing about the guest (a harness error, never a verdict), or None: the
    guest had no request queued, or, for a stall that is judged (``judge``), the host completed
    requests through the hold or no SSH probe was answered inside it (the guest's vCPUs, not only
    its disk, may have stood still). A stall that outlasts the guest's timeout is recorded whatever
    it did: its error handling may drain the held requests (QEMU's IDE reset does) or stop the VM."""
    if run.guest_inflight_max == 0 and run.probes_answered:
        return (f"the guest had no request in flight at the device during the {run.hold_s:.1f} s hold: fio's I/O "
                "never reached the held disk")
    if not judge:
        return None
    if run.host_completions > HOLD_LEAK_MAX:
        return (f"the host completed {run.host_completions} requests while it held the disk for {run.hold_s:.1f} s "
                f"(at most {HOLD_LEAK_MAX} may pass as the hold starts): the hold did not hold")
    if run.probes_answered == 0 and not not_judged(_unanswered(run)):  # else the verdict says the host held it back
        return (f"the guest answered none of {run.probes} probes sent while the disk was held for "
                f"{run.hold_s:.1f} s: its vCPUs may have stood still too, so the hold shows nothing of the "
                "guest's storage stack alone")
    return None


def _timeout_text(t: CommandTimeout) -> str:
    if t.timeout_s is None:
        return f"none: {t.source}"
    return f"{t.timeout_s:g} s ({t.source})"


def judge_stall_tolerance(timeout: CommandTimeout, stall_s: float, run: StallRun | None = None,
                          not_run: str = "") -> RuleVerdict:
    """The static part against ``stall_s`` (``--stall-s``); the dynamic part from ``run`` when its
    hold was shorter than the guest's timeout, else recorded in the notes. ``not_run``: why there
    is no ``run`` (a backend that cannot hold a disk)."""
    lines = [(f"command timeout of {timeout.disk}{f' ({timeout.driver})' if timeout.driver else ''}: "
             f"{_timeout_text(timeout)}; the stall to ride out: {stall_s:g} s (--stall-s)")]
    problems: list[str] = []
    notes: list[str] = []
    props: dict[str, Number] = {"stall_s_required": stall_s, "command_timeout_source": timeout.source}
    if timeout.timeout_s is not None:
        props["command_timeout_s"] = timeout.timeout_s
        if timeout.timeout_s < stall_s:
            problems.append(
                f"the guest gives up on a command of {timeout.disk} after {timeout.timeout_s:g} s ({timeout.source}), "
                f"under the {stall_s:g} s storage stall it must ride out (--stall-s): a SAN path failover would "
                f"turn into aborts, resets and I/O errors. Raise it to {stall_s:g} s or more (a udev rule writing "
                "device/timeout, as VMware Tools' does)")
    if run is None:
        if not_run:
            notes.append(f"dynamic part not run: {not_run}")
        return RuleVerdict(RULE, tuple(lines), tuple(problems), tuple(notes), props)
    is_judged = judged(timeout, run)
    lines.append(f"stall: the host held every request of {timeout.disk} for {run.hold_s:.1f} s; it completed "
                 f"{run.host_completions} while the guest had up to {run.guest_inflight_max} in flight; the guest "
                 f"answered {run.probes_answered} of {run.probes} probes meanwhile (slowest "
                 f"{run.probe_rtt_max_ms:.0f} ms over {run.probes_over})")
    lines.append(f"after the release: fio completed {run.guest_ios} I/Os"
                 f"{', error: ' + run.fio_error if run.fio_error else ' with no error'}; its slowest request took "
                 f"{run.guest_max_latency_ms:.0f} ms")
    events = "; ".join(e.text() for e in run.host_events[:8]) + (" ..." if len(run.host_events) > 8 else "")
    lines.append(f"host aborts and resets: {len(run.host_events)}{': ' + events if events else ''} "
                 f"({run.host_events_source or 'not watched'})")
    if run.guest_log:
        lines.append("guest kernel log: " + " | ".join(run.guest_log[:6]) + (" ..." if len(run.guest_log) > 6 else ""))
    props.update({"hold_s": round(run.hold_s, 2), "stall_judged": int(is_judged),
                  "hold_host_completions": run.host_completions, "hold_guest_inflight": run.guest_inflight_max,
                  "hold_probes": run.probes, "hold_probes_answered": run.probes_answered,
                  "hold_probe_rtt_max_ms": round(run.probe_rtt_max_ms, 1), "guest_ios": run.guest_ios,
                  "guest_max_latency_ms": round(run.guest_max_latency_ms, 1), "host_aborts": run.aborts,
                  "host_resets": run.resets, "guest_errors": int(bool(run.fio_error)),
                  "guest_recovery_lines": len(run.guest_log), "readonly_mounts": len(run.readonly)})
    said = []
    if run.fio_error:
        said.append(f"fio saw an error: {run.fio_error}")
    if run.host_events:
        said.append(f"the host saw {run.aborts} abort(s) and {run.resets} reset(s) of the device: {events}")
    if run.guest_log:
        said.append(f"the guest's kernel logged {len(run.guest_log)} line(s) of error handling: "
                    + " | ".join(run.guest_log[:3]))
    overruns: list[Overrun] = []
    if run.vcpu_wait_pct is not None:
        props["hold_vcpu_wait_pct"] = run.vcpu_wait_pct
    if run.probes and not run.probes_answered:
        if is_judged and not_judged(_unanswered(run)):
            overruns.append(_unanswered(run))
        else:
            said.append(f"the guest answered none of {run.probes} probes while the disk was held: its vCPUs stood "
                        "still with it")
    if run.readonly:
        said.append(f"a filesystem of {timeout.disk} is read-only after the stall: {', '.join(run.readonly)}")
    if is_judged:
        where = ("with no command timeout in the guest" if timeout.timeout_s is None
                 else f"under the guest's {timeout.timeout_s:g} s timeout")
        problems += [f"a {run.hold_s:.1f} s stall, {where}, should pass unnoticed, but {s}" for s in said]
        fold_overruns(overruns, problems, notes, props)
    else:
        assert timeout.timeout_s is not None
        notes.append(f"the {run.hold_s:.1f} s stall outlasted the guest's {timeout.timeout_s:g} s timeout: "
                     "recorded, not judged" + (f"; {'; '.join(said)}" if said else "; the guest waited it out "
                                               "(no abort, reset or error on either side)"))
    return RuleVerdict(RULE, tuple(lines), tuple(problems), tuple(notes), props)
