"""The disks the suite gives a guest: two per controller, a disk under test and a scratch disk.

The session's guest (fixtures/guest.py), the benchmarks and the project's tests all ask for
these, so a guest started outside pytest carries the same disks as the suite's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from model.disk_settings import DiskSettings
from model.types import DiskSpec

#: The scratch disk: 4 KiB physical blocks and a 64 KiB optimal I/O size, so that
#: misalignment is visible and the guest has an optimal size to align to.
SCRATCH_PHYSICAL_BLOCK_BYTES = 4096
SCRATCH_OPTIMAL_IO_BYTES = 65536

#: Queues of each disk on a controller that has several (virtio-scsi, virtio-blk): as many as
#: the guest's vCPUs, so the multi-queue rule can see the guest spread its I/O.
DISK_QUEUES = 2


def suite_disks(controllers: Sequence[str], backing: str = "latency", latency_ms: float = 5.0,
                settings: Mapping[str, DiskSettings] | None = None) -> list[DiskSpec]:
    """Per controller, in order: the disk under test (``backing``: a ``latency_ms`` null-co disk or
    a sparse file) and a file-backed scratch disk. Disk ``2i`` and ``2i + 1`` sit on controller ``i``.
    ``settings``: how the host sets up both disks of a controller (``--disk``, ``--profile``; a
    controller not listed: the suite's own set-up)."""
    specs = []
    for i, c in enumerate(controllers):
        own = (settings or {}).get(c, DiskSettings())
        specs.append(DiskSpec(controller=c, index=2 * i, backing=backing, latency_ms=latency_ms, queues=DISK_QUEUES,
                              settings=own))
        specs.append(DiskSpec(controller=c, index=2 * i + 1, backing="file", role="scratch", queues=DISK_QUEUES,
                              physical_block_bytes=SCRATCH_PHYSICAL_BLOCK_BYTES,
                              optimal_io_bytes=SCRATCH_OPTIMAL_IO_BYTES, settings=own))
    return specs
