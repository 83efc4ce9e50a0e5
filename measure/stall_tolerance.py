"""One storage stall of a disk, measured from both sides (the stall-tolerance rule).

fio keeps requests queued on the disk (4 KiB random reads and writes, :data:`STALL_DEPTH` deep);
once they flow, the host holds every request of the disk (``HypervisorBackend.disk_hold``) for the
hold's length while the guest is asked over SSH what it has in flight (the answers show its vCPUs
run on while its disk stands still); a timer thread releases the hold on time whatever the guest
does. Then fio is stopped (its held requests complete first) and what each side did is read: fio's
errors and slowest request, the host's aborts and resets (``recovery_watch``), the guest's kernel
log since a mark, and the disk's filesystems mounted read-only.

A stall the guest or the hypervisor does not come back from is reported within a bound and ends the
guest for the run: QEMU's monitor not answering the release within :data:`RELEASE_ANSWER_S` (the
domain is destroyed: hypervisors/libvirt/stall_tolerance.py says why QEMU 7.2 can get stuck), or fio's held
requests not completing within the drain bound after the release. Either is a ``GuestDied`` with
the guest's console; every later command on the guest fails at once with the same cause.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from guest.tools.fio import BackgroundFio, Fio, FioJob, FioOutput
from guest.tools.stall_tolerance import Stall
from guest.tools.system import WorkDir
from guest.tools.tool import rode_ok
from hypervisors.base import DiskHold
from measure import hostload
from measure.disk import GuestDisk
from measure.window import FIO_START_TIMEOUT_S, START_POLL_S
from model.errors import FioError, GuestDied, ParseError
from model.parse.blockstats import HostBlockCounters
from model.parse.fio_json import FioResult
from model.parse.stall_evidence import HostEvent, fio_outcome
from model.stall_workload import (
    HOLD_SETTLE_S,
    PROBE_PERIOD_S,
    REGION_BYTES,
    RELEASE_ANSWER_S,
    STALL_DEPTH,
)
from transport.ssh import GuestUnreachable, SshTransport

log = logging.getLogger("vioconform.measure")

@dataclass
class _Release:
    """The timer thread's release of the hold: the host's counters just before it, when it was sent
    and whether (and how) it came back."""

    hold: DiskHold
    done: threading.Event = field(default_factory=threading.Event)
    started: bool = False
    counters: HostBlockCounters | None = None
    sent_at: float = 0.0
    error: BaseException | None = None

    def fire(self) -> None:
        self.started = True
        try:
            self.counters = self.hold.counters()
            self.sent_at = time.monotonic()
            self.hold.release()
        except BaseException as e:  # noqa: BLE001 - carried to the measuring thread, which raises it
            self.error = e
        finally:
            self.done.set()


@dataclass(frozen=True)
class _Probe:
    sent_at: float
    answered_at: float | None
    inflight: int


@dataclass(frozen=True)
class StallMeasurement:
    """One hold of a disk, both sides (the rule turns it into its figures).

    The host held every request for ``hold_s`` (from the hold's start to the release) and completed
    ``host_completions`` of them meanwhile; ``probes`` SSH probes were sent in the hold, of which
    ``probes_answered`` were answered before the release, the most requests in flight they saw
    being ``guest_inflight_max``; ``probe_rtt_max_ms`` is the slowest answer of all. ``fio`` is the
    run's results and ``fio_error`` the error fio reported ("" for none); ``host_events`` the device
    model's aborts and resets (``host_events_source``: which events were watched); ``kernel_log``
    every line the guest's kernel logged from before fio started to after it ended; ``readonly`` the
    disk's mounts that were read-only after."""

    hold_s: float
    host_completions: int
    probes: int
    probes_answered: int
    guest_inflight_max: int
    probe_rtt_max_ms: float
    fio: FioResult
    fio_error: str
    host_events: tuple[HostEvent, ...]
    host_events_source: str
    kernel_log: tuple[str, ...]
    readonly: tuple[str, ...]
    #: how long the guest's vCPUs waited for a host CPU over the hold, % per vCPU (None: not read)
    vcpu_wait_pct: float | None = None


def _ops(c: HostBlockCounters) -> int:
    return c.rd_operations + c.wr_operations


def _given_up(disk: GuestDisk, reason: str) -> GuestDied:
    """The guest is given up for the run: every later command fails at once with ``reason``."""
    shell = disk.tools.shell
    if isinstance(shell, SshTransport):
        return shell.declare_dead(reason)
    return GuestDied(reason, disk.guest.console_tail())


def measure_stall(disk: GuestDisk, hold: DiskHold, hold_s: float, drain_s: float,
                  raw_dir: Path | None = None) -> StallMeasurement:
    """Hold every request of ``disk`` for ``hold_s`` while fio keeps it busy; both sides' account.
    GuestDied where the guest or its hypervisor did not come back (see the module docstring)."""
    dev = disk.kernel_name
    tag = f"vioc-stall-{dev}"
    stall, fio = disk.tool(Stall), disk.tool(Fio)
    work = disk.tool(WorkDir).ensure()
    watch = disk.backend.recovery_watch(disk.guest, disk.attached)
    job = FioJob("stall", rw="randrw", bs_bytes=4096, iodepth=STALL_DEPTH, size_bytes=REGION_BYTES, randseed=1,
                 runtime_s=FIO_START_TIMEOUT_S + hold_s + drain_s)
    log.info("%s (%s): holding every request for %.1f s at the host under fio %s depth %d", disk.config_id, dev,
             hold_s, job.rw, job.iodepth)
    token, marked = stall.mark_with_next()  # rides ahead of fio's start
    before = _ops(disk.host_counters())
    run = fio.start(job, disk.device_path, work, tag)
    release = _Release(hold)
    timer: threading.Timer | None = None
    try:
        rode_ok(marked)
        _wait_flowing(disk, run, before, raw_dir, tag)
        if watch is not None:
            watch.start()
        hold.hold()
        t0, cpu0 = time.monotonic(), disk.vcpu_times()
        timer = threading.Timer(hold_s, release.fire)
        timer.daemon = True
        timer.start()
        time.sleep(HOLD_SETTLE_S)
        held_from = disk.host_counters()
        probes = _probe(stall, dev, t0, t0 + hold_s)
        vcpu_wait = hostload.wait_pct(cpu0, disk.vcpu_times(), f"{disk.config_id}: the hold")
        if not release.done.wait(max(0.0, t0 + hold_s + RELEASE_ANSWER_S - time.monotonic())):
            _quietly("destroying the stuck domain", hold.give_up)
            raise _given_up(disk, f"its hypervisor hung in a storage stall: the host's release of a {hold_s:g} s hold "
                                  f"of {dev} got no answer within {RELEASE_ANSWER_S:.0f} s (the hypervisor waits on "
                                  "a held request), so the guest's VM was stopped")
        if release.error is not None:
            raise release.error
        finished = run.finish(drain_s)
        if not finished.ended:
            raise _given_up(disk, f"it hung in a storage stall: fio's requests on {dev} had not completed "
                                  f"{drain_s:.0f} s after the host released a {hold_s:g} s hold (requests in "
                                  f"flight then: {_inflight_now(stall, dev)})")
        events: tuple[HostEvent, ...] = watch.stop() if watch is not None else ()
        kernel, mounts = stall.after_run(token, dev)
        readonly = tuple(mounts)
    except BaseException:
        # Each step on its own: the error being raised is the one to report, whatever the cleanup meets
        # (a domain destroyed by give_up answers nothing).
        if timer is not None:
            timer.cancel()
        if not release.started:
            release.fire()  # the hold never outlives the measurement (a no-op where nothing is held)
        run.abandon()
        if watch is not None:
            _quietly("switching the recovery events off", watch.abort)
        raise
    result, error = _fio_outcome(finished.output, job, dev, raw_dir, tag)
    assert release.counters is not None
    in_hold = [p for p in probes if p.sent_at < release.sent_at]
    answered = [p for p in in_hold if p.answered_at is not None and p.answered_at <= release.sent_at]
    rtts = [p.answered_at - p.sent_at for p in probes if p.answered_at is not None]
    if raw_dir is not None:
        (raw_dir / f"{tag}.kernel-log").write_text("\n".join(kernel) + "\n")
        (raw_dir / f"{tag}.probes").write_text("".join(
            f"{p.sent_at - t0:.3f} {'-' if p.answered_at is None else f'{p.answered_at - t0:.3f}'} {p.inflight}\n"
            for p in probes))
    return StallMeasurement(
        hold_s=release.sent_at - t0, host_completions=_ops(release.counters) - _ops(held_from),
        probes=len(in_hold), probes_answered=len(answered),
        guest_inflight_max=max((p.inflight for p in answered), default=0),
        probe_rtt_max_ms=max(rtts, default=0.0) * 1000, fio=result, fio_error=error,
        host_events=events, host_events_source=watch.watched if watch is not None else "",
        kernel_log=tuple(kernel), readonly=readonly, vcpu_wait_pct=vcpu_wait)


def _quietly(what: str, step: Callable[[], object]) -> None:
    try:
        step()
    except Exception as e:  # noqa: BLE001 - a cleanup after the error being reported; libvirt raises its own
        log.warning("%s failed: %s", what, str(e).splitlines()[0] if str(e) else type(e).__name__)


def _wait_flowing(disk: GuestDisk, run: BackgroundFio, before: int, raw_dir: Path | None, tag: str) -> None:
    """Until the host has completed a request of fio's (its I/O reaches the disk). fio's own error
    if it ended meanwhile (FioError), a FioError too if nothing came in time."""
    t0 = time.monotonic()
    next_state = t0 + 1.0
    while _ops(disk.host_counters()) == before:
        now = time.monotonic()
        if now >= next_state:
            if not run.running():
                _, error = _fio_outcome(run.output(), run.job, disk.kernel_name, raw_dir, tag)
                raise FioError(f"fio {run.job.name} on {disk.kernel_name} ended {now - t0:.1f} s after it was started "
                               f"and no request of it reached the host{': ' + error if error else ''}", -1, error)
            next_state = now + 1.0
        if now - t0 > FIO_START_TIMEOUT_S:
            raise FioError(f"no request of fio {run.job.name} reached the host within {FIO_START_TIMEOUT_S:.0f} s of "
                           "starting it: the guest is too slow to start it, or its I/O does not reach this disk",
                           -1, "")
        time.sleep(START_POLL_S)


def _probe(stall: Stall, dev: str, t0: float, until: float) -> list[_Probe]:
    """Ask the guest for the disk's requests in flight every PROBE_PERIOD_S until ``until``. A probe
    the guest does not answer ends the probing (the transport's own checks then say what happened)."""
    probes = []
    while time.monotonic() < until:
        sent = time.monotonic()
        try:
            n = stall.inflight(dev)
        except (GuestUnreachable, GuestDied) as e:
            log.warning("the guest did not answer a probe sent %.1f s into the hold: %s", sent - t0,
                        str(e).splitlines()[0])
            probes.append(_Probe(sent, None, 0))
            break
        probes.append(_Probe(sent, time.monotonic(), n))
        time.sleep(max(0.0, min(PROBE_PERIOD_S - (time.monotonic() - sent), until - time.monotonic())))
    return probes


def _inflight_now(stall: Stall, dev: str) -> str:
    try:
        return str(stall.inflight(dev))
    except (GuestUnreachable, GuestDied, ParseError) as e:
        return f"unknown: {str(e).splitlines()[0]}"


def _fio_outcome(out: FioOutput, job: FioJob, dev: str, raw_dir: Path | None, tag: str) -> tuple[FioResult, str]:
    """fio's results and the error it reported (model.parse.stall_evidence.fio_outcome), its output kept in ``raw_dir``."""
    if raw_dir is not None:
        raw_dir.mkdir(parents=True, exist_ok=True)
        (raw_dir / f"{tag}.fio.json").write_text(out.stdout)
        if out.stderr:
            (raw_dir / f"{tag}.fio.stderr").write_text(out.stderr)
    return fio_outcome(out.stdout, out.stderr, out.status, f"fio {job.name} on {dev}")
