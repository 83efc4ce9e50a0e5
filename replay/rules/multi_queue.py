"""multi-queue in the replay: as the run does, one fio job of 4 KiB O_DIRECT random reads at depth 4
pinned to each of the guest's online vCPUs (``--cpus_allowed`` the online list, split) for the run's
window after fio's ramp, and the completion interrupts of each request virtqueue of the disk's virtio
device (``/proc/interrupts`` before and after, the device found under the disk's sysfs path) show which
queues carried it. Judged by ``model.rules.multi_queue`` with the queues the run configured, the guest's
hardware queues read after the set-up and the guest's present and online CPUs.

The guest works out its online CPUs at the job's start (a set-up may have taken one offline), so the fio
command line is shell in the job's preparation, not fio's arguments.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from model.errors import ParseError
from model.judging.verdict import RuleVerdict
from model.parse.proc_interrupts import parse_cpu_list, parse_queue_interrupts
from model.rules.multi_queue import BS_BYTES, DEPTH, RULE, judge_multiqueue
from replay.guest_script import Job
from replay.qemu import CannotTest
from replay.rules import Replayed, ReplayRule
from replay.rules.evidence import RAMP_S, configured_limits, guest_limits, output, part

JOB = "mq"
#: The job's preparation: the disk's device path and the CPU lists, /proc/interrupts (``irq0``), fio
#: (one job per online CPU), /proc/interrupts again (``irq1``); each line for the judge.
RUN = r"""echo "device=$(readlink -f /sys/block/$DEV/device)"
ON=$(cat /sys/devices/system/cpu/online); echo "online=$ON"
echo "present=$(cat /sys/devices/system/cpu/present)"
N=$(grep -c '^processor' /proc/cpuinfo)
sed 's/^/irq0 /' /proc/interrupts
fio --name=mq --rw=randread --bs={bs} --iodepth={depth} --numjobs=$N --ioengine=libaio --direct=1 --time_based \
 --runtime={runtime}s --group_reporting --cpus_allowed=$ON --cpus_allowed_policy=split --filename=/dev/$DEV \
 --output-format=json > /tmp/mq.json 2>/tmp/mq.err
echo "fio=$?"
sed 's/^/irq1 /' /proc/interrupts"""


def jobs(config: Mapping[str, object]) -> list[Job]:
    measure = config.get("measure")
    span = float(str(measure.get("window_s") or 2.0)) if isinstance(measure, dict) else 2.0
    run = RUN.replace("{bs}", str(BS_BYTES)).replace("{depth}", str(DEPTH)).replace("{runtime}", f"{RAMP_S + span:g}")
    return [Job(JOB, (), prepare=run)]


def judge(r: Replayed) -> RuleVerdict:
    configured = configured_limits(r.config).queues
    if configured is None or configured < 2:
        raise CannotTest(f"the run configured {configured} queue(s): the rule skips such a disk, and has no bundle")
    text = part(output(r, JOB), "prepared", JOB)
    said = dict(line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("irq"))
    if said.get("fio") != "0":
        raise CannotTest(f"fio did not run in the guest (exit {said.get('fio', 'none')}): the evidence is incomplete")
    found = re.findall(r"/(virtio\d+)(?=/|$)", said.get("device", ""))
    if not found:
        raise CannotTest(f"the disk is not on a virtio device ({said.get('device')}): per-queue interrupts unknown")
    virtio_dev = found[-1]
    irq = {k: "\n".join(line.removeprefix(f"{k} ") for line in text.splitlines() if line.startswith(f"{k} "))
           for k in ("irq0", "irq1")}
    try:
        before, after = (parse_queue_interrupts(irq[k], virtio_dev) for k in ("irq0", "irq1"))
        online, present = (parse_cpu_list(said.get(k, "")) for k in ("online", "present"))
    except (ParseError, ValueError) as e:
        raise CannotTest(f"the guest's interrupts or CPU lists could not be read: {e}") from e
    if not before:
        raise CannotTest(f"{virtio_dev} has no interrupt vector per request queue in the guest's /proc/interrupts: "
                         "per-queue interrupts unknown")
    per_queue = {q: after.get(q, 0) - before.get(q, 0) for q in sorted(set(before) | set(after))}
    return judge_multiqueue(configured, guest_limits(r).nr_hw_queues, len(present), per_queue,
                            f"completion interrupts per request queue of {virtio_dev}", online_cpus=len(online))


REPLAY = ReplayRule(RULE, jobs, judge)
