"""resize in the replay: as the run does on its scratch disk, fio reads and writes its first MiBs while the
host grows the disk by GROW_BYTES (QMP ``block_resize`` on the disk's node) and the guest waits, for the
rule's bound, until ``/sys/block/<disk>/size`` shows the size the host then reports; then the host shrinks
it back and the guest waits again; the kernel log after each step's mark names the path that told the
guest. Then, with fio stopped and where the guest saw the grow: ext4 over the whole disk, mounted, the
host grows the disk again and, once the guest sees it, ``resize2fs`` grows the mounted filesystem online;
it is unmounted, its superblock zeroed and the disk shrunk back. param-change-off needs nothing of the
replay: it is a property of the virtio-scsi HBA on QEMU's command line, which the replay keeps.

Judged by ``model.rules.resize`` with the bound of the disk's driver (``bound_for``); a step's time is the
host's, from its resize call's return to the guest's report that it shows the size, and carries how long
the guest's vCPUs waited for a host CPU over it (replay/rules/host.py), as in the run.
"""

from __future__ import annotations

import dataclasses
import shlex
import time
from collections.abc import Mapping, Sequence
from typing import Any

from model.errors import ParseError
from model.ext4_options import BLOCK_BYTES, MKFS_OPTIONS, MOUNT_OPTIONS, STATFS, WIPE_BYTES
from model.judging.verdict import RuleVerdict
from model.parse.filesystem import FsSize, parse_resize2fs, parse_statfs
from model.parse.fio_json import fio_messages, parse_fio_json
from model.rules import resize as rule
from replay.guest_script import Job
from replay.qemu import CannotTest, HostCall
from replay.qmp import Qmp, QmpError
from replay.rules import Replayed, ReplayRule
from replay.rules.evidence import fio, output, part
from replay.rules.host import GUEST_CLOCK, calls, judged, vcpu_of, vcpu_word, wait_pct

JOB, FS = "resize-io", "resize-fs"
#: fio's exit status when the replay stops it with SIGINT (fio's sig_int sets its exit value to 128 and it
#: says "terminating on signal 2"): the stop the run makes too, which the run's records count as no error
#: (fio_errors 0 in every run here, fio saying the same); any other non-zero exit is one.
STOPPED_STATUS = 128
PERIPHERAL = "/machine/peripheral"

#: One step: the kernel log marked, the host's resize (``host resize STEP REF grow|to BYTES``: its answer
#: ``ok FROM TO HOST_S vcpu``), the guest's wait for the host's size within the bound, its report (``host
#: seen STEP``) and the kernel log after the mark. Prints ``step STEP seen|never SECTORS WAITED_S``.
STEP = r"""echo "<5>vioconform-replay: resize {step}" > /dev/kmsg
host resize {step} {ref} {how}
echo "answer {step} $ANSWER"
case "$ANSWER" in ok*) ;; *) exit 1 ;; esac
set -- $ANSWER; FROM=$2; TO=$3; S=$(($3 / 512)); t0=$(up); r=never
while :; do s=$(cat /sys/block/$DEV/size); [ "$s" = "$S" ] && { r=seen; break; }; past $t0 {bound} && break; usleep 100000; done
echo "step {step} $r $s $(since $t0)"
host seen {step}
dmesg -r | sed '1,/vioconform-replay: resize {step}$/d' | sed 's/^/klog {step} /'"""

#: While fio runs: the grow, then the shrink back wherever the host's size changed; fio stopped after
#: (SIGINT: it prints its JSON, as the run's finish does), whatever happened. SIGINT is sent again every
#: 0.5 s until fio ends: a signal that comes before fio has set its handler is lost (a background job
#: starts with SIGINT ignored, and fio's handler acts only once its jobs exist).
DURING = GUEST_CLOCK + r"""(
{grow}
[ "$r" = seen ] && echo seen > /tmp/grown
[ "$TO" != "$FROM" ] || exit 0
{shrink}
)
while kill -INT $FIO 2>/dev/null; do usleep 500000; done"""

#: With fio stopped, where the guest saw the grow: ext4 over the whole disk, mounted, grown online after
#: the host grew the disk; taken off, and the disk back at its size, whatever happened.
FS_SCRIPT = GUEST_CLOCK + r"""[ "$(cat /tmp/grown 2>/dev/null)" = seen ] || { echo "notrun grow"; exit 0; }
command -v mkfs.ext4 >/dev/null && command -v resize2fs >/dev/null || { echo "notrun tools"; exit 0; }
M={mount}
umount $M 2>/dev/null; mkfs.ext4 -q -F -b {block} -E {mkfs} /dev/$DEV && mkdir -p $M && mount -t ext4 -o {mopts} /dev/$DEV $M &&
  echo "before $({statfs} $M)"
(
{grow}
[ "$r" = seen ] || exit 0
t=$(up); resize2fs /dev/$DEV > /tmp/r2fs 2>&1; rc=$?; echo "resize2fs $rc $(since $t)"
sed 's/^/said /' /tmp/r2fs; [ $rc = 0 ] && echo "after $({statfs} $M)"
)
umount $M 2>/dev/null; dd if=/dev/zero of=/dev/$DEV bs={wipe} count=1 oflag=direct conv=fsync 2>/dev/null
set -- $(sed -n 's/^answer fs-grow ok //p' /tmp/prep-answers)
[ -n "$1" ] && [ "$2" != "$1" ] && (
{back}
)
true"""


def _driver(config: Mapping[str, object]) -> str:
    probed = config.get("probed_limits")
    return str(probed.get("driver", "")) if isinstance(probed, dict) else ""


def _step(step: str, ref: str, how: str, bound_s: float) -> str:
    return (STEP.replace("{step}", step).replace("{ref}", shlex.quote(ref)).replace("{how}", how)
            .replace("{bound}", f"{bound_s:g}"))


def jobs(config: Mapping[str, object]) -> list[Job]:
    ref = str(config.get("host_ref") or "")
    if not ref:
        raise CannotTest("the bundle's configuration.json has no host_ref (a bundle of an older run): the replay "
                         "does not know which of QEMU's disks to resize")
    bound = rule.bound_for(_driver(config)).seconds
    during = (DURING.replace("{grow}", _step("grow", ref, "grow", bound))
              .replace("{shrink}", _step("shrink", ref, "to $FROM", bound)))
    # the fs grow's answer is kept in a file too: the shrink back reads the size it grew from
    fs_grow = _step("fs-grow", ref, "grow", bound).replace(
        'echo "answer fs-grow $ANSWER"', 'echo "answer fs-grow $ANSWER" | tee -a /tmp/prep-answers')
    fs = (FS_SCRIPT.replace("{grow}", fs_grow).replace("{back}", _step("fs-back", ref, "to $1", bound))
          .replace("{mount}", rule.MOUNT).replace("{block}", str(BLOCK_BYTES)).replace("{mkfs}", MKFS_OPTIONS)
          .replace("{mopts}", MOUNT_OPTIONS).replace("{statfs}", STATFS).replace("{wipe}", str(WIPE_BYTES)))
    io = fio(JOB, {"rw": "randrw", "bs": rule.IO_BLOCK_BYTES, "iodepth": rule.IO_DEPTH, "numjobs": 1, "ioengine": "libaio",
                   "direct": 1, "time_based": True, "runtime": f"{rule.IO_RUNTIME_S}s", "group_reporting": True,
                   "size": rule.IO_REGION_BYTES})
    return [dataclasses.replace(io, during=during), Job(FS, (), prepare=fs)]


def _node(qmp: Qmp, ref: str) -> tuple[str, int]:
    """The node name and size of the disk whose device is ``ref`` (QMP ``query-block``'s ``qdev``)."""
    names = (ref, f"{PERIPHERAL}/{ref}", f"{PERIPHERAL}/{ref}/virtio-backend")
    block: list[dict[str, Any]] = qmp.execute("query-block")["return"]
    for b in block:
        if b.get("qdev") in names and "inserted" in b:
            return str(b["inserted"]["node-name"]), int(b["inserted"]["image"]["virtual-size"])
    raise QmpError(f"QEMU's query-block has no medium for device {ref}")


def resize(qmp: Qmp, args: Sequence[str]) -> str:
    """``resize STEP REF grow`` (by the rule's GROW_BYTES) or ``resize STEP REF to BYTES``: ``block_resize`` on the
    disk's node; ``ok FROM TO HOST_S vcpu``: the sizes before and after as QEMU reports them, the call's
    seconds, and the vCPU times read after it (where the run reads them)."""
    ref, how = args[1], args[2:]
    node, before = _node(qmp, ref)
    to = before + rule.GROW_BYTES if list(how) == ["grow"] else int(how[1])
    began = time.monotonic()
    qmp.execute("block_resize", {"node-name": node, "size": to})
    took = time.monotonic() - began
    return f"ok {before} {_node(qmp, ref)[1]} {took:.3f} {vcpu_word(qmp)}"


def seen(qmp: Qmp, args: Sequence[str]) -> str:
    """The guest's report at its wait's end (``seen STEP``): the vCPU times then."""
    return f"ok {vcpu_word(qmp)}"


def _said(text: str) -> dict[str, list[str]]:
    said: dict[str, list[str]] = {}
    for line in text.splitlines():
        word, _, rest = line.partition(" ")
        said.setdefault(word, []).append(rest)
    return said


def _call(found: Sequence[HostCall], step: str) -> HostCall:
    mine = [c for c in found if c.args[:1] == (step,)]
    if len(mine) != 1:
        raise CannotTest(f"the guest asked the host {len(mine)} times for its {step} step, not once: the evidence "
                         "is incomplete")
    return mine[0]


def _steps(r: Replayed, said: Mapping[str, list[str]], names: Sequence[str]) -> list[rule.ResizeStep]:
    resizes, reports = calls(r.host_calls, "resize"), calls(r.host_calls, "seen")
    out = []
    for name in names:
        line = next((s.split() for s in said.get("step", []) if s.split()[:1] == [name]), None)
        if line is None:
            continue
        call, report = _call(resizes, name), _call(reports, name)
        _, before, after, host_s = call.answer.split()[:4]
        klog = [s.partition(" ")[2] for s in said.get("klog", []) if s.split()[:1] == [name]]
        seen_s = (report.begin_ns - call.end_ns) / 1e9 if line[1] == "seen" else None
        out.append(rule.ResizeStep(name.removeprefix("fs-"), int(before), int(after), float(host_s), int(line[2]) * 512,
                              seen_s, rule.mechanism(klog, r.device), wait_pct(vcpu_of(call.answer), vcpu_of(report.answer))))
    return out


def _statfs(said: Mapping[str, list[str]], key: str) -> FsSize | None:
    try:
        return parse_statfs(said[key][0], f"the replay's stat -f ({key})") if key in said else None
    except ParseError as e:
        raise CannotTest(f"the guest's statfs of {rule.MOUNT} could not be read: {e}") from e


def _fs(r: Replayed, original: int) -> rule.FsGrow:
    said = _said(output(r, FS).parts.get("prepared", ""))
    if said.get("notrun") == ["grow"]:
        return rule.FsGrow(None, None, original, not_run="the guest never saw the disk grow (above)")
    if said.get("notrun") == ["tools"]:
        return rule.FsGrow(None, None, original, not_run="the guest has no mkfs.ext4 or resize2fs (e2fsprogs)")
    steps = _steps(r, said, ("fs-grow", "fs-back"))
    if len(steps) > 1 and steps[1].guest_seen_s is None:
        raise CannotTest(f"the guest still shows {steps[1].guest_bytes} bytes after the host shrank the disk back to "
                         f"{steps[1].host_to_bytes} bytes (the run stops there too: an ERROR)")
    before = _statfs(said, "before")
    if not steps or before is None:
        raise CannotTest(f"the guest did not make, mount and grow the filesystem: it said {dict(said)}")
    grow = steps[0]
    if grow.guest_seen_s is None:
        return rule.FsGrow(before, None, grow.guest_bytes, not_run=(
            f"the guest still saw {grow.guest_bytes} bytes {rule.bound_for(_driver(r.config)).seconds:.1f} s after the host "
            f"grew the disk to {grow.host_to_bytes} bytes"))
    rc, seconds = said["resize2fs"][0].split()
    text = "\n".join(said.get("said", []))
    error = "" if rc == "0" else parse_resize2fs(text).last_line or f"resize2fs exited {rc}"
    return rule.FsGrow(before, _statfs(said, "after"), grow.host_to_bytes, error, parse_resize2fs(text).size_bytes,
                  float(seconds))


def judge(r: Replayed) -> RuleVerdict:
    io = output(r, JOB)
    said = _said(part(io, "during", JOB))
    steps = _steps(r, said, ("grow", "shrink"))
    if not steps:
        raise CannotTest(f"the host did not grow the disk: the guest said {dict(said)}")
    fio_out, fio_err = part(io, "fio", JOB), io.parts.get("fioerr", "")
    try:
        errors = sum(j.error != 0 for j in parse_fio_json(fio_out, f"fio {JOB}").jobs)
    except ParseError as e:
        raise CannotTest(f"fio {JOB}: the guest's output could not be read: {e}") from e
    if io.exit_status != 0 and not (io.exit_status == STOPPED_STATUS and "terminating on signal 2" in fio_out):
        errors = max(errors, 1)
    fs = _fs(r, steps[0].host_from_bytes)
    driver = _driver(r.config)
    return judged(rule.judge_resize(rule.ResizeRun(r.device, driver, tuple(steps), errors, fio_messages(fio_out, fio_err), "", fs),
                               rule.bound_for(driver)))


REPLAY = ReplayRule(rule.RULE, jobs, judge, {"resize": resize, "seen": seen})
