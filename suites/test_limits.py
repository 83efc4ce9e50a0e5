"""Rule 6, limits advertisement: what the guest was told about each disk of a controller,
against what the suite asked the hypervisor for (queue depth, maximum transfer, block sizes,
optimal I/O size, write cache, discard, queues), beside what the hypervisor says the device
advertises. Read from sysfs as the driver set it at probe time."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures.options import SuiteOptions
from measure.disk import GuestDisk
from model.judging.verdict import RuleVerdict
from model.rules.limits import judge_limits
from reports.records import Record
from reports.store.baseline import StoredBaseline
from suites.assertions import judge_rule
from suites.kernel_log_watch import provoke_kernel_warning


@pytest.mark.rule("limits")
def test_limits_advertisement(disk: GuestDisk, scratch_disk: GuestDisk, suite_options: SuiteOptions,
                              record: Record, stored_baseline: StoredBaseline | None) -> None:
    def once(_raw: Path) -> RuleVerdict:
        if "kernel-warning" in suite_options.inject:  # the fault runs inside the kernel-log check's window
            provoke_kernel_warning(disk)
        return judge_limits([(d.attached.spec.role, d.attached.configured, d.advertised_limits, d.advertised)
                             for d in (disk, scratch_disk)])

    # Settings read once (they do not vary between repeats); exact, and compared with a baseline's.
    judge_rule(record, suite_options, once, exact=True, baseline=stored_baseline, disks=(disk, scratch_disk),
               own_dir=False)
