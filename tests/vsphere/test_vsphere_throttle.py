"""The throttle rule on vSphere: a disk's IOPS limit (``--disk iops=``) is set on the clone, and the rule
skips with the sentence that says why it is not judged there (the backend cannot change the limit under a
running VM; vcsim runs no I/O)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hypervisors.base import GuestRequest, ThrottleUnavailable
from hypervisors.vsphere.backend import VSphereBackend
from model.disk_settings import parse_disk_settings
from model.types import DiskSpec


def test_a_disk_with_an_iops_limit_is_not_throttled_at_run_time_and_says_why(backend: VSphereBackend, run_dir: Path,
                                                                            run_pubkey: str) -> None:
    settings = parse_disk_settings("iops=500")
    disks = tuple(DiskSpec("pvscsi", index=i, size_bytes=1 << 30, settings=settings) for i in (0, 1))
    guest = backend.start_guest(GuestRequest(name="g1", disks=disks, run_dir=run_dir, authorized_key=run_pubkey,
                                             boot_timeout_s=20))
    disk = guest.disks[0]
    # the limit itself is set on the clone (tests/vsphere/test_vsphere_disk_settings.py reads it back)
    with pytest.raises(ThrottleUnavailable) as e:
        backend.disk_throttle(guest, disk)
    assert "storageIOAllocation.limit" in str(e.value) and "judged on libvirt only" in str(e.value)
