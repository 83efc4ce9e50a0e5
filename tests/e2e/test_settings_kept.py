"""A setting a rule changes is set back when the rule fails or errors half-way, as the guest's kernel
will take it, and the next rule sees the disk as it was: read back from a real Linux 6.12 guest, whose
virtio-blk scratch disk (4 KiB physical blocks) shows a ``discard_max_bytes`` it refuses to be given
(docs/rules/discard.md, "Setting discard_max_bytes back")."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from guest.tools.sysfs import DISCARD_MAX, Sysfs, shown
from images.kernels import resolve
from measure.disk import GuestDisk
from measure.kept import kept_settings
from measure.standalone import standalone_guest
from model.disks import suite_disks
from tests.e2e.test_guest_kernels import SECOND_KERNEL
from transport.ssh import GuestCommandError

#: virtio-blk's largest discard in QEMU 7.2 (max-discard-sectors 4194303) and the multiple of 4096 above it
DEVICE_MAX = "2147483136"
TAKEN_BACK = "2147483648"


@pytest.fixture(scope="module")
def scratch() -> Iterator[GuestDisk]:
    spec = next(s for s in suite_disks(["virtio-blk"]) if s.role == "scratch")
    with standalone_guest([spec], "vioconform-kept-test", kernel=resolve(SECOND_KERNEL)) as (_, disks):
        yield disks[0]


def test_discard_max_is_set_back_as_the_kernel_takes_it_when_a_guest_command_fails(scratch: GuestDisk) -> None:
    sysfs, name = scratch.tool(Sysfs), scratch.kernel_name
    assert sysfs.read(name, DISCARD_MAX) == DEVICE_MAX and sysfs.read(name, "queue/discard_granularity") == "4096"
    refused = sysfs.write(name, DISCARD_MAX, DEVICE_MAX, check=False)  # the kernel's own inconsistency
    assert not refused.ok and "Invalid argument" in refused.stderr, refused
    with pytest.raises(GuestCommandError), sysfs.changed(name, DISCARD_MAX, "262144") as restored:
        assert sysfs.read(name, DISCARD_MAX) == "262144"
        # a guest command made to fail half-way: a discard that starts off the logical block
        scratch.tools.shell.run(f"blkdiscard -o 1 -l 4096 {scratch.device_path}")
    assert sysfs.read(name, DISCARD_MAX) == DEVICE_MAX
    assert [(r.written, r.now) for r in restored] == [(TAKEN_BACK, DEVICE_MAX)]
    assert f"refused the {DEVICE_MAX} it had shown" in restored[0].note()


def test_the_next_rule_sees_the_disk_as_it_was_after_one_that_errored(scratch: GuestDisk) -> None:
    sysfs, name = scratch.tool(Sysfs), scratch.kernel_name
    before = sysfs.settings(name)
    other = next(s.strip("[]") for s in before["queue/scheduler"].split() if not s.startswith("["))
    with pytest.raises(GuestCommandError), kept_settings([scratch]) as restored:
        sysfs.write(name, "queue/scheduler", other)
        sysfs.write(name, "queue/read_ahead_kb", "0")
        sysfs.write(name, "queue/nomerges", "2")
        sysfs.write(name, DISCARD_MAX, "262144")
        scratch.tools.shell.run("false")  # the rule errors before it sets anything back
    assert sysfs.settings(name) == before  # read back from the guest
    # (a setting the scheduler's change resets with it may need no setting back of its own)
    assert {r.setting for r in restored} >= {"queue/scheduler", "queue/nomerges", DISCARD_MAX}
    assert all(r.now == shown(r.setting, before[r.setting]) for r in restored)
    assert shown("queue/scheduler", before["queue/scheduler"]) != other
