"""write-cache in the replay: as the run does on each disk of the rule test (the disk under test and
the scratch disk, found by serial, the run's set-up applied to both), 50 buffered 4 KiB writes each
followed by an fsync, counted whole on both sides: fio's fsyncs, the guest's flushes (``/proc/diskstats``'
flush field before and after), the host's (QEMU's ``query-blockstats`` read before and after the run
over QMP, or its trace where that counts more). Then the guest's ``queue/write_cache`` and ``queue/fua``
of each disk (the sysfs tool's script; what the driver set is the replay's own reading before the
set-up) and the host's cache of each disk's block backend (host action ``cache``: QMP ``query-block``'s
``inserted.cache``). Judged by ``model.rules.write_cache`` with the cache mode the run asked for.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence

from model.device_limits import GuestLimits, parse_guest_limits
from model.errors import ParseError
from model.host_cache import HostCache, host_cache_of
from model.judging.verdict import RuleVerdict
from model.parse.proc_diskstats import diskstats_for
from model.rules.write_cache import REGION_BYTES, RULE, WRITES, DiskCache, Flushes, GuestCache, judge_write_cache
from replay.guest_script import Job
from replay.qemu import CannotTest
from replay.qmp import Qmp
from replay.rules import Replayed, ReplayRule
from replay.rules.evidence import counted, fio, fio_job, output, part, window

#: The last job: no fio; each disk's limits read, and the host's cache of each disk asked for.
CACHE = "cache"
#: What QEMU's monitor says of a disk's cache in the ``cache`` action's answer.
_FLAGS = ("writeback", "direct", "no_flush")


def disks(config: Mapping[str, object]) -> list[tuple[str, str, str]]:
    """Each disk of the rule test: its role, serial and name in QEMU's monitor (``host_ref``)."""
    entries = config.get("disks")
    if not isinstance(entries, list) or not entries:
        raise CannotTest("the bundle's configuration.json has no disks (a bundle of an older run): the replay "
                         "cannot judge write-cache from it")
    out = []
    for d in entries:
        if not isinstance(d, dict) or not d.get("host_ref"):
            raise CannotTest(f"the bundle's configuration.json names a disk without its host_ref (a bundle of an "
                             f"older run): the replay cannot read its counters or cache: {d}")
        out.append((str(d.get("role")), str(d.get("serial")), str(d["host_ref"])))
    return out


def asked_cache(config: Mapping[str, object]) -> str | None:
    """The cache mode the run asked for (``--disk cache=``, a profile); None: the suite's own set-up."""
    run = config.get("configuration")
    pairs = run.get("disk_settings") if isinstance(run, dict) else None
    asked = dict(p for p in pairs if isinstance(p, list) and len(p) == 2) if isinstance(pairs, list) else {}
    return str(asked["cache"]) if "cache" in asked else None


def jobs(config: Mapping[str, object]) -> list[Job]:
    """One counted fsync run per disk (the first applies the run's set-up to the other disks), then
    the ``cache`` job: every disk's limits, and the host's cache of every disk."""
    found = disks(config)
    disk = config.get("disk")
    main = str(disk.get("serial")) if isinstance(disk, dict) else ""
    setup = "".join(f"DEV=$(wait_disk {shlex.quote(s)}); [ -n \"$DEV\" ] && apply_setup\n"
                    for _, s, _ in found if s != main)
    out = []
    for k, (role, serial, ref) in enumerate(found):
        q = shlex.quote(serial)
        out.append(fio(f"fsync-{role}", {
            "rw": "randwrite", "bs": 4096, "iodepth": 1, "numjobs": 1, "ioengine": "psync", "direct": 0,
            "runtime": "120s", "group_reporting": True, "size": REGION_BYTES, "io_size": 4096 * WRITES, "fsync": 1,
            "randseed": 1}, counted=ref, prepare=(setup if k == 0 else "") + f"echo disk=$(wait_disk {q})",
            target=f"/dev/$(wait_disk {q})"))
    script = str(config.get("limits_script") or "")
    if not script:
        raise CannotTest("the bundle has no script of the disk's limits (a bundle of an older run)")
    read = "".join(f"P=$(wait_disk {shlex.quote(s)})\n( {script.replace('{disk}', '$P')}\n) 2>/dev/null | "
                   f"sed 's/^/limits {s} /'\n" for _, s, _ in found)
    refs = " ".join(shlex.quote(ref) for _, _, ref in found)
    return [*out, Job(CACHE, (), prepare=f"{read}host {CACHE} {refs}; echo \"host $ANSWER\"")]


def host_cache_action(qmp: Qmp, args: Sequence[str]) -> str:
    """The host's cache of each device of ``args`` (QEMU ids): ``<QEMU version> <id>=<writeback>,<direct>,
    <no-flush>`` (0 or 1 each; ``none`` where QEMU lists no such device)."""
    v = qmp.execute("query-version").get("return", {}).get("qemu", {})
    blocks = qmp.execute("query-block").get("return", [])
    words = [f"{v.get('major', '?')}.{v.get('minor', '?')}.{v.get('micro', '?')}"]
    for dev in args:
        c = host_cache_of(blocks, dev, "QMP query-block")
        words.append(f"{dev}=" + ("none" if c is None else ",".join(str(int(getattr(c, f))) for f in _FLAGS)))
    return " ".join(words)


def host_caches(r: Replayed) -> dict[str, HostCache]:
    """Each device's cache from the ``cache`` action's answer; CannotTest where the host did not answer."""
    call = next((c for c in reversed(r.host_calls) if c.name == CACHE), None)
    if call is None or call.error:
        raise CannotTest(f"the host's cache of the disks was not read: {call.error if call else 'the guest never asked'}")
    version, *pairs = call.answer.split()
    out = {}
    for pair in pairs:
        dev, _, flags = pair.partition("=")
        bits = flags.split(",")
        if len(bits) == len(_FLAGS) and all(b in ("0", "1") for b in bits):
            writeback, direct, no_flush = (b == "1" for b in bits)
            out[dev] = HostCache(writeback, direct, no_flush, f"inserted.cache of {dev}, QEMU {version}, QMP query-block")
    return out


def _limits(text: str, what: str) -> GuestLimits:
    if not text.strip():
        raise CannotTest(f"the guest printed no {what}: the evidence is incomplete")
    try:
        return parse_guest_limits(text)
    except ParseError as e:
        raise CannotTest(f"the guest's {what} could not be read: {e}") from e


def _flushes(r: Replayed, job: str, device: str, ref: str) -> Flushes:
    out = output(r, job)
    try:
        d0, d1 = (diskstats_for(part(out, p, job), device) for p in ("diskstats0", "diskstats1"))
    except ParseError as e:
        raise CannotTest(f"fio job {job}: the guest's /proc/diskstats could not be read: {e}") from e
    guest = None if d0.flushes_completed is None or d1.flushes_completed is None else \
        d1.flushes_completed - d0.flushes_completed
    traced = sum(t.is_flush for t in window(r.requests, out, ramp_s=0))
    return Flushes(fio_job(r, job).sync.io_count, guest, max(counted(r, job, ref).flushes, traced))


def judge(r: Replayed) -> RuleVerdict:
    said = part(output(r, CACHE), "prepared", CACHE).splitlines()
    hosts = host_caches(r)
    found = []
    for role, serial, ref in disks(r.config):
        job = f"fsync-{role}"
        device = dict(line.split("=", 1) for line in part(output(r, job), "prepared", job).splitlines()
                      if "=" in line).get("disk", "")
        if not device:
            raise CannotTest(f"the guest found no disk with serial {serial}")
        if ref not in hosts:
            raise CannotTest(f"QEMU's query-block lists no block backend of {ref}: its cache cannot be read")
        now = _limits("\n".join(line.split(" ", 2)[2] for line in said if line.startswith(f"limits {serial} ")),
                      f"limits of disk {serial}")
        probed = _limits(r.probed.get(serial, ""), f"limits of disk {serial} before the set-up")
        found.append(DiskCache(role, GuestCache(device, probed.write_cache, now.write_cache, now.fua), hosts[ref],
                               _flushes(r, job, device, ref), asked_cache(r.config)))
    return judge_write_cache(found)


REPLAY = ReplayRule(RULE, jobs, judge, {CACHE: host_cache_action})
