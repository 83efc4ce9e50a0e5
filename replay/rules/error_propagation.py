"""error-propagation in the replay: as the run does on its scratch disk, the host makes the rule's range
fail with EIO for reads, then for writes (QEMU's ``blkdebug`` put under the disk's format node with
``blockdev-reopen`` over QMP, the run's libvirt injector's way), while fio in the guest reads (then
writes) the rule's requests over the range and beyond it, going on past errors; then the range heals and
the same requests are written and read back, verified. With ``--inject swallow-errors`` the guest's fio
runs on the run's device-mapper mirror of the disk and a RAM disk (dm-raid1 without ``handle_errors``).

Each run is counted on the host (``query-blockstats``' completed and failed requests before and after
it, through a host action), fio's time is the guest's clock from its start to its end, bounded by the
disk's command timeout (read in the guest as the run reads it; at the bound the host heals the range and
the guest gets the run's recovery time), and the guest's kernel log after a mark set as the run sets it
(once the kernel's rate limit has room for the errors). Judged by ``model.rules.error_propagation``; the
kernel-log check is told the rule's own range, as the run's is.
"""

from __future__ import annotations

import json
import shlex
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from model.error_injection import TIMEOUTS_SCRIPT, ErrorPolicy, Kind, mirror_table, parse_timeouts
from model.errors import ParseError
from model.judging.verdict import RuleVerdict
from model.kernel_log_check import InjectedErrors
from model.parse.blockstats import HostRequestOutcomes, parse_qmp_outcomes
from model.parse.fio_errors import CONTINUE_ON, parse_fio_error_run
from model.parse.fio_json import parse_fio_json
from model.parse.kernel_io_errors import room_then, window_after
from model.rules.error_propagation import (
    DEFAULT_REQUEST_TIMEOUT_S,
    DEPTH,
    RULE,
    SWALLOW,
    WORKLOAD,
    HealRun,
    PhaseRun,
    attempts_for,
    bound_for,
    injected,
    judge_error_propagation,
    kernel_error_sectors,
    not_fired,
)
from replay.guest_script import Job
from replay.qemu import CannotTest, HostAction, HostCall
from replay.qmp import Qmp, QmpError
from replay.rules import Replayed, ReplayRule
from replay.rules.evidence import fio, guest_limits, output, part

KINDS: tuple[Kind, ...] = ("read", "write")
HEALED = "errprop-healed"
#: Where the guest keeps the kernel log's mark (its last line when the run's window opens).
MARK_FILE = "/tmp/vioc-kernel-log.mark"
#: How long a run that outlived its bound may take once the range healed (measure/error_propagation.py's
#: RECOVERY_S in the run: sd's retries and a SCSI abort and reset then meet a host that answers).
RECOVERY_S = 60
#: EIO, the errno every injected failure carries; what reports an error to the guest, by device property.
EIO = 5
REPORTING = {"rerror": ("report", "auto"), "werror": ("report", "auto", "enospc")}
PERIPHERAL = "/machine/peripheral"

#: The guest's side of one run while fio runs: fio's time on the guest's clock up to the bound (then the
#: host heals and fio gets the recovery time), the host's counters after, the range healed, the
#: kernel log after the mark, the mirror taken down.
DURING = r"""read t0 _ </proc/uptime; set -- $(cat /tmp/vioc-bound); B=$1; i=0
while kill -0 $FIO 2>/dev/null && [ $i -lt $((B * 10)) ]; do usleep 100000; i=$((i + 1)); done
read t1 _ </proc/uptime; echo "fio_s $t0 $t1"
if kill -0 $FIO 2>/dev/null; then host heal {ref}; echo "bound=passed"; i=0
  while kill -0 $FIO 2>/dev/null && [ $i -lt {recovery_ds} ]; do usleep 100000; i=$((i + 1)); done
  kill -0 $FIO 2>/dev/null && echo "hung=yes"; fi
host outcomes {ref} {name}-after
host heal {ref}
echo "mark $(cat {mark_file})"; dmesg | sed 's/^/klog /'
{teardown}"""


def _inject(config: Mapping[str, object]) -> list[str]:
    measure = config.get("measure")
    inject = measure.get("inject") if isinstance(measure, dict) else None
    return [str(f) for f in inject] if isinstance(inject, list) else []


def _fio_options(kind: Kind, **more: object) -> dict[str, object]:
    """suites/test_error_propagation.py's job: the workload's requests with a gap after each, at DEPTH,
    going on past errors (guest/tools/fio.py's continue_on_error options)."""
    errnos = ":".join(CONTINUE_ON)
    return {"rw": f"{kind}:{WORKLOAD.stride_bytes - WORKLOAD.request_bytes}", "bs": WORKLOAD.request_bytes,
            "iodepth": DEPTH, "numjobs": 1, "ioengine": "libaio", "direct": 1, "runtime": "60s",
            "group_reporting": True, "size": WORKLOAD.span_bytes, "io_size": WORKLOAD.requests * WORKLOAD.request_bytes,
            "offset": WORKLOAD.offset_bytes, "continue_on_error": "all", "error_dump": 1,
            "ignore_error": f"{errnos},{errnos},{errnos}", **more}


def _bound_line() -> str:
    """The guest's bound in whole seconds, as bound_for takes the timeouts it reads (into /tmp/vioc-bound)."""
    return (f"set -- $({TIMEOUTS_SCRIPT.replace('{disk}', '$DEV')}); B={int(DEFAULT_REQUEST_TIMEOUT_S)}; "
            "[ \"$2\" != - ] && B=$(( ($2 + 999) / 1000 )); [ \"$1\" != - ] && B=${1%.*}; echo $B > /tmp/vioc-bound; "
            f"echo \"timeouts $({TIMEOUTS_SCRIPT.replace('{disk}', '$DEV')} | tr '\\n' ' ')\"")


def jobs(config: Mapping[str, object]) -> list[Job]:
    ref = str(config.get("host_ref") or "")
    options = config.get("format_options")
    if not ref or not isinstance(options, dict):
        raise CannotTest("the bundle's configuration.json has no host_ref or format_options (a bundle of an older "
                         "run): the replay cannot inject errors under the disk")
    swallow = "swallow-errors" in _inject(config)
    table, ram_kib = mirror_table("$DEV", WORKLOAD.end_bytes)
    out = []
    for kind in KINDS:
        r = injected(kind)
        name = f"errprop-{kind}"
        create = (f"modprobe dm_mirror; modprobe brd rd_nr=1 rd_size={ram_kib}; "
                  f"DM_DISABLE_UDEV=1 dmsetup --noudevsync create {SWALLOW} --table \"{table}\" && echo mirror=made")
        prepare = "\n".join([
            _bound_line(), *([create] if swallow else []),
            f"host inject {ref} {kind} {r.first_sector} {r.sectors} {shlex.quote(json.dumps(options, separators=(',', ':')))}",
            "echo \"inject=$ANSWER\"", f"host outcomes {ref} {name}-before",
            room_then(f"dmesg | tail -n 1 > {MARK_FILE}", len(WORKLOAD.touching(r)))])
        teardown = (f"DM_DISABLE_UDEV=1 dmsetup --noudevsync remove {SWALLOW} 2>/dev/null; rmmod brd 2>/dev/null"
                    if swallow else ":")
        during = (DURING.replace("{ref}", ref).replace("{name}", name).replace("{mark_file}", MARK_FILE)
                  .replace("{recovery_ds}", str(RECOVERY_S * 10)).replace("{teardown}", teardown))
        job = fio(name, _fio_options(kind), prepare=prepare,
                  target=f"/dev/mapper/{SWALLOW}" if swallow else "/dev/$DEV")
        out.append(Job(job.name, job.args, prepare=job.prepare, target=job.target, during=during))
    healed = fio(HEALED, _fio_options("write", verify="crc32c"), prepare=f"host outcomes {ref} {HEALED}-before")
    after = f"while kill -0 $FIO 2>/dev/null; do usleep 100000; done\nhost outcomes {ref} {HEALED}-after"
    return [*out, Job(healed.name, healed.args, prepare=healed.prepare, during=after)]


@dataclass(frozen=True)
class _Chain:
    """The disk's format node, the file node under it, and the format node's reopen options."""

    format_node: str
    file_node: str
    options: dict[str, Any]


#: The blkdebug node in place under each boot's disk, by its monitor, and the disk's chain.
_INJECTED: weakref.WeakKeyDictionary[Qmp, tuple[_Chain, str]] = weakref.WeakKeyDictionary()


def _chain(qmp: Qmp, ref: str, options: dict[str, Any]) -> _Chain:
    """As the run's injector finds it (hypervisors/libvirt/error_propagation.py): the device's root node
    and its ``file`` child, from QEMU's block graph; QmpError where it is no raw node over a file."""
    graph = qmp.execute("x-debug-query-block-graph")["return"]
    names = {n["id"]: n["name"] for n in graph["nodes"]}
    edges = [(names[e["parent"]], e["name"], names[e["child"]]) for e in graph["edges"]]
    backends = (ref, f"{PERIPHERAL}/{ref}/virtio-backend")
    top = next((c for p, role, c in edges if p in backends and role == "root"), None)
    below = next((c for p, role, c in edges if p == top and role == "file"), None)
    drivers = {n["node-name"]: n.get("drv") for n in qmp.execute("query-named-block-nodes", {"flat": True})["return"]}
    if top is None or below is None or drivers.get(top) != "raw":
        raise QmpError(f"device {ref} has no raw node over a file node (root {top}, file {below}): errors are "
                       "injected between a disk's raw node and its file")
    return _Chain(top, below, {**options, "node-name": top})


def _policy(qmp: Qmp, ref: str) -> str:
    """The device's rerror and werror (``rerror=ignore werror=report``) where one keeps errors from the
    guest, "" where each reports them (the run's injector's check)."""
    found = {}
    for prop in REPORTING:
        try:
            found[prop] = str(qmp.execute("qom-get", {"path": f"{PERIPHERAL}/{ref}", "property": prop})["return"])
        except QmpError:
            continue
    withheld = [p for p, v in found.items() if v not in REPORTING[p]]
    return " ".join(f"{p}={v}" for p, v in found.items()) if withheld else ""


def inject(qmp: Qmp, args: Sequence[str]) -> str:
    """``inject <ref> <kind> <first sector> <sectors> <format options JSON>``: from now on every request
    of ``kind`` that covers a sector of the range fails with EIO: ``injected``; ``policy <prop=value>...``
    where the device keeps errors from the guest (nothing is injected then)."""
    ref, kind, first, sectors = args[0], args[1], int(args[2]), int(args[3])
    heal(qmp, args[:1])
    withheld = _policy(qmp, ref)
    if withheld:
        return f"policy {withheld}"
    chain = _chain(qmp, ref, json.loads(args[4]))
    node = f"vioc-errinj-{ref}-{kind}"
    rules = [{"event": "none", "iotype": kind, "errno": EIO, "sector": s} for s in range(first, first + sectors)]
    qmp.execute("blockdev-add", {"driver": "blkdebug", "node-name": node, "image": chain.file_node,
                                 "inject-error": rules})
    _INJECTED[qmp] = (chain, node)
    qmp.execute("blockdev-reopen", {"options": [{**chain.options, "file": node}]})
    return "injected"


def heal(qmp: Qmp, args: Sequence[str]) -> str:
    """``heal <ref>``: the format node back on its own file node, the blkdebug node gone: ``healed``."""
    placed = _INJECTED.pop(qmp, None)
    if placed is not None:
        chain, node = placed
        qmp.execute("blockdev-reopen", {"options": [{**chain.options, "file": chain.file_node}]})
        qmp.execute("blockdev-del", {"node-name": node})
    return "healed"


def outcomes(qmp: Qmp, args: Sequence[str]) -> str:
    """``outcomes <ref> <label>``: the disk's completed and failed requests now, ``reads=N writes=N
    failed_reads=N failed_writes=N`` (one short line: the guest's console reads it)."""
    try:
        o = parse_qmp_outcomes(qmp.execute("query-blockstats"), args[0])
    except ParseError as e:
        raise QmpError(f"QEMU's counters of {args[0]} could not be read: {e}") from e
    return f"reads={o.reads} writes={o.writes} failed_reads={o.failed_reads} failed_writes={o.failed_writes}"


ACTIONS: Mapping[str, HostAction] = {"inject": inject, "heal": heal, "outcomes": outcomes}


def _call(r: Replayed, name: str, *args: str) -> HostCall:
    """The host's call ``name`` whose words begin with ``args``; CannotTest where there is none or it failed."""
    call = next((c for c in r.host_calls if c.name == name and c.args[:len(args)] == args), None)
    if call is None:
        raise CannotTest(f"the guest never asked the host for {name} {' '.join(args)}: the evidence is incomplete")
    if call.error:
        raise CannotTest(f"the host's {name} {' '.join(args)} failed: {call.error}")
    return call


def _outcomes(r: Replayed, label: str) -> HostRequestOutcomes:
    ref = str(r.config.get("host_ref"))
    said = dict(w.split("=", 1) for w in _call(r, "outcomes", ref, label).answer.split() if "=" in w)
    try:
        return HostRequestOutcomes(**{k: int(v) for k, v in said.items()})
    except (TypeError, ValueError) as e:
        raise CannotTest(f"the host's counters at {label} could not be read: {e}") from e


def _policy_found(r: Replayed) -> ErrorPolicy | None:
    """The device's error policy where the host found it keeps errors from the guest (nothing injected)."""
    for call in r.host_calls:
        if call.name == "inject" and call.answer.startswith("policy "):
            found = dict(w.split("=", 1) for w in call.answer.split()[1:])
            withheld = tuple(p for p, v in found.items() if v not in REPORTING.get(p, ()))
            ref = str(r.config.get("host_ref"))
            return ErrorPolicy(ref, {"rerror": "report", "werror": "report"}, found, withheld,
                               f"QMP qom-get {PERIPHERAL}/{ref}")
    return None


def _phase(r: Replayed, kind: Kind) -> PhaseRun:
    """One injected run as the run's PhaseRun: fio's errors, the host's counts, the kernel's lines, fio's time."""
    name = f"errprop-{kind}"
    out = output(r, name)
    if _call(r, "inject", str(r.config.get("host_ref")), kind).answer != "injected":
        raise CannotTest(f"the host did not inject the {kind} range: the evidence is incomplete")
    said = part(out, "during", name).splitlines()
    if "hung=yes" in said:
        raise CannotTest(f"fio {name} did not end within {RECOVERY_S} s after the injected range healed: the guest "
                         "hangs on the failed requests (the run's GuestHung, an ERROR)")
    times = next((line.split()[1:] for line in said if line.startswith("fio_s ")), None)
    mark = next((line.removeprefix("mark ").strip() for line in said if line.startswith("mark ")), None)
    if times is None or len(times) != 2 or mark is None:
        raise CannotTest(f"the guest did not say fio {name}'s time and the kernel log's mark: the evidence is incomplete")
    source = f"fio {name} on {r.device}"
    try:
        fio_run = (None if "bound=passed" in said else
                   parse_fio_error_run(part(out, "fio", name), out.parts.get("fioerr", ""), kind, source))
        host = _outcomes(r, f"{name}-after").since(_outcomes(r, f"{name}-before"))
    except ParseError as e:
        raise CannotTest(f"{name}: {e}") from e
    klog = "\n".join(line.removeprefix("klog ") for line in said if line.startswith("klog "))
    target = f"/dev/mapper/{SWALLOW}" if "swallow-errors" in _inject(r.config) else f"/dev/{r.device}"
    return PhaseRun(injected(kind), r.device, target, fio_run, host, window_after(klog, mark),
                    float(times[1]) - float(times[0]))


def _healed(r: Replayed) -> HealRun:
    out = output(r, HEALED)
    text = part(out, "fio", HEALED)
    try:
        fio_run = parse_fio_error_run(text, out.parts.get("fioerr", ""), "write", f"fio {HEALED} on {r.device}")
        job = parse_fio_json(text, f"fio {HEALED}").jobs[0]
        host = _outcomes(r, f"{HEALED}-after").since(_outcomes(r, f"{HEALED}-before"))
    except ParseError as e:
        raise CannotTest(f"{HEALED}: {e}") from e
    return HealRun(fio_run.errors, host.failed_reads + host.failed_writes, job.write.io_count + job.read.io_count)


def judge(r: Replayed) -> RuleVerdict:
    prepared = part(output(r, "errprop-read"), "prepared", "errprop-read").splitlines()
    timeouts_line = next((line for line in prepared if line.startswith("timeouts ")), None)
    if timeouts_line is None:
        raise CannotTest("the guest did not print the disk's command timeouts: the evidence is incomplete")
    try:
        timeouts = parse_timeouts(timeouts_line.removeprefix("timeouts "))
    except ValueError as e:
        raise CannotTest(f"the disk's command timeouts could not be read: {e}") from e
    bound = bound_for(timeouts.scsi_timeout_s, timeouts.io_timeout_ms)
    attempts = attempts_for(guest_limits(r).driver, timeouts.nvme_max_retries)
    policy = _policy_found(r)
    if policy is not None:
        return judge_error_propagation(WORKLOAD, [], None, attempts, bound, policy=policy)
    if "swallow-errors" in _inject(r.config) and "mirror=made" not in prepared:
        raise CannotTest(f"the guest did not make the swallow-errors mirror: it said {' | '.join(prepared)[-300:]}")
    phases: list[PhaseRun] = []
    for kind in KINDS:
        phase = _phase(r, kind)
        phases.append(phase)
        why = not_fired(phase)
        if why is not None:
            raise CannotTest(f"the injected errors never fired: {why}")
        if phase.fio is None:
            return judge_error_propagation(WORKLOAD, phases, None, attempts, bound)
    return judge_error_propagation(WORKLOAD, phases, _healed(r), attempts, bound)


def kernel_errors(r: Replayed) -> list[InjectedErrors]:
    """The rule's own errors for the kernel-log check: the requests that touch the range, on the replay's disk."""
    return [InjectedErrors(r.device, lo, hi - lo + 1)
            for lo, hi in sorted({kernel_error_sectors(WORKLOAD, kind) for kind in KINDS})]


REPLAY = ReplayRule(RULE, jobs, judge, ACTIONS, kernel_errors)
