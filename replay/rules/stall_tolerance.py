"""stall-tolerance in the replay: as the run does on its scratch disk, fio keeps 4 KiB random reads and
writes queued (``STALL_DEPTH`` deep over the first ``REGION_BYTES``); once the host has completed one
of them, the host holds every request of the disk for the run's ``--stall-hold-s`` with QEMU's
throttle at 1 byte/s (``block_set_io_throttle`` over QMP, as the run's libvirt backend holds it) and
releases it on time from a timer of its own, whatever the guest does. Meanwhile the guest is probed
over its console instead of SSH: every ``PROBE_PERIOD_S`` it asks the host (``host ping``), reads its
requests in flight and tells the host (``host probe N``): a probe is answered when its second call
reaches the host before the release, its round trip from the host's answer to that call. After the
release fio is stopped (its held requests complete first), then the guest prints its kernel log since
a mark and the disk's read-only mounts; the host's aborts and resets are the controller's QEMU trace
events, switched on over QMP from the hold to the end, as the run watches them.

Judged by ``model.rules.stall_tolerance`` with the run's ``--stall-s`` and ``--stall-hold-s`` and the
guest's command timeout read after the set-up; a hold that proves nothing (``hold_problem``: fio's
I/O never reached the held disk, the host completed requests through the hold, the guest answered no
probe) is CannotTest, as the run's is an ERROR.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from model.errors import FioError, ParseError
from model.judging.verdict import RuleVerdict
from model.parse.blockstats import HostBlockCounters, parse_qmp_blockstats
from model.parse.fio_json import FIO_STOPPED_EXIT
from model.parse.stall_evidence import (
    CONTROLLER_EVENTS,
    TIMEOUT_SCRIPT,
    fio_outcome,
    lines_after_mark,
    parse_command_timeout,
    parse_recovery_events,
)
from model.parse.throttle_limits import NO_LIMITS
from model.rules.stall_tolerance import (
    RULE,
    STALL_HOLD_S,
    STALL_S,
    StallRun,
    hold_problem,
    judge_stall_tolerance,
    judged,
    recovery_lines,
)
from model.stall_workload import (
    DRAIN_S,
    HOLD_LIMITS,
    HOLD_SETTLE_S,
    PROBE_PERIOD_S,
    REGION_BYTES,
    RELEASE_ANSWER_S,
    STALL_DEPTH,
    drain_bound_s,
)
from replay.guest_script import Job
from replay.qemu import CannotTest, HostAction, HostCall
from replay.qmp import Qmp, QmpError
from replay.rules import Replayed, ReplayRule
from replay.rules.evidence import fio, guest_limits, output, part

JOB = "stall"
#: The channel of the probes' round trips (the run's is SSH): the rule's lines say it beside the slowest.
PROBES_OVER = "the serial console"
#: The replay's mark in the guest's kernel log before fio starts (the run's stall mark; a notice).
MARK = "vioconform-replay: stall-tolerance mark"
#: How long the host waits for fio's first request to complete at the host before it holds the disk:
#: the replay's own bound on a guest too slow to start fio (under TCG fio's first request reached the
#: host within a second here); a replay whose I/O never flows is CannotTest.
FLOWING_WAIT_S = 60.0

#: The guest's side while fio runs: the host holds the disk once fio's I/O flows; the probes until the
#: host says it released it; fio stopped and given the drain bound; the host's events switched off; the
#: kernel log since the mark and the disk's read-only mounts.
DURING = r"""host flowing {ref}
[ "$ANSWER" = flowing ] && host hold {ref} {controller} {hold_s}
while [ "$ANSWER" = held ]; do
  host ping; [ "$ANSWER" = held ] || break
  set -- $(cat /sys/block/$DEV/inflight); host probe $(($1 + $2)); [ "$ANSWER" = held ] || break
  usleep {period_us}
done
echo "hold=$ANSWER"
T=$(cat /sys/block/$DEV/queue/io_timeout 2>/dev/null); D={drain_s}
[ -n "$T" ] && [ {hold_ms} -ge "$T" ] && D=$(({drain_s} + 2 * T / 1000))
kill -INT $FIO 2>/dev/null && echo stopped=yes
i=0; while kill -0 $FIO 2>/dev/null && [ $i -lt $((D * 10)) ]; do usleep 100000; i=$((i + 1)); done
kill -0 $FIO 2>/dev/null && echo drained=no || echo drained=yes
host events {ref}
dmesg | sed -n '/{mark}/,$p' | sed 's/^/klog /'
grep -E "^/dev/$DEV(p?[0-9]+)? " /proc/mounts | while read -r line; do
  case " $(echo "$line" | cut -d' ' -f4 | tr , ' ') " in *" ro "*) echo "ro $line" ;; esac; done"""


def _measure(config: Mapping[str, object]) -> Mapping[str, object]:
    measure = config.get("measure")
    return measure if isinstance(measure, dict) else {}


def _option(config: Mapping[str, object], key: str, default: float) -> float:
    value = _measure(config).get(key, default)
    return float(value) if isinstance(value, (int, float)) else default


def hold_s(config: Mapping[str, object]) -> float:
    """The run's ``--stall-hold-s`` (its default where an older bundle has none)."""
    return _option(config, "stall_hold_s", STALL_HOLD_S.default)


def stall_s(config: Mapping[str, object]) -> float:
    """The run's ``--stall-s`` (its default where an older bundle has none)."""
    return _option(config, "stall_s", STALL_S.default)


def jobs(config: Mapping[str, object]) -> list[Job]:
    hold = hold_s(config)
    ref = str(config.get("host_ref") or "")
    if not ref:
        raise CannotTest("the bundle's configuration.json has no host_ref: the replay cannot hold the disk")
    during = (DURING.replace("{ref}", ref).replace("{controller}", str(config.get("controller") or ""))
              .replace("{hold_s}", f"{hold:g}").replace("{period_us}", str(int(PROBE_PERIOD_S * 1e6))).replace("{hold_ms}", str(int(hold * 1000)))
              .replace("{drain_s}", str(int(DRAIN_S))).replace("{mark}", MARK))
    # "marked": the guest got past the timeouts (a driver without one prints none of them)
    prepare = f"{TIMEOUT_SCRIPT.replace('{disk}', '$DEV')}\necho '<5>{MARK}' > /dev/kmsg && echo marked=yes"
    # fio's run time only caps it: the guest stops it once the hold is released
    runtime = FLOWING_WAIT_S + hold + drain_bound_s(hold, hold)
    job = fio(JOB, {"rw": "randrw", "bs": 4096, "iodepth": STALL_DEPTH, "numjobs": 1, "ioengine": "libaio",
                    "direct": 1, "time_based": True, "runtime": f"{runtime:g}s", "group_reporting": True,
                    "size": REGION_BYTES, "randseed": 1}, prepare=prepare)
    return [Job(job.name, job.args, prepare=job.prepare, during=during)]


@dataclass
class _Hold:
    """One hold of one boot's disk: the host's side, kept between the guest's calls. The timer thread
    releases it; ``lock`` keeps the monitor to one caller at a time."""

    ref: str
    qdev: str
    hold_s: float
    events: tuple[str, ...]
    lock: threading.Lock = field(default_factory=threading.Lock)
    released: threading.Event = field(default_factory=threading.Event)
    t0_ns: int = 0
    held_from: HostBlockCounters | None = None
    at_release: HostBlockCounters | None = None
    sent_ns: int = 0
    error: str = ""


#: The hold of each boot, by its monitor (the actions get the monitor and the guest's words only).
_HOLDS: weakref.WeakKeyDictionary[Qmp, _Hold] = weakref.WeakKeyDictionary()


def _counters(qmp: Qmp, ref: str) -> HostBlockCounters:
    try:
        return parse_qmp_blockstats(qmp.execute("query-blockstats"), ref, time.monotonic_ns())
    except ParseError as e:
        raise QmpError(f"QEMU's counters of {ref} could not be read: {e}") from e


def _ops(c: HostBlockCounters) -> int:
    return c.rd_operations + c.wr_operations


def flowing(qmp: Qmp, args: Sequence[str]) -> str:
    """Until the host completes a request of the disk ``args[0]`` (fio's I/O reaches it): ``flowing``."""
    before = _ops(_counters(qmp, args[0]))
    deadline = time.monotonic() + FLOWING_WAIT_S
    while _ops(_counters(qmp, args[0])) == before:
        if time.monotonic() > deadline:
            raise QmpError(f"no request reached the host within {FLOWING_WAIT_S:g} s of fio's start")
        time.sleep(0.1)
    return "flowing"


def _qdev(qmp: Qmp, ref: str) -> str:
    """The block backend of the device ``ref`` as query-block names it (a virtio-blk proxy's is its
    ``virtio-backend`` child); QmpError where the disk is throttled already (its release would lift that)."""
    path = f"/machine/peripheral/{ref}"
    for entry in qmp.execute("query-block").get("return", []):
        if entry.get("qdev") in (ref, path, f"{path}/virtio-backend"):
            limited = [k for k in NO_LIMITS if entry.get("inserted", {}).get(k)]
            if limited:
                raise QmpError(f"disk {ref} is throttled already ({', '.join(limited)}): the replay holds only "
                               "a disk it set up itself")
            return str(entry["qdev"])
    raise QmpError(f"QEMU's query-block lists no block backend of device {ref}")


def _trace(qmp: Qmp, events: Sequence[str], on: bool) -> None:
    for name in events:
        qmp.execute("trace-event-set-state", {"name": name, "enable": on})


def _release(qmp: Qmp, h: _Hold) -> None:
    """The timer's release: the counters just before it, then every limit 0."""
    try:
        with h.lock:
            h.at_release = _counters(qmp, h.ref)
            h.sent_ns = time.monotonic_ns()
            qmp.execute("block_set_io_throttle", {"id": h.qdev, **NO_LIMITS})
    except (QmpError, OSError) as e:
        h.error = str(e)
    finally:
        h.released.set()


def hold(qmp: Qmp, args: Sequence[str]) -> str:
    """Hold every request of the disk ``args[0]`` (controller ``args[1]``) and release it after the
    hold's length from a timer: ``held``."""
    ref, controller = args[0], args[1] if len(args) > 1 else ""
    h = _Hold(ref, _qdev(qmp, ref), float(args[2]) if len(args) > 2 else 0.0, CONTROLLER_EVENTS.get(controller, ()))
    _HOLDS[qmp] = h
    with h.lock:
        _trace(qmp, h.events, True)
        qmp.execute("block_set_io_throttle", {"id": h.qdev, **HOLD_LIMITS})
        h.t0_ns = time.monotonic_ns()
    timer = threading.Timer(h.hold_s, _release, (qmp, h))
    timer.daemon = True
    timer.start()
    time.sleep(HOLD_SETTLE_S)
    with h.lock:
        if not h.released.is_set():
            h.held_from = _counters(qmp, ref)
    return "held"


def _state(qmp: Qmp) -> str:
    h = _HOLDS.get(qmp)
    if h is None or h.released.is_set():
        return "released"
    if time.monotonic_ns() > h.t0_ns + (h.hold_s + RELEASE_ANSWER_S) * 1e9:
        return "stuck"
    return "held"


def ping(qmp: Qmp, args: Sequence[str]) -> str:
    """A probe's first half: the host asks (its answer is the probe's start); the hold's state."""
    return _state(qmp)


def probe(qmp: Qmp, args: Sequence[str]) -> str:
    """A probe's second half: the guest's requests in flight (``args[0]``) reach the host."""
    return _state(qmp)


def events(qmp: Qmp, args: Sequence[str]) -> str:
    """The recovery events off again; the hold's figures (host monotonic ns) for the judge."""
    h = _HOLDS.pop(qmp, None)
    if h is None:
        raise QmpError("the disk was never held")
    if not h.released.wait(RELEASE_ANSWER_S):
        raise QmpError(f"QEMU's monitor did not answer the release within {RELEASE_ANSWER_S:g} s")
    with h.lock:
        _trace(qmp, h.events, False)
    if h.error or h.held_from is None or h.at_release is None:
        raise QmpError(h.error or "the hold ended before the host read its counters in it")
    return (f"t0_ns={h.t0_ns} sent_ns={h.sent_ns} held_from_ops={_ops(h.held_from)} "
            f"release_ops={_ops(h.at_release)} events={','.join(h.events) or '-'}")


ACTIONS: Mapping[str, HostAction] = {"flowing": flowing, "hold": hold, "ping": ping, "probe": probe, "events": events}


def _calls(r: Replayed, name: str) -> list[HostCall]:
    return [c for c in r.host_calls if c.name == name]


def _answered(r: Replayed, name: str) -> HostCall:
    """The host's one call ``name``; CannotTest where the guest never asked or the host failed it."""
    calls = _calls(r, name)
    if not calls:
        raise CannotTest(f"the guest never asked the host to {name} (its console said: "
                         f"{part(output(r, JOB), 'during', JOB).strip()[-300:]})")
    if calls[-1].error:
        raise CannotTest(f"the host's {name} failed: {calls[-1].error}")
    return calls[-1]


@dataclass(frozen=True)
class _Probe:
    sent_ns: int  # the host answered the guest's ping
    answered_ns: int | None  # the guest's probe reached the host
    inflight: int


def probes(calls: Sequence[HostCall]) -> list[_Probe]:
    """Each ping the host answered ``held``, with the probe that followed it (if it came)."""
    out: list[_Probe] = []
    for i, c in enumerate(calls):
        if c.name != "ping" or c.answer != "held":
            continue
        nxt = calls[i + 1] if i + 1 < len(calls) and calls[i + 1].name == "probe" else None
        out.append(_Probe(c.end_ns, nxt.begin_ns if nxt else None, int(nxt.args[0]) if nxt and nxt.args else 0))
    return out


def stall_run(r: Replayed) -> StallRun:
    """The rule's figures from one replayed hold; CannotTest where the hold did not happen as the run's."""
    out = output(r, JOB)
    said = part(out, "during", JOB).splitlines()
    _answered(r, "flowing")
    _answered(r, "hold")
    figures = dict(w.split("=", 1) for w in _answered(r, "events").answer.split() if "=" in w)
    if "drained=no" in said:
        raise CannotTest(f"the guest hung in the stall: fio's requests had not completed within the drain bound "
                         f"after the host released the {hold_s(r.config):g} s hold")
    t0, sent = int(figures["t0_ns"]), int(figures["sent_ns"])
    taken = probes(r.host_calls)
    in_hold = [p for p in taken if p.sent_ns < sent]
    answered = [p for p in in_hold if p.answered_ns is not None and p.answered_ns <= sent]
    rtts = [(p.answered_ns - p.sent_ns) / 1e6 for p in taken if p.answered_ns is not None]
    stopped = "stopped=yes" in said
    status = 0 if stopped and out.exit_status == FIO_STOPPED_EXIT else out.exit_status
    try:
        result, error = fio_outcome(part(out, "fio", JOB), out.parts.get("fioerr", ""), status, f"fio {JOB} on {r.device}")
    except (FioError, ParseError) as e:
        raise CannotTest(f"fio's output could not be read: {e}") from e
    j = result.jobs[0]
    watched = figures.get("events", "-")
    kernel = lines_after_mark("\n".join(line.removeprefix("klog ") for line in said if line.startswith("klog ")),
                              MARK)[0]
    return StallRun(hold_s=(sent - t0) / 1e9, host_completions=int(figures["release_ops"]) - int(figures["held_from_ops"]),
                    guest_inflight_max=max((p.inflight for p in answered), default=0), probes=len(in_hold),
                    probes_answered=len(answered), probe_rtt_max_ms=max(rtts, default=0.0),
                    guest_ios=j.read.io_count + j.write.io_count,
                    guest_max_latency_ms=max(j.read.clat_max_us, j.write.clat_max_us) / 1000, fio_error=error,
                    host_events=tuple(parse_recovery_events(r.trace)),
                    host_events_source=(f"QEMU trace events {watched.replace(',', ', ')}" if watched != "-"
                                        else "no QEMU event known for it"),
                    guest_log=recovery_lines(kernel),
                    readonly=tuple(line.removeprefix("ro ") for line in said if line.startswith("ro ")),
                    probes_over=PROBES_OVER)


def judge(r: Replayed) -> RuleVerdict:
    prepared = part(output(r, JOB), "prepared", JOB)
    if "marked=yes" not in prepared.split():
        raise CannotTest(f"the guest did not mark its kernel log before the stall: it said {prepared.strip()[-300:]!r}")
    try:
        timeout = parse_command_timeout(prepared, r.device, guest_limits(r).driver)
    except ParseError as e:
        raise CannotTest(f"the guest's command timeout could not be read: {e}") from e
    run = stall_run(r)
    problem = hold_problem(run, judged(timeout, run))
    if problem is not None:
        raise CannotTest(f"the hold proved nothing: {problem}")
    return judge_stall_tolerance(timeout, stall_s(r.config), run)


REPLAY = ReplayRule(RULE, jobs, judge, ACTIONS)
