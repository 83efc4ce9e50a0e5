"""Rule 7, multi-queue: with several queues configured and several vCPUs, the guest spreads
its I/O over more than one queue. One fio job runs pinned to each online vCPU; the device's
completion interrupts per request virtqueue (``/proc/interrupts``) show which queues carried it."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures.options import SuiteOptions
from guest.tools.fio import FioJob
from guest.tools.interrupts import Interrupts
from measure.disk import GuestDisk
from measure.window import measure
from model.judging.verdict import RuleVerdict
from model.rules.multi_queue import BS_BYTES, DEPTH, judge_multiqueue, not_applicable
from reports.records import Record
from reports.store.baseline import StoredBaseline
from suites.assertions import judge_rule
from suites.needs import needed


@pytest.mark.rule("multi-queue")
def test_multiqueue(disk: GuestDisk, suite_options: SuiteOptions, record: Record,
                    stored_baseline: StoredBaseline | None) -> None:
    configured = disk.attached.configured.queues
    cannot = not_applicable(configured)  # before the guest is asked for its vCPUs
    if cannot or configured is None:
        pytest.skip(f"{disk.attached.spec.controller}: {cannot}")
    irq = needed(disk, Interrupts, "multi-queue")
    virtio_dev, path = irq.virtio_device(disk.kernel_name)
    if virtio_dev is None:
        pytest.skip(f"{disk.kernel_name} is not on a virtio device ({path}): per-queue interrupts unknown")
    cpus, present = irq.cpus("online"), irq.cpus("present")
    cannot = not_applicable(configured, len(present))
    if cannot:
        pytest.skip(f"{disk.attached.spec.controller}: {cannot}")
    job = FioJob("mq", rw="randread", bs_bytes=BS_BYTES, iodepth=DEPTH, numjobs=len(cpus),
                 cpus_allowed=",".join(map(str, cpus)))

    def once(raw: Path) -> RuleVerdict:
        before = irq.per_queue(virtio_dev)
        if not before:
            pytest.skip(f"{virtio_dev} has no interrupt vector per request queue in the guest's /proc/interrupts (its "
                        "queues share one, e.g. 'virtio1-virtqueues' without MSI-X): per-queue interrupts unknown")
        measure(disk, job, suite_options.window_s, raw_dir=raw, exact=False)
        after = irq.per_queue(virtio_dev)
        per_queue = {q: after.get(q, 0) - before.get(q, 0) for q in sorted(set(before) | set(after))}
        return judge_multiqueue(configured, disk.limits.nr_hw_queues, len(present), per_queue,
                                f"completion interrupts per request queue of {virtio_dev}", online_cpus=len(cpus))

    # How the guest spreads I/O over queues is measured (interrupt counts): the majority decides.
    judge_rule(record, suite_options, once, exact=False, baseline=stored_baseline, disks=(disk,))
