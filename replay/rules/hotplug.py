"""hotplug in the replay: the host adds a disk beside the disk under test (QMP ``blockdev-add`` of a sparse
raw file and ``device_add`` on the disk's controller, with the serial, size and limits the run configured
for it), the guest waits for a disk with that serial for the rule's bound, reads its limits, then the host
removes it (``device_del``), the guest waits for it to go and the host for QEMU's ``DEVICE_DELETED``.
Where the run injected hotplug-off, the guest's own setting (model/rules/hotplug.py's ``off_setting``:
the virtio bus's ``drivers_autoprobe`` 0, scsi_mod's ``scan`` manual) is written before the add and
restored after, as the run does. Judged by ``model.rules.hotplug`` with the run's bounds; the times are
the host's (from its add request to the guest's report that it shows the disk), and each bounded interval
carries how long the guest's vCPUs waited for a host CPU (replay/rules/host.py), as in the run. Where
the run also removed the disk under fio (``--surprise-removal``), so does the replay: replay/rules/surprise.py.
"""

from __future__ import annotations

import contextlib
import shlex
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from model.device_limits import ConfiguredLimits, parse_guest_limits
from model.errors import ParseError
from model.judging.verdict import RuleVerdict
from model.kernel_log_check import InjectedErrors
from model.rules.hotplug import GONE_BOUND_S, RULE, SEEN_BOUND_S, Gone, HotplugRun, Seen, judge_hotplug, off_setting
from model.rules.limits import compare_limits
from replay.guest_script import Job
from replay.qemu import CannotTest, HostCall
from replay.qmp import Qmp, QmpError
from replay.rules import Replayed, ReplayRule, surprise
from replay.rules.evidence import output, part
from replay.rules.host import GUEST_CLOCK, calls, event_time_s, judged, vcpu_of, vcpu_word, wait_event, wait_pct

JOB = "hotplug"
#: The added disk's QEMU ids in the replay (the run's are libvirt's).
DEVICE, NODE = "vioc-hotplug", "vioc-hotplug-node"

#: The guest's side, with the run's bounds: the fault's setting, the add, the wait for the serial
#: (polling every 0.1 s, timed by the guest's uptime), the limits, the removal and the wait for the
#: disk to go. Each line it prints starts with what it is.
SCRIPT = GUEST_CLOCK + r"""{fault_on}
host add {add}
echo "add $ANSWER"
t0=$(up); N=
while :; do N=$(find_disk {serial}); [ -n "$N" ] && break; past $t0 {seen_bound} && break; usleep 100000; done
if [ -n "$N" ]; then echo "found $N $(cat /sys/block/$N/size) $(since $t0)"; else echo "timeout $(since $t0)"; fi
host seen
echo "seen $ANSWER"
if [ -n "$N" ]; then
  ( {limits} ) 2>/dev/null | sed 's/^/limits /'
  host del
  echo "del $ANSWER"
  t1=$(up)
  while [ -e /sys/block/$N ]; do past $t1 {gone_bound} && break; usleep 100000; done
  if [ -e /sys/block/$N ]; then echo "kept"; else echo "released $(since $t1)"; fi
  set -- $ANSWER; host gone $2
  echo "gone $ANSWER"
{surprise}
fi
host cleanup
{fault_off}
true"""
#: hotplug-off: the guest's setting written before the add (printf: scsi_mod's ``scan`` takes 6
#: characters and no newline), and what it was written back after.
FAULT_ON = 'WAS=$(cat {path}); printf %s {value} > {path}; echo "fault $? $(cat {path})"'
FAULT_OFF = '[ -n "$WAS" ] && printf %s "$WAS" > {path}'


def _entry(config: Mapping[str, object]) -> Mapping[str, object]:
    entry = config.get("hotplug")
    if not isinstance(entry, dict):
        raise CannotTest("the bundle's configuration.json has no hotplug (a bundle of an older run): the replay does "
                         "not know the disk the run added")
    return entry


def _configured(entry: Mapping[str, object]) -> ConfiguredLimits:
    limits = entry.get("configured_limits")
    try:
        return ConfiguredLimits(**limits) if isinstance(limits, dict) else ConfiguredLimits(None)
    except TypeError as e:
        raise CannotTest(f"the bundle's hotplug configured_limits could not be read: {e}") from e


def _driver(config: Mapping[str, object]) -> str:
    probed = config.get("probed_limits")
    return str(probed.get("driver", "")) if isinstance(probed, dict) else ""


def _injected(config: Mapping[str, object]) -> bool:
    measure = config.get("measure")
    inject = measure.get("inject") if isinstance(measure, dict) else None
    return isinstance(inject, list) and "hotplug-off" in inject


def jobs(config: Mapping[str, object]) -> list[Job]:
    entry = _entry(config)
    lim = _configured(entry)
    path, value = off_setting(_driver(config))
    fault_on, fault_off = ((FAULT_ON.replace("{value}", shlex.quote(value)).replace("{path}", path),
                            FAULT_OFF.replace("{path}", path)) if _injected(config) else ("", ""))
    add = [str(config.get("controller")), str(entry.get("serial")), str(entry.get("size_bytes")),
           str(lim.logical_block_bytes), str(lim.physical_block_bytes), str(lim.optimal_io_bytes),
           "off" if lim.write_cache is False else "on", str(lim.queues or 1)]
    limits = str(config.get("limits_script") or "").replace("{disk}", "$N")
    again = surprise.script(add, int(str(entry.get("size_bytes")))) if entry.get("surprise_removal") else ""
    script = (SCRIPT.replace("{surprise}", again).replace("{fault_on}", fault_on).replace("{fault_off}", fault_off)
              .replace("{add}", " ".join(shlex.quote(a) for a in add)).replace("{serial}", shlex.quote(add[1]))
              .replace("{seen_bound}", f"{SEEN_BOUND_S:g}").replace("{gone_bound}", f"{GONE_BOUND_S:g}")
              .replace("{limits}", limits or "true"))
    return [Job(JOB, (), prepare=script)]


def _scsi_bus(qmp: Qmp) -> str:
    """The SCSI bus of the guest's virtio-scsi HBA (``<its id>.0``)."""
    for child in qmp.execute("qom-list", {"path": "/machine/peripheral"})["return"]:
        if child.get("type") == "child<virtio-scsi-pci>":
            return f"{child['name']}.0"
    raise QmpError("QEMU shows no virtio-scsi HBA to add the disk to")


def add(qmp: Qmp, args: Sequence[str]) -> str:
    """``add CONTROLLER SERIAL SIZE LOGICAL PHYSICAL OPTIMAL WRITE_CACHE QUEUES``: a sparse raw file beside
    the monitor's socket (removed with it), its node, and the device on the controller; the answer is the
    vCPU times read before the add."""
    controller, serial, size, logical, physical, optimal, cache, queues = args
    before = vcpu_word(qmp)
    path = Path(qmp.path).parent / "hotplug.img"
    with open(path, "wb") as f:
        f.truncate(int(size))
    qmp.execute("blockdev-add", {"driver": "raw", "node-name": NODE, "file": {"driver": "file", "filename": str(path)}})
    device: dict[str, object] = {"id": DEVICE, "drive": NODE, "serial": serial, "logical_block_size": int(logical),
                                 "physical_block_size": int(physical), "opt_io_size": int(optimal),
                                 "write-cache": cache, "rerror": "report", "werror": "report"}
    if controller == "virtio-blk":
        device |= {"driver": "virtio-blk-pci", "num-queues": int(queues)}
    elif controller == "virtio-scsi":
        device |= {"driver": "scsi-hd", "bus": _scsi_bus(qmp)}
    else:
        raise ValueError(f"the replay adds disks on virtio-blk and virtio-scsi only, not on {controller}")
    qmp.execute("device_add", device)
    return f"ok {before}"


def seen(qmp: Qmp, args: Sequence[str]) -> str:
    """The guest reports its wait's end: the vCPU times then."""
    return f"ok {vcpu_word(qmp)}"


def delete(qmp: Qmp, args: Sequence[str]) -> str:
    """``device_del`` of the added disk: the answer is the host's wall clock of the request (QEMU's events
    carry that clock) and the vCPU times read before it."""
    before = vcpu_word(qmp)
    wall = time.time()
    qmp.execute("device_del", {"id": DEVICE})
    return f"ok {wall:.6f} {before}"


def gone(qmp: Qmp, args: Sequence[str]) -> str:
    """``gone WALL [BOUND]``: QEMU's DEVICE_DELETED of the added disk, waited for until BOUND seconds (the
    rule's GONE_BOUND_S) after the request at WALL: ``gone <s from the request> <vcpu>``, or ``kept <vcpu>``;
    the node is then deleted."""
    wall, bound = float(args[0]), float(args[1]) if len(args) > 1 else GONE_BOUND_S
    event = wait_event(qmp, "DEVICE_DELETED", DEVICE, time.monotonic() + max(0.0, wall + bound - time.time()), wall)
    now = vcpu_word(qmp)
    if event is None:
        return f"kept {now}"
    qmp.execute("blockdev-del", {"node-name": NODE})
    return f"gone {event_time_s(event) - wall:.3f} {now}"


def fio_ended(qmp: Qmp, args: Sequence[str]) -> str:
    """The guest reports fio's end in the surprise removal: the host's clock of the call is its time."""
    return "ok"


def cleanup(qmp: Qmp, args: Sequence[str]) -> str:
    """The added disk removed if the host still has it (as the run's finally does), and its node."""
    names = {c.get("name") for c in qmp.execute("qom-list", {"path": "/machine/peripheral"})["return"]}
    if DEVICE in names:
        wall = time.time()
        qmp.execute("device_del", {"id": DEVICE})
        wait_event(qmp, "DEVICE_DELETED", DEVICE, time.monotonic() + GONE_BOUND_S, wall)
    with contextlib.suppress(QmpError):  # deleted already, or never added
        qmp.execute("blockdev-del", {"node-name": NODE})
    return "ok"


def _said(r: Replayed) -> dict[str, list[str]]:
    said: dict[str, list[str]] = {}
    for line in part(output(r, JOB), "prepared", JOB).splitlines():
        word, _, rest = line.partition(" ")
        said.setdefault(word, []).append(rest)
    return said


def _one(found: Sequence[HostCall], name: str) -> HostCall:
    if len(found) != 1:
        raise CannotTest(f"the guest asked the host for {name} {len(found)} times, not once: the evidence is incomplete")
    return found[0]


def judge(r: Replayed) -> RuleVerdict:
    entry = _entry(r.config)
    said = _said(r)
    if _injected(r.config) and not said.get("fault", [""])[0].startswith("0 "):
        raise CannotTest(f"the guest could not apply hotplug-off ({off_setting(_driver(r.config))}): it said "
                         f"{said.get('fault')}")
    added, reported = _one(calls(r.host_calls, "add"), "add"), _one(calls(r.host_calls, "seen"), "seen")
    t0 = vcpu_of(added.answer)
    attach_s = (added.end_ns - added.begin_ns) / 1e9
    found = said.get("found", [])
    sighting = None
    if found:
        name, sectors, guest_s = found[0].split()
        try:
            limits = tuple(compare_limits(_configured(entry), parse_guest_limits("\n".join(said.get("limits", [])))))
        except ParseError as e:
            raise CannotTest(f"the guest's limits of the added disk {name} could not be read: {e}") from e
        sighting = Seen(name, int(sectors) * 512, float(guest_s), (reported.begin_ns - added.begin_ns) / 1e9, limits)
    elif "timeout" not in said:
        raise CannotTest(f"the guest did not say whether it saw the added disk: it said {said}")
    removal = None
    if sighting is not None:
        deleted, waited = _one(calls(r.host_calls, "del"), "del"), _one(calls(r.host_calls, "gone"), "gone")
        released = said.get("released", [])
        host = waited.answer.split()
        removal = Gone((deleted.end_ns - deleted.begin_ns) / 1e9, float(released[0]) if released else None,
                       float(host[1]) if host[0] == "gone" else None,
                       wait_pct(vcpu_of(deleted.answer), vcpu_of(waited.answer)))
    pulled = (surprise.surprise(said, r.host_calls)
              if entry.get("surprise_removal") and removal is not None and removal.host_s is not None else None)
    return judged(judge_hotplug(HotplugRun(str(r.config.get("controller")), str(entry.get("serial")),
                                    int(str(entry.get("size_bytes"))), attach_s, sighting, removal, surprise=pulled,
                                    seen_vcpu_wait_pct=wait_pct(t0, vcpu_of(reported.answer)))))


def _own_errors(r: Replayed) -> list[InjectedErrors]:
    """The read errors of the disk removed under fio (the surprise removal) are the rule's own."""
    return surprise.injected(_said(r))


REPLAY = ReplayRule(RULE, jobs, judge, {"add": add, "seen": seen, "del": delete, "gone": gone, "cleanup": cleanup,
                                        surprise.AGAIN: add, surprise.PULL: delete, surprise.FIO: fio_ended,
                                        surprise.PULLED: gone}, _own_errors)
