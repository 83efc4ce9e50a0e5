"""write-cache: the cache the guest believes each disk has is what the host really does with its writes.

The guest's belief: ``/sys/block/<d>/queue/write_cache`` ("write back": the guest flushes; "write
through": it never does), its ``queue/fua``, and the flushes its block layer sent while fio wrote with
an fsync after each write (``/proc/diskstats``' flush field, 15, since Linux 5.5). The host's truth:
its block backend's cache as the host says it when the workload has run (QEMU's ``query-block``:
``writeback``, ``direct``, ``no-flush``; model/host_cache.py), and the flushes it saw
(``query-blockstats``' ``flush_operations``, or QEMU's trace where that counts more).

It fails where data is acknowledged but not durable:

- the guest believes "write through" over a host write-back cache: it sends no flush, and every
  write it was told is on the disk sits in the host's volatile cache (the Firecracker case:
  firecracker issue 2172);
- the host has a write-back cache, the guest believes it, and its fsyncs sent fewer flushes than
  there were fsyncs (the guest's kernel dropped them), or the host saw fewer than the guest sent
  (lost between the guest's block layer and the host's);
- the host drops the guest's flushes (``cache.no-flush``) where nobody asked for ``cache=unsafe``.

``cache=unsafe`` asked for (``--disk cache=unsafe``) is the host's own choice, made by whoever set
the host up: a note, not a failure (nothing the guest does makes its writes durable there). A
guest that believes "write back" over a host without a volatile cache sends flushes it does not
need: a note (it costs time, it loses nothing).

Blame: the settings trail of ``write_cache`` (model/blame.py: a "write through" written after boot
is the guest's configuration), else the rule's own evidence (``hint``).

Example::

    v = judge_write_cache([DiskCache("dut", GuestCache("sdb", "write back", "write through", 0),
                                     HostCache(True, True, False), Flushes(49, 0, 0))])
    v.problems  # ('dut disk sdb: the guest believes write through over a host write-back cache ...',)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from model.blame import Blame, BlameSettings, Layer
from model.host_cache import HostCache
from model.judging.spec import PARAM, Metrics, MetricSpec
from model.judging.verdict import Number, RuleVerdict
from model.rules.limits import ROLES  # the same two disks of a controller

RULE = "write-cache"
#: The guest's write cache (model/blame.py's trail key): written after boot, it is the guest's configuration.
BLAME = BlameSettings(frozenset({"write_cache"}))
#: outside the default suite (its time is a budget of 13 rules): runs where --with-rules names it
OPT_IN = True
_ROLE = "(" + "|".join(ROLES) + ")_"
#: What it records per disk role: the guest's belief (now and at probe time, FUA), the host's cache
#: (its mode and flags), the fsyncs and the flushes on each side, and the disk's kernel name.
METRICS: Metrics = (
    (_ROLE + "guest_write_cache(_probed)?|" + _ROLE + "host_cache_mode|" + _ROLE + "write_cache_disk",
     MetricSpec("", PARAM)),
    (_ROLE + "guest_fua|" + _ROLE + "host_(writeback|direct|no_flush)", MetricSpec("bool", PARAM)),
    (_ROLE + "fsyncs|" + _ROLE + "flushes_(guest|host)", MetricSpec("requests", PARAM)),
)
MIN_EFFECTS: Mapping[str, float] = {}
#: No metric follows the host's CPU: counts of flushes do not.
HOST_CPU_BOUND: tuple[str, ...] = ()
#: One fsync workload per disk, counted exactly: one pass unless --repeats asks for more.
DEFAULT_REPEATS = 1
REPEATABLE = True

#: Flushes per fsync the guest must send, and the host must see of them, over a write-back cache. No
#: tolerance: a missing flush is data a power loss takes. Measured here (Linux 6.1 guest, QEMU 7.2, 49
#: fsyncs after 50 buffered 4 KiB writes): 49 flushes sent, 49 seen on virtio-scsi and virtio-blk;
#: with "write through" written to queue/write_cache, 0 and 0.
MIN_FLUSHES_PER_FSYNC = 1.0
WRITE_BACK = "write back"
#: The rule's workload on each disk (suites/test_write_cache.py, and the replay's): this many buffered
#: 4 KiB writes, each followed by an fsync (fio's last has none: one fsync fewer), at random offsets in
#: the first :data:`REGION_BYTES` of the disk, at depth 1. 50: a lost flush is a visible 2 %, and the
#: run takes about a second per disk under TCG.
WRITES = 50
REGION_BYTES = 64 << 20


@dataclass(frozen=True)
class GuestCache:
    """What the guest believes of disk ``name``: its ``queue/write_cache`` when the suite found the disk
    (``probed``) and after the workload (``now``), and its ``queue/fua`` (None: not shown)."""

    name: str
    probed: str
    now: str
    fua: int | None = None


@dataclass(frozen=True)
class Flushes:
    """One fsync workload counted on both sides: fio's fsyncs, the flushes the guest's block layer
    completed (/proc/diskstats; None where the kernel has no flush fields) and those the host saw."""

    fsyncs: int
    guest: int | None
    host: int


@dataclass(frozen=True)
class DiskCache:
    """One disk's evidence. ``asked``: the cache mode the suite asked for (``--disk cache=``, a profile);
    None: its own set-up (``none`` on a file, QEMU's ``writeback`` on the null-co latency disk)."""

    role: str
    guest: GuestCache
    host: HostCache
    flushes: Flushes
    asked: str | None = None


def _problems(name: str, d: DiskCache) -> list[tuple[str, Blame]]:
    """Why disk ``d`` fails, each with the layer its own evidence names."""
    g, h, f = d.guest, d.host, d.flushes
    host = f"{h.text()}, {h.said_by}" if h.said_by else h.text()
    out: list[tuple[str, Blame]] = []
    if f.fsyncs == 0:
        text = f"{name}: fio completed no fsyncs: nothing to compare"
        return [(text, Blame("unknown", text))]
    if h.no_flush and d.asked != "unsafe":
        text = (f"{name}: the host drops the guest's flushes ({host}) where the suite asked for "
                f"{'cache=' + d.asked if d.asked else 'its own set-up (no-flush off)'}: nothing the guest writes is durable")
        out.append((text, Blame("hypervisor", text)))
    if not h.writeback:
        return out
    sent = "none" if f.guest is None else str(f.guest)
    if g.now != WRITE_BACK:
        text = (f"{name}: the guest believes {g.now} over a host write-back cache ({host}): data acknowledged but not "
                f"durable: {f.fsyncs} fsyncs sent {sent} flushes, the host saw {f.host}")
        layer: Layer = "guest configuration" if g.probed != g.now else "guest driver"
        return [*out, (text, Blame(layer, f"{name}: queue/write_cache was {g.probed!r} when the guest probed the disk "
                                          f"and is {g.now!r} now, over a host write-back cache"))]
    needed = MIN_FLUSHES_PER_FSYNC * f.fsyncs
    if f.guest is not None and f.guest < needed:
        text = (f"{name}: the host has a write-back cache ({host}) and the guest believes it, but its {f.fsyncs} "
                f"fsyncs sent only {f.guest} flushes: {f.fsyncs - f.guest} acknowledged but not durable")
        out.append((text, Blame("guest driver", text)))
    if f.host < (f.guest if f.guest is not None else needed):
        text = (f"{name}: the guest sent {sent} flushes for {f.fsyncs} fsyncs and the host saw {f.host}: flushes lost "
                "between the guest's block layer and the host's (the guest's driver or the device's emulation)")
        out.append((text, Blame("unknown", text)))
    return out


def _notes(name: str, d: DiskCache) -> list[str]:
    h = d.host
    out = []
    if h.no_flush and d.asked == "unsafe":
        out.append(f"{name}: the host drops the guest's flushes (cache=unsafe, as asked): nothing the guest writes is "
                   "durable whatever it sends; the host's choice, not the guest's fault")
    if not h.writeback and d.guest.now == WRITE_BACK:
        out.append(f"{name}: the guest believes write back over a host without a volatile cache ({h.text()}): its "
                   "flushes are not needed (they cost time, they lose nothing)")
    return out


def judge_write_cache(disks: Sequence[DiskCache]) -> RuleVerdict:
    """``disks``: each disk of one controller's evidence (:class:`DiskCache`)."""
    lines: list[str] = []
    problems: list[str] = []
    notes: list[str] = []
    props: dict[str, Number] = {}
    hint: Blame | None = None
    for d in disks:
        g, h, f = d.guest, d.host, d.flushes
        name = f"{d.role} disk {g.name}"
        fua = "" if g.fua is None else f", FUA {'on' if g.fua else 'off'}"
        probed = "" if g.probed == g.now else f" ({g.probed} when probed)"
        sent = "not counted (no flush fields in /proc/diskstats)" if f.guest is None else f"{f.guest} flushes sent"
        lines.append(f"{name}: the guest believes {g.now}{probed}{fua}; the host: {h.text()}"
                     + (f" ({h.said_by})" if h.said_by else "") + f"; {f.fsyncs} fsyncs: {sent}, {f.host} seen by the host")
        for text, blame in _problems(name, d):
            problems.append(f"{text} [blame: {blame.layer}]")
            hint = hint or blame
        notes += _notes(name, d)
        props.update({f"{d.role}_guest_write_cache": g.now, f"{d.role}_guest_write_cache_probed": g.probed,
                      f"{d.role}_host_cache_mode": h.mode, f"{d.role}_host_writeback": int(h.writeback),
                      f"{d.role}_host_direct": int(h.direct), f"{d.role}_host_no_flush": int(h.no_flush),
                      f"{d.role}_fsyncs": f.fsyncs, f"{d.role}_flushes_host": f.host,
                      f"{d.role}_write_cache_disk": g.name})
        if g.fua is not None:
            props[f"{d.role}_guest_fua"] = g.fua
        if f.guest is not None:
            props[f"{d.role}_flushes_guest"] = f.guest
    return RuleVerdict(RULE, tuple(lines), tuple(problems), tuple(notes), props, hint=hint)
