"""Rule 8, error propagation: an error the disk returns reaches the application, for exactly the
requests it failed, is logged by the guest's kernel at the right sector, is retried only as the
driver documents, and is reported at once; the disk works again once the error is gone.

The host makes a known range of the scratch disk fail with EIO (model/error_injection.py: QEMU's
``blkdebug`` under the disk's block node, ``rerror``/``werror=report`` on the device), for reads
and then for writes, while the guest reads (then writes) requests that cover the range and more
(:data:`WORKLOAD`: fio with ``continue_on_error``, no verification). For each direction:

- exactly the requests that touch the range failed, as fio saw them, and the others completed;
- the guest's kernel logged each failed request with its first sector (``I/O error, dev sdb,
  sector 2112``);
- the host failed as many requests as the application saw fail, times the attempts the driver
  documents (:func:`attempts_for`: sd retries each 5 times, virtio_blk never);
- fio finished within the bound the driver's command timeout sets (:func:`bound_for`).

Then the range heals (the host's chain is back to the plain file) and the same requests are written
and read back, verified: no error anywhere. An injected range whose errors never reached the host
(the workload missed it, the injection is not in the disk's path) is :class:`InjectionNotFired`,
an ERROR, never a verdict. A device the hypervisor says keeps errors from the guest although the
suite configured it to report them (``rerror=ignore`` where ``report`` was set) fails the rule at
once, blamed on the hypervisor (``judge_error_propagation``'s ``policy``): the hypervisor under test
contradicts its own configuration, which is no failure of the suite's.

Example::

    v = judge_error_propagation(WORKLOAD, [read_phase, write_phase], healed, attempts_for("sd"),
                                bound_for(30.0, None))
    v.problems  # ('reads: the host failed 12 requests but the application saw 0 fail ...',)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from model.blame import Blame, BlameSettings
from model.error_injection import SECTOR_BYTES, ErrorPolicy, InjectedRange, Kind
from model.judging.figures import Pair, pair_figure
from model.judging.spec import PARAM, Metrics, MetricSpec
from model.judging.verdict import Number, RuleVerdict, kib
from model.parse.blockstats import HostRequestOutcomes
from model.parse.fio_errors import FioErrorRun
from model.parse.kernel_io_errors import RATELIMIT_BURST, RATELIMIT_INTERVAL_S, KernelWindow

RULE = "error-propagation"
#: The settings (model/blame.py's trail keys) the rule's verdict depends on. No sysfs setting decides where an error goes: its own evidence names the layer (the verdict's hint).
BLAME = BlameSettings(frozenset())
#: Repeats without --repeats.
DEFAULT_REPEATS = 1
REPEATABLE = True
#: Which of its metrics follow the host CPU the guest gets (model/across/contention.py).
HOST_CPU_BOUND: tuple[str, ...] = ()

_KIND = r"(read|write)_"

#: What the rule records (model/judging/spec.py). Every number is a count the rule checks exactly, a
#: setting it read or a bound it derived: parameters. fio's time is judged against the bound only;
#: under TCG it follows the host's load, so a change of it is reported as a change, not as worse.
METRICS: Metrics = (
    (_KIND + r"(requests|expected_failures|guest_failures|host_failures|host_completed|kernel_errors)",
     MetricSpec("requests", PARAM)),
    (_KIND + r"fio_s|bound_s", MetricSpec("s", PARAM)),
    (r"heal_(errors|host_failures)", MetricSpec("requests", PARAM)),
    (r"attempts_per_request", MetricSpec("attempts", PARAM)),
    (r"injected_(first_sector|sectors)", MetricSpec("sectors", PARAM)),
    (r"injected_device|fio_target|kernel_error_sectors", MetricSpec("", PARAM)),  # attempts_source, bound_source: shared (.*_source)
    (r"policy_(rerror|werror)", MetricSpec("", PARAM)),  # the device's error policy, as the hypervisor said it
)
#: Nothing the rule records is a noisy measured quantity: no minimum effect to measure.
MIN_EFFECTS: Mapping[str, float] = {}


@dataclass(frozen=True)
class Workload:
    """``requests`` requests of ``request_bytes`` every ``stride_bytes`` from ``offset_bytes``: a gap
    between any two, so that no layer can merge two into one (a merged request would fail whole)."""

    offset_bytes: int
    request_bytes: int
    stride_bytes: int
    requests: int

    @property
    def span_bytes(self) -> int:
        return self.stride_bytes * (self.requests - 1) + self.request_bytes

    @property
    def end_bytes(self) -> int:
        return self.offset_bytes + self.span_bytes

    def offsets(self) -> tuple[int, ...]:
        return tuple(self.offset_bytes + i * self.stride_bytes for i in range(self.requests))

    def touching(self, injected: InjectedRange) -> tuple[int, ...]:
        """The offsets of the requests that touch the injected range: the ones that must fail."""
        return tuple(o for o in self.offsets() if injected.touches(o, self.request_bytes))

    def describe(self) -> str:
        return (f"{self.requests} requests of {kib(self.request_bytes)} every {kib(self.stride_bytes)} from "
                f"{kib(self.offset_bytes)}")


#: 16 requests of 4 KiB with a 4 KiB gap after each, from 1 MiB: 0.4 s per direction under TCG here,
#: and few enough failures that the kernel's rate limit of its error lines (10 in 5 s, all disks
#: together) leaves every one of them printed for both controllers of a default run (4 each).
WORKLOAD = Workload(offset_bytes=1 << 20, request_bytes=4096, stride_bytes=8192, requests=16)
_REQUEST_SECTORS = WORKLOAD.request_bytes // SECTOR_BYTES
_STRIDE_SECTORS = WORKLOAD.stride_bytes // SECTOR_BYTES
#: The failing range: 16 sectors from the middle of request 4 to the middle of request 5, so that
#: two requests fail, each touching the range with part of it only (the last 4 sectors of one, the
#: first 4 of the other), and the gap between them is inside the range: a request must fail if it
#: touches the range at all, and the requests beside them (3 and 6, 8 sectors away) must not.
FIRST_SECTOR = WORKLOAD.offset_bytes // SECTOR_BYTES + 4 * _STRIDE_SECTORS + _REQUEST_SECTORS // 2
RANGE_SECTORS = _STRIDE_SECTORS
#: fio's depth: requests in flight together, so that a failing one is answered beside completing ones.
DEPTH = 4
#: The swallow-errors fault's device-mapper name.
SWALLOW = "vioc-swallow"


def injected(kind: Kind) -> InjectedRange:
    """The range the rule makes fail for ``kind``."""
    return InjectedRange(FIRST_SECTOR, RANGE_SECTORS, kind)


def kernel_error_sectors(workload: Workload, kind: Kind) -> tuple[int, int]:
    """Where the guest's kernel reports the rule's errors: (first, last) sector of the requests that touch
    the range. A kernel error line names its request's first sector, which may lie before the range
    (2112 for a range from 2116)."""
    touching = workload.touching(injected(kind))
    return touching[0] // SECTOR_BYTES, (touching[-1] + workload.request_bytes) // SECTOR_BYTES - 1


class InjectionNotFired(RuntimeError):
    """The host failed no request while its range was injected: the workload missed the range or the
    injection is not in the disk's path. No verdict can be reached (an ERROR, never a pass)."""


@dataclass(frozen=True)
class Attempts:
    """How many times the guest's driver sends a request the device failed before it gives up."""

    per_request: int
    source: str


#: The attempts per failed request each guest driver documents (the disk's own driver in sysfs). QEMU
#: answers EIO on a SCSI disk with CHECK CONDITION, ABORTED COMMAND, "I/O process terminated"
#: (0b/00/06, hw/scsi/scsi-disk.c); Linux's SCSI midlayer retries an aborted command at once
#: (scsi_check_sense: NEEDS_RETRY), and sd allows each command SD_MAX_RETRIES = 5 retries
#: (drivers/scsi/sd.h). Measured here: 12 host failures for 2 failed reads on virtio-scsi, 2 for 2 on
#: virtio-blk (QEMU 7.2, Debian's 6.1 kernel).
DRIVER_ATTEMPTS: Mapping[str, Attempts] = {
    "sd": Attempts(6, "sd retries a failed command up to SD_MAX_RETRIES = 5 times (drivers/scsi/sd.h; the "
                      "SCSI midlayer retries QEMU's ABORTED COMMAND for EIO at once)"),
    "virtio_blk": Attempts(1, "virtio_blk ends a request the device answers VIRTIO_BLK_S_IOERR with an error, "
                              "with no retry"),
}


def attempts_for(driver: str, nvme_max_retries: int | None = None) -> Attempts | None:
    """The attempts the guest driver ``driver`` ("sd", "virtio_blk", "nvme") documents, None where the
    suite knows none. NVMe's: nvme_core retries a command the device fails without Do Not Retry up to
    its ``max_retries`` parameter (``nvme_max_retries``, read in the guest; 5 by default); QEMU 7.2 sets
    no DNR on its Unrecovered Read Error (sc 0x81) and Write Fault (sc 0x80). Measured: 12 host
    failures for 2 failed requests each way."""
    if driver == "nvme" and nvme_max_retries is not None:
        return Attempts(1 + nvme_max_retries, f"nvme_core retries a command that fails without Do Not Retry up to "
                                              f"max_retries = {nvme_max_retries} times (its module parameter)")
    return DRIVER_ATTEMPTS.get(driver)


@dataclass(frozen=True)
class Bound:
    """How long fio may take over a run with injected errors, and where that figure comes from."""

    seconds: float
    source: str


#: A blk-mq driver that sets no timeout gets this one (block/blk-mq.c: ``set->timeout ?: 30 * HZ``);
#: one without a timeout handler (virtio_blk in Linux 6.1) never gives a request up.
DEFAULT_REQUEST_TIMEOUT_S = 30.0


def bound_for(scsi_timeout_s: float | None, io_timeout_ms: int | None) -> Bound:
    """The bound on fio's run: the disk's command timeout. A failed request is answered at once (QEMU
    reports EIO as soon as blkdebug returns it, and sd's retries are immediate), so the run takes as
    long as a healthy one; a request the guest waits a timeout for takes at least the timeout.
    ``scsi_timeout_s``: ``/sys/block/X/device/timeout`` (SCSI disks); ``io_timeout_ms``:
    ``/sys/block/X/queue/io_timeout`` (blk-mq drivers with a timeout handler)."""
    if scsi_timeout_s is not None:
        return Bound(scsi_timeout_s, f"the disk's SCSI command timeout, device/timeout = {scsi_timeout_s:g} s")
    if io_timeout_ms is not None:
        return Bound(io_timeout_ms / 1000, f"the disk's request timeout, queue/io_timeout = {io_timeout_ms} ms")
    return Bound(DEFAULT_REQUEST_TIMEOUT_S, "the block layer's default request timeout, 30 s (the driver has no "
                 "timeout of its own: a request the device never answers hangs for ever)")


@dataclass(frozen=True)
class PhaseRun:
    """One direction with its range injected: what fio, the host and the guest's kernel saw."""

    injected: InjectedRange
    device: str  # the scratch disk's kernel name (sdb)
    target: str  # what fio read or wrote: the disk, or a layer over it
    fio: FioErrorRun | None  # None: fio had not ended when the bound ran out
    host: HostRequestOutcomes  # what the host counted over the run
    kernel: KernelWindow
    fio_s: float  # from fio's start to its end as the suite saw it (to the bound if it had not ended)

    @property
    def host_failed(self) -> int:
        return self.host.failed_reads if self.injected.kind == "read" else self.host.failed_writes

    @property
    def host_completed(self) -> int:
        return self.host.reads if self.injected.kind == "read" else self.host.writes


def not_fired(phase: PhaseRun) -> str | None:
    """Why ``phase``'s injected errors never fired (an InjectionNotFired), or None if the host failed any request."""
    if phase.host_failed:
        return None
    return (f"the host failed no request while {phase.injected.describe()} of {phase.device} failed "
            f"(it completed {phase.host_completed} {phase.injected.kind}s): the workload missed the range, or "
            "the injection is not in the disk's path; no verdict")


@dataclass(frozen=True)
class HealRun:
    """The same requests written and read back, verified, after the range healed."""

    errors: int  # fio's total_err (a failed request or a failed verification)
    host_failures: int  # failed reads and writes the host counted over the run
    requests: int  # what fio wrote and read


def _offsets(offsets: Sequence[int]) -> str:
    return ", ".join(f"{o} (sector {o // SECTOR_BYTES})" for o in offsets) or "none"


def _judge_phase(workload: Workload, phase: PhaseRun, attempts: Attempts | None, bound: Bound,
                 lines: list[str], problems: list[str], notes: list[str], props: dict[str, Number],
                 hints: list[Blame]) -> list[Pair]:
    kind = phase.injected.kind
    what = f"{kind}s"
    expected = workload.touching(phase.injected)
    layered = phase.target != f"/dev/{phase.device}"
    lines.append(f"{what}: the host failed {phase.injected.describe()} of {phase.device} with EIO; fio {kind} "
                 f"{workload.describe()} on {phase.target}: {len(expected)} touch the range (at {_offsets(expected)})")
    props.update({f"{kind}_requests": workload.requests, f"{kind}_expected_failures": len(expected),
                  f"{kind}_host_failures": phase.host_failed, f"{kind}_host_completed": phase.host_completed,
                  f"{kind}_fio_s": round(phase.fio_s, 2)})
    if phase.fio is None:
        problems.append(f"{what}: fio had not finished {phase.fio_s:.0f} s after it started (bound {bound.seconds:g} s: "
                        f"{bound.source}): the guest waited on a failed request instead of reporting it")
        hints.append(Blame("guest driver", f"fio's {what} hung on the injected errors"))
        return []
    fio = phase.fio
    seen = sorted({f.offset_bytes for f in fio.failed if f.ddir == kind})
    props[f"{kind}_guest_failures"] = fio.errors
    lines.append(f"  the application saw {fio.errors} fail (at {_offsets(seen)}) of {fio.issued} it issued; "
                 f"the host failed {phase.host_failed} and completed {phase.host_completed}")
    missing = [o for o in expected if o not in seen]
    extra = [o for o in seen if o not in expected]
    if fio.issued != workload.requests:
        problems.append(f"{what}: fio got an answer for {fio.issued} of its {workload.requests} requests"
                        + (f" (it stopped after: {fio.failed[-1].message})" if fio.failed else ""))
    elif not missing and fio.errors < len(expected):
        problems.append(f"{what}: fio counted {fio.errors} failures for the {len(expected)} failed requests it "
                        "printed")
    if missing:
        where = (f"a layer between them ({phase.target} over {phase.device})" if layered
                 else f"the guest's driver or block layer of {phase.device}")
        problems.append(f"{what}: the host failed {phase.host_failed} requests and the application saw {fio.errors} "
                        f"fail: the requests at {_offsets(missing)} touch the failing range and returned as done; "
                        f"{where} swallowed the error, and the application believes it has data it never "
                        f"{'read' if kind == 'read' else 'wrote'}")
        hints.append(Blame("guest configuration" if layered else "guest driver",
                           f"{phase.target} answered {what} the host failed as done"))
    if extra or fio.errors > len(expected):
        problems.append(f"{what}: {max(len(extra), fio.errors - len(expected))} requests that do not touch the "
                        f"failing range (sectors {phase.injected.first_sector}-{phase.injected.end_sector - 1}) "
                        f"failed too (at {_offsets(extra)})")
        hints.append(Blame("guest driver", f"{what} outside the injected range failed in the guest; the host "
                                           "fails only requests that touch it"))
    if missing or extra or fio.errors != len(expected):
        # the host's counts follow from the wrong failures: a swallowing layer reads another leg, retries
        notes.append(f"{what}: the host's counts are not compared with the application's, whose failures are wrong")
    elif phase.host_completed != fio.issued - fio.errors:
        problems.append(f"{what}: the application saw {fio.issued - fio.errors} complete, the host completed "
                        f"{phase.host_completed}: expected one for one")
    elif attempts is None:
        notes.append(f"{what}: the host failed {phase.host_failed} requests for {fio.errors} failures the "
                     "application saw; not judged: the suite knows no retry count for this disk's driver")
    elif phase.host_failed != fio.errors * attempts.per_request:
        problems.append(f"{what}: the host failed {phase.host_failed} requests for the {fio.errors} failures the "
                        f"application saw; expected {fio.errors * attempts.per_request} ({attempts.per_request} "
                        f"attempts each: {attempts.source})")
        hints.append(Blame("guest driver", f"{what}: the guest retried failed requests other than as its driver "
                                           "documents"))
    logged = phase.kernel.errors_of(phase.device, kind)
    logged_sectors = sorted({e.sector for e in logged})
    props[f"{kind}_kernel_errors"] = len(logged)
    lines.append(f"  the kernel logged {len(logged)} {what} failed on {phase.device} (sectors "
                 f"{', '.join(map(str, logged_sectors)) or 'none'})")
    unlogged = [o for o in seen if o in expected and o // SECTOR_BYTES not in logged_sectors]
    if unlogged:
        limited = phase.kernel.printed_before + len(expected) > RATELIMIT_BURST
        said = (f"{what}: the kernel logged no error for the failed requests at {_offsets(unlogged)} (expected a "
                f"line 'I/O error, dev {phase.device}, sector N' each)")
        if limited:
            notes.append(f"{said}; it had printed {phase.kernel.printed_before} such lines in the "
                         f"{RATELIMIT_INTERVAL_S:g} s before, and prints at most {RATELIMIT_BURST} in that time")
        else:
            problems.append(said)
            hints.append(Blame("guest driver", f"{what}: failed requests the kernel did not log"))
    wrong = [s for s in logged_sectors if s * SECTOR_BYTES not in expected]
    if wrong and not layered:
        problems.append(f"{what}: the kernel logged errors at sectors {', '.join(map(str, wrong))}, where no "
                        f"request that touches the range starts (expected {', '.join(str(o // SECTOR_BYTES) for o in expected)})")
    lines.append(f"  fio took {phase.fio_s:.2f} s (bound {bound.seconds:g} s: {bound.source})")
    if phase.fio_s > bound.seconds:
        problems.append(f"{what}: fio took {phase.fio_s:.1f} s, more than {bound.seconds:g} s ({bound.source}): a "
                        "failed request waited for a timeout instead of failing at once")
        hints.append(Blame("guest driver", f"{what}: a failed request waited for a timeout"))
    return [Pair(f"{what}: failures the application saw / the host made", fio.errors, phase.host_failed)]


def judge_error_propagation(workload: Workload, phases: Sequence[PhaseRun], heal: HealRun | None,
                            attempts: Attempts | None, bound: Bound, policy: ErrorPolicy | None = None) -> RuleVerdict:
    """Each phase's failures on both sides, the kernel's lines, fio's time; then the healed disk. ``policy``:
    the device's error policy where the hypervisor said it keeps errors from the guest, against what the
    suite configured (the rule then injected nothing: ``phases`` is empty), which fails the rule."""
    if policy is not None:
        return _policy_verdict(policy)
    lines: list[str] = []
    problems: list[str] = []
    notes: list[str] = []
    hints: list[Blame] = []
    pairs: list[Pair] = []
    props: dict[str, Number] = {"bound_s": bound.seconds, "bound_source": bound.source}
    if attempts is not None:
        props.update({"attempts_per_request": attempts.per_request, "attempts_source": attempts.source})
    if phases:
        first = phases[0]
        props.update({"injected_device": first.device, "injected_first_sector": first.injected.first_sector,
                      "injected_sectors": first.injected.sectors, "fio_target": first.target})
    for phase in phases:
        pairs += _judge_phase(workload, phase, attempts, bound, lines, problems, notes, props, hints)
    if heal is None:
        notes.append("the healed disk was not checked: a phase did not end")
    else:
        props.update({"heal_errors": heal.errors, "heal_host_failures": heal.host_failures})
        lines.append(f"healed: the same {heal.requests} requests written and read back, verified: {heal.errors} "
                     f"errors, {heal.host_failures} failed at the host")
        if heal.errors or heal.host_failures:
            problems.append(f"after the range healed, {heal.errors} requests failed in the guest and "
                            f"{heal.host_failures} at the host: the disk does not work again")
            hints.append(Blame("guest driver", "the disk stayed failed after the host's errors stopped"))
    hint = hints[0] if problems and hints else None
    return RuleVerdict(RULE, tuple(lines), tuple(problems), tuple(notes), props, pair_figure(*pairs), hint)


def _policy_verdict(policy: ErrorPolicy) -> RuleVerdict:
    """The verdict where the hypervisor says the device keeps a failed request from the guest although the
    suite configured it to report it: FAILED, blamed on the hypervisor (it said the value, and it is not
    what it was given). The rule goes no further: no injected error could reach the guest to be judged."""
    props: dict[str, Number] = {f"policy_{p}": v for p, v in sorted(policy.found.items())}
    problem = (f"device {policy.device} keeps failed requests from the guest: {policy.describe()}. The "
               "hypervisor answers a request its disk failed other than it was configured to (ignore: as done, "
               "so the guest reads data that was never read and loses writes; stop: the VM pauses), so no "
               "error can reach the guest; the rule injected none")
    return RuleVerdict(RULE, (f"error policy of {policy.device}: {policy.describe()}",), (problem,), (), props,
                       hint=Blame("hypervisor", f"{policy.device}: the hypervisor reports {policy.describe()}"))
