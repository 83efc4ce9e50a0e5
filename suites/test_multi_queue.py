"""Rule 7, multi-queue: with several queues configured and several vCPUs, the guest spreads
its I/O over more than one queue. One fio job runs pinned to each online vCPU; the device's
completion interrupts per request virtqueue (``/proc/interrupts``) show which queues carried it."""

from __future__ import annotations

import re

import pytest

from fixtures.options import SuiteOptions
from guest.tools.fio import FioJob
from measure.window import GuestDisk, measure
from model.rules.multi_queue import judge_multiqueue, parse_queue_interrupts
from reports.records import Record
from suites.assertions import conclude, raw_dir_for
from transport.ssh import SshTransport


def queue_interrupts(ssh: SshTransport, virtio_dev: str) -> dict[int, int]:
    return parse_queue_interrupts(ssh.run("cat /proc/interrupts").stdout, virtio_dev)


def cpu_list(ssh: SshTransport, which: str) -> list[int]:
    """``/sys/devices/system/cpu/<which>`` (online, present: "0-1", "0,2-3") as a list."""
    cpus: list[int] = []
    for part in ssh.run(f"cat /sys/devices/system/cpu/{which}").stdout.strip().split(","):
        lo, _, hi = part.partition("-")
        cpus.extend(range(int(lo), int(hi or lo) + 1))
    return cpus


@pytest.mark.rule("multi-queue")
def test_multiqueue(disk: GuestDisk, suite_options: SuiteOptions, record: Record) -> None:
    configured = disk.attached.configured.queues
    if configured is None or configured < 2:
        pytest.skip(f"{disk.attached.spec.controller}: " + ("the guest chooses its queue count; no configured "
                    "count to hold it to" if configured is None else "one queue configured: nothing to spread over"))
    path = disk.ssh.run(f"readlink -f /sys/block/{disk.kernel_name}/device").stdout
    found = re.findall(r"/(virtio\d+)(?=/|$)", path.strip())
    if not found:
        pytest.skip(f"{disk.kernel_name} is not on a virtio device ({path.strip()}): per-queue interrupts unknown")
    virtio_dev = found[-1]
    cpus, present = cpu_list(disk.ssh, "online"), cpu_list(disk.ssh, "present")
    raw = raw_dir_for(suite_options.results_dir, disk.config_id) / "multi-queue"
    before = queue_interrupts(disk.ssh, virtio_dev)
    job = FioJob("mq", rw="randread", bs_bytes=4096, iodepth=4, numjobs=len(cpus),
                 cpus_allowed=",".join(map(str, cpus)))
    measure(disk, job, 2.0, raw_dir=raw, exact=False)
    after = queue_interrupts(disk.ssh, virtio_dev)
    per_queue = {q: after.get(q, 0) - before.get(q, 0) for q in sorted(set(before) | set(after))}
    verdict = judge_multiqueue(configured, disk.limits.nr_hw_queues, len(present), per_queue,
                               f"completion interrupts per request queue of {virtio_dev}", online_cpus=len(cpus))
    conclude(verdict, record, disk.config_id, raw)
