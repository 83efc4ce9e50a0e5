"""The evidence one boot gave, as the rules' replays read it: a job's parts read with the error that
names them, the traced requests of a job's window, the guest's limits (as probed in the run, and as
read in the replay), the host's counters over a counted job (and the host action that reads them); and
the fio jobs the rules run.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Mapping, Sequence
from typing import NoReturn, TypeVar

from model.device_limits import ConfiguredLimits, GuestLimits, parse_guest_limits
from model.errors import ParseError
from model.parse.blockstats import HostBlockCounters, HostCountersDelta, parse_qmp_blockstats
from model.parse.fio_json import FioJob, parse_fio_json
from model.parse.qemutrace import TracedRequest
from replay.guest_script import COUNTERS, Job
from replay.qemu import CannotTest, HostCall
from replay.qmp import Qmp, QmpError
from replay.rules import JobOutput, Replayed

L = TypeVar("L", GuestLimits, ConfiguredLimits)
#: Seconds fio runs before the part of its run the replay judges (its ramp), in a time-based job.
RAMP_S = 1.0
#: fio's run time beyond the ramp and the window of a windowed job: the guest stops fio once the
#: window has closed, so this only bounds a fio the guest could not stop.
FIO_MARGIN_S = 30.0


def part(out: JobOutput, name: str, job: str) -> str:
    """The part ``name`` of ``job``'s output; CannotTest where the guest printed none."""
    text = out.parts.get(name, "")
    if not text.strip():
        raise CannotTest(f"the guest printed no {name} for fio job {job}: the evidence is incomplete")
    return text


def output(r: Replayed, job: str) -> JobOutput:
    if job not in r.outputs:
        raise CannotTest(f"the guest gave no output of fio job {job}: the evidence is incomplete")
    return r.outputs[job]


def fio_job(r: Replayed, job: str) -> FioJob:
    """fio's result of ``job`` (its one job, group-reported)."""
    try:
        return parse_fio_json(part(output(r, job), "fio", job), f"fio {job}").jobs[0]
    except (ParseError, IndexError) as e:
        raise CannotTest(f"fio job {job}: the guest's output could not be read: {e}") from e


def window(requests: list[TracedRequest], out: JobOutput, ramp_s: float = RAMP_S) -> list[TracedRequest]:
    """The traced requests that started in the job's measured window (a job with one), or in its run
    past its first ``ramp_s`` seconds."""
    start_us, end_us = (out.begin_s + ramp_s) * 1e6, out.end_s * 1e6
    if out.open_s is not None and out.close_s is not None:
        start_us, end_us = out.open_s * 1e6, out.close_s * 1e6
    return [r for r in requests if start_us <= r.start_us <= end_us]


def _from_config(config: Mapping[str, object], key: str, kind: type[L]) -> L:
    value = config.get(key)
    if not isinstance(value, dict):
        _missing(key)
    try:
        return kind(**value)
    except TypeError as e:
        raise CannotTest(f"the bundle's {key} could not be read: {e}") from e


def probed_limits(config: Mapping[str, object]) -> GuestLimits:
    """The disk's limits as its driver set them when the run found it (what the device advertised)."""
    return _from_config(config, "probed_limits", GuestLimits)


def configured_limits(config: Mapping[str, object]) -> ConfiguredLimits:
    """What the run asked the hypervisor for, for the disk."""
    return _from_config(config, "configured_limits", ConfiguredLimits)


def guest_limits(r: Replayed) -> GuestLimits:
    """The disk's limits in the replay's guest after the set-up."""
    if not r.limits_text.strip():
        raise CannotTest("the guest printed no limits of the disk: the evidence is incomplete")
    try:
        return parse_guest_limits(r.limits_text)
    except ParseError as e:
        raise CannotTest(f"the guest's limits of the disk could not be read: {e}") from e


def read_counters(qmp: Qmp, args: Sequence[str]) -> str:
    """The host action ``counters <device> [<label>...]``: the device's counters (QMP
    ``query-blockstats``) as JSON (HostBlockCounters' fields), with the host's monotonic clock in ns
    when they were read; the labels (a counted job's ``<job> before``) only name the call."""
    try:
        counters = parse_qmp_blockstats(qmp.execute("query-blockstats"), args[0], time.monotonic_ns())
    except ParseError as e:
        raise QmpError(f"QEMU's counters of {args[0]} could not be read: {e}") from e
    return json.dumps(dataclasses.asdict(counters), separators=(",", ":"))


def counters_of(call: HostCall) -> HostBlockCounters:
    """The counters in a ``counters`` action's answer; CannotTest where it failed or cannot be read."""
    if call.error:
        raise CannotTest(f"the host action {COUNTERS} {' '.join(call.args)} failed: {call.error}")
    try:
        return HostBlockCounters(**json.loads(call.answer))
    except (ValueError, TypeError) as e:
        raise CannotTest(f"the host action {COUNTERS} {' '.join(call.args)} answered {call.answer[:200]!r}") from e


def host_ref(config: Mapping[str, object]) -> str:
    """The disk under test's name in QEMU's monitor; CannotTest for a bundle without it."""
    ref = str(config.get("host_ref") or "")
    if not ref:
        _missing("host_ref")
    return ref


def counted(r: Replayed, job: str, ref: str = "") -> HostCountersDelta:
    """The host's counters of the disk (``ref``: its name in QEMU's monitor; default the disk under
    test's) from before ``job`` started to after it ended: the job's two ``counters`` host actions."""
    ref = ref or host_ref(r.config)
    found = {c.args[2]: c for c in r.host_calls if c.name == COUNTERS and c.args[:2] == (ref, job) and len(c.args) == 3}
    if "before" not in found or "after" not in found:
        raise CannotTest(f"QEMU's counters were not read around fio job {job}: the evidence is incomplete")
    try:
        return HostCountersDelta.between(counters_of(found["before"]), counters_of(found["after"]))
    except ParseError as e:
        raise CannotTest(f"QEMU's counters around fio job {job} could not be read: {e}") from e


def _missing(key: str) -> NoReturn:
    raise CannotTest(f"the bundle's configuration.json has no {key} (a bundle of an older run): the replay "
                     "cannot judge this rule from it")


def fio(name: str, options: Mapping[str, object], counted: str = "", prepare: str = "",
        target: str = "/dev/$DEV") -> Job:
    """A fio job from fio's own option names: ``fio("io1m", {"rw": "randread", "bs": 1 << 20})`` runs
    ``fio --name=io1m --rw=randread --bs=1048576`` (a True option alone: ``{"time_based": True}``);
    ``counted`` (the disk whose counters the host reads around it), ``prepare`` and ``target`` are the Job's."""
    args = [f"--name={name}", *(f"--{k}" if v is True else f"--{k}={v}" for k, v in options.items())]
    return Job(name, tuple(args), counted, prepare, target)


def windowed(name: str, options: Mapping[str, object], window_s: float) -> Job:
    """A time-based fio job whose ``window_s`` the guest measures as the run does (replay/guest_script.py's
    Job.window_s): after the ramp, inside fio's run, then fio is stopped."""
    job = fio(name, {**options, "time_based": True, "runtime": f"{RAMP_S + window_s + FIO_MARGIN_S:g}s"})
    return dataclasses.replace(job, window_s=window_s, ramp_s=RAMP_S)
