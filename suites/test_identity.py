"""identity (docs/rules/identity.md): the serial, WWN, VPD pages and size the guest sees of each disk
of a controller, against what the host was told to give it and what the device has (QMP ``qom-get``).
Read from sysfs once: no workload."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures.options import SuiteOptions
from guest.tools.identity import Identity
from hypervisors.libvirt.identity import configured_identity
from measure.disk import GuestDisk
from model.judging.verdict import RuleVerdict
from model.rules.identity import device_identity, guest_identity, judge_identity
from reports.records import Record
from reports.store.baseline import StoredBaseline
from suites.assertions import judge_rule


@pytest.mark.rule("identity")
def test_identity(disk: GuestDisk, scratch_disk: GuestDisk, suite_options: SuiteOptions,
                  record: Record, stored_baseline: StoredBaseline | None) -> None:
    if disk.configuration.backend != "libvirt":
        pytest.skip(f"identity: the {disk.configuration.backend} backend sets no serial (vSphere derives a disk's "
                    "WWN from its UUID): the host configures nothing for the rule to compare")

    def once(raw: Path) -> RuleVerdict:
        disks = []
        raw.mkdir(parents=True, exist_ok=True)
        for d in (disk, scratch_disk):
            text = d.tool(Identity).files(d.kernel_name)
            (raw / f"{d.attached.spec.role}-{d.kernel_name}-identity.txt").write_text(text)
            disks.append((d.attached.spec.role, configured_identity(d.attached.spec),
                          guest_identity(d.kernel_name, text), device_identity(d.advertised)))
        return judge_identity(disks)

    judge_rule(record, suite_options, once, exact=True, baseline=stored_baseline, disks=(disk, scratch_disk))
