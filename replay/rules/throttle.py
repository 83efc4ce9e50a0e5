"""throttle in the replay: the run's three phases on the disk under test, each one job of 4 KiB random
reads at depth 32: ``throttled`` (the limit on: the run's ``--disk iops=``/``bps=``, which QEMU's
command line holds from the start, else the rule's own 200 IO/s, set with the throttle-burst fault's
burst where the run injected it), ``lifted`` (every limit 0), ``again`` (the limit on again, as asked).
Before each the guest asks the host to set the phase's limits (host action ``throttle``: QMP
``block_set_io_throttle`` on the disk's block backend) and the host reads back what it holds
(``query-block``). Past fio's first second the window opens: the host's counters (host action
``counters``: ``query-blockstats``) then the guest's ``/proc/diskstats`` and uptime, the run's window
later the same again, then fio is stopped (SIGINT) as the run stops it. Judged by
``model.rules.throttle`` with the run's limit and who set it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence

from model.errors import ParseError
from model.host_cache import block_entry
from model.judging.verdict import RuleVerdict
from model.parse.blockstats import HostCountersDelta
from model.parse.fio_json import FIO_STOPPED_EXIT
from model.parse.proc_diskstats import DiskStatsDelta, diskstats_for
from model.parse.throttle_limits import NO_LIMITS, ThrottleLimits, parse_throttle, qmp_arguments
from model.rules.throttle import (
    BS_BYTES,
    DEPTH,
    FAULT,
    PHASES,
    RULE,
    RULE_IOPS,
    ThrottlePhase,
    judge_throttle,
    with_burst,
)
from replay.guest_script import COUNTERS, Job
from replay.qemu import CannotTest, HostCall
from replay.qmp import Qmp, QmpError
from replay.rules import Replayed, ReplayRule
from replay.rules.evidence import RAMP_S, counters_of, fio, fio_job, output

#: The host action that sets a phase's limits (or keeps what the disk holds) and reads them back; the
#: disk's counters are the replay's own action (replay/rules/evidence.py's read_counters).
THROTTLE, KEEP = "throttle", "keep"
#: What the host's limits are said to be read from where the bundle does not name the run's domain.
DEFAULT_QEMU = "the replay's QEMU"
#: Seconds fio may run past the window before the guest stops it (the run's FIO_RUNTIME_MARGIN_S).
FIO_MARGIN_S = 30.0


def _ref(config: Mapping[str, object]) -> str:
    ref = str(config.get("host_ref") or "")
    if not ref:
        raise CannotTest("the bundle's configuration.json has no host_ref (a bundle of an older run): the replay "
                         "cannot set the disk's limits")
    return ref


def limits(config: Mapping[str, object]) -> tuple[ThrottleLimits, str, ThrottleLimits | None]:
    """As the run decides them (suites/test_throttle.py): the limit asked for, who set it, and what the
    first phase sets (None: the disk's own limits, set by ``--disk`` when QEMU started, are kept)."""
    run = config.get("configuration")
    pairs = run.get("disk_settings") if isinstance(run, dict) else None
    settings = [p for p in pairs if isinstance(p, list) and len(p) == 2] if isinstance(pairs, list) else []
    asked = dict(settings)
    measure = config.get("measure")
    inject = measure.get("inject") if isinstance(measure, dict) else None
    first: ThrottleLimits | None
    if asked.get("iops") or asked.get("bps"):
        limit = ThrottleLimits(iops=int(asked.get("iops") or 0), bps=int(asked.get("bps") or 0))
        set_by, first = "--disk " + ",".join(f"{k}={v}" for k, v in settings), None
    else:
        limit, set_by = ThrottleLimits(iops=RULE_IOPS), "the rule"
        first = limit
    if isinstance(inject, list) and FAULT in inject:
        first = with_burst(limit)
    return limit, set_by, first


def _words(set_to: ThrottleLimits | None) -> str:
    return KEEP if set_to is None else " ".join(f"{k}={v}" for k, v in qmp_arguments(set_to).items())


def jobs(config: Mapping[str, object]) -> list[Job]:
    ref = _ref(config)
    limit, _, first = limits(config)
    measure = config.get("measure")
    span = float(str(measure.get("window_s") or 2.0)) if isinstance(measure, dict) else 2.0
    during = "\n".join([
        f"usleep {int(RAMP_S * 1e6)}",
        *(line for k in (0, 1) for line in (
            *([f"usleep {int(span * 1e6)}"] if k else []),
            f"host {COUNTERS} {ref}; echo \"host{k} $ANSWER\"",
            f"echo \"guest{k} $(grep \" $DEV \" /proc/diskstats)\"; echo \"uptime{k} $(cut -d' ' -f1 /proc/uptime)\"")),
        "kill -INT $FIO && echo stopped by-the-guest"])
    out = []
    for name, set_to in zip(PHASES, (first, ThrottleLimits(), limit), strict=True):
        out.append(fio(name, {"rw": "randread", "bs": BS_BYTES, "iodepth": DEPTH, "numjobs": 1, "ioengine": "libaio",
                              "direct": 1, "time_based": True, "runtime": f"{RAMP_S + span + FIO_MARGIN_S:g}s",
                              "group_reporting": True},
                       prepare=f"host {THROTTLE} {ref} {_words(set_to)}; echo \"held $ANSWER\""))
        out[-1] = dataclasses.replace(out[-1], during=during)
    return out


def set_throttle(qmp: Qmp, args: Sequence[str]) -> str:
    """``<device> keep|<limit>=<n>...``: the device's block backend given those limits (the others 0;
    ``keep``: left as they are), then what it holds as JSON (ThrottleLimits' fields)."""
    device, *words = args
    entry = block_entry(qmp.execute("query-block").get("return", []), device)
    if entry is None:
        raise QmpError(f"QEMU's query-block lists no block backend of {device}")
    if words != [KEEP]:
        given = {k: int(v) for k, _, v in (w.partition("=") for w in words)}
        qmp.execute("block_set_io_throttle", {"id": entry["qdev"], **NO_LIMITS, **given})
        entry = block_entry(qmp.execute("query-block").get("return", []), device) or {}
    held = parse_throttle(entry.get("inserted", {}), f"QMP query-block, device {device}")
    return json.dumps(dataclasses.asdict(held), separators=(",", ":"))


def _answers(r: Replayed, name: str) -> list[HostCall]:
    calls = [c for c in r.host_calls if c.name == name]
    failed = next((c for c in calls if c.error), None)
    if failed is not None:
        raise CannotTest(f"the host action {name} {' '.join(failed.args)} failed: {failed.error}")
    return calls


def held_said_by(config: Mapping[str, object], ref: str) -> str:
    """Where the host's limits were read, in the run's words: the QEMU of its libvirt domain, which the
    replay's QEMU is (the domain's command line), named as the run names it; "the replay's QEMU" for a
    bundle without the domain's name (an older run's: its verdict is the same, only the name differs)."""
    return f"QMP query-block of {config.get('domain') or DEFAULT_QEMU}, device {ref}"


def phase(r: Replayed, name: str, asked: ThrottleLimits, held: HostCall, counters: Sequence[HostCall]) -> ThrottlePhase:
    """One phase's figures from its job's output and the host's answers around it."""
    ref = _ref(r.config)
    try:
        held_limits = ThrottleLimits(**json.loads(held.answer))
    except (ValueError, TypeError) as e:
        raise CannotTest(f"{name}: the host's limits could not be read: {held.answer!r}") from e
    said_by = held_said_by(r.config, ref)
    out = output(r, name)
    said = dict(line.split(" ", 1) for line in out.parts.get("during", "").splitlines() if " " in line)
    # fio's 128 after the guest's own stop is a normal end, as in the run
    ended = 0 if out.exit_status == FIO_STOPPED_EXIT and "stopped" in said else out.exit_status
    if ended or (out.parts.get("fio", "").strip() and fio_job(r, name).error):
        fio_err = out.parts.get("fioerr", "").strip()
        return ThrottlePhase(name, asked, held_limits, said_by, fio_error=fio_err or f"fio exit {out.exit_status}")
    if len(counters) != 2 or any(f"{k}{i}" not in said for k in ("guest", "uptime") for i in (0, 1)):
        raise CannotTest(f"{name}: the window was not read on both sides (the guest said {sorted(said)}): "
                         "the evidence is incomplete")
    try:
        host = HostCountersDelta.between(*(counters_of(c) for c in counters))
        ms = (float(said["uptime1"]) - float(said["uptime0"])) * 1000
        guest = DiskStatsDelta.between(diskstats_for(said["guest0"], r.device), diskstats_for(said["guest1"], r.device), ms)
    except (ValueError, TypeError, ParseError) as e:
        raise CannotTest(f"{name}: the window's figures could not be read: {e}") from e
    return ThrottlePhase(name, asked, held_limits, said_by, guest_s=ms / 1000, host_s=host.elapsed_ns / 1e9,
                         guest_ios=guest.reads_completed + guest.writes_completed,
                         guest_bytes=(guest.sectors_read + guest.sectors_written) * 512,
                         host_ios=host.reads + host.writes, host_bytes=host.rd_bytes + host.wr_bytes,
                         guest_aqu_sz=guest.avg_queue_size, clat_mean_ms=fio_job(r, name).read.clat_mean_us / 1000,
                         offered_depth=DEPTH)


def judge(r: Replayed) -> RuleVerdict:
    limit, set_by, _ = limits(r.config)
    helds, counters = _answers(r, THROTTLE), _answers(r, COUNTERS)
    if len(helds) != len(PHASES):
        raise CannotTest(f"the host set the disk's limits {len(helds)} times, not once per phase: the evidence is "
                         "incomplete")
    phases = []
    for k, (name, held) in enumerate(zip(PHASES, helds, strict=True)):
        window = [c for c in counters
                  if held.end_ns < c.begin_ns and (k + 1 == len(helds) or c.end_ns < helds[k + 1].begin_ns)]
        phases.append(phase(r, name, ThrottleLimits() if name == "lifted" else limit, held, window))
    return judge_throttle(phases, limit, set_by)


REPLAY = ReplayRule(RULE, jobs, judge, {THROTTLE: set_throttle})
