"""A range of a disk the host makes fail: what the error-propagation rule asks a backend for, and what
the kernel-log check is told to expect errors in; and what the device does with a failed request
(:class:`ErrorPolicy`).

Example: ``InjectedRange(first_sector=2116, sectors=16, kind="read")`` makes every read that touches
sectors 2116-2131 (512-byte sectors) fail with EIO at the host, and nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

SECTOR_BYTES = 512

Kind = Literal["read", "write"]


@dataclass(frozen=True)
class InjectedRange:
    """Sectors ``first_sector`` to ``first_sector + sectors - 1`` fail for requests of ``kind``."""

    first_sector: int
    sectors: int
    kind: Kind

    def __post_init__(self) -> None:
        if self.first_sector < 0 or self.sectors < 1:
            raise ValueError(f"an injected range needs a first sector >= 0 and at least one sector, not "
                             f"{self.first_sector}+{self.sectors}")

    @property
    def end_sector(self) -> int:
        """The first sector after the range."""
        return self.first_sector + self.sectors

    def touches(self, offset_bytes: int, length_bytes: int) -> bool:
        """Whether a request of ``length_bytes`` at ``offset_bytes`` covers any sector of the range."""
        start, end = offset_bytes // SECTOR_BYTES, -(-(offset_bytes + length_bytes) // SECTOR_BYTES)
        return length_bytes > 0 and start < self.end_sector and end > self.first_sector

    def describe(self) -> str:
        return f"{self.kind}s of sectors {self.first_sector}-{self.end_sector - 1}"


@dataclass(frozen=True)
class ErrorPolicy:
    """What a disk's device does with a request its backend failed, as the hypervisor answers when
    asked (``found``: QEMU's ``rerror``/``werror`` read back with qom-get), beside what the suite
    configured for it (``configured``: ``report``, hand the error to the guest). ``withheld``: the
    properties whose answer keeps the error from the guest (``ignore`` answers the request as done,
    ``stop`` pauses the VM); ``said_by``: where the answer came from.

    Example: ``ErrorPolicy("ua-dut1", {"rerror": "report", "werror": "report"},
    {"rerror": "ignore", "werror": "ignore"}, ("rerror", "werror"), "qom-get /machine/peripheral/ua-dut1")``
    """

    device: str
    configured: Mapping[str, str]
    found: Mapping[str, str]
    withheld: tuple[str, ...]
    said_by: str

    def describe(self) -> str:
        """``"rerror=ignore, werror=ignore (qom-get ...) where the suite configured rerror=report, werror=report"``."""
        found = ", ".join(f"{p}={self.found[p]}" for p in self.withheld)
        asked = ", ".join(f"{p}={self.configured.get(p, '(not set)')}" for p in self.withheld)
        return f"{found} ({self.said_by}) where the suite configured {asked}"


#: The guest's command that prints, one a line, the disk ``{disk}``'s SCSI command timeout
#: (``device/timeout``, seconds), its request timeout (``queue/io_timeout``, ms: blk-mq drivers with a
#: timeout handler) and nvme_core's retries (its ``max_retries`` parameter, where it is loaded): ``-``
#: for each the kernel does not show. POSIX shell and ``/sys`` only (the suite's guests and the replay's).
TIMEOUTS_SCRIPT = ("for f in /sys/block/{disk}/device/timeout /sys/block/{disk}/queue/io_timeout "
                   "/sys/module/nvme_core/parameters/max_retries; do cat \"$f\" 2>/dev/null || echo -; done")


@dataclass(frozen=True)
class Timeouts:
    """The disk's command timeouts as its driver set them (None where the driver has none), and NVMe's retries."""

    scsi_timeout_s: float | None  # /sys/block/X/device/timeout (SCSI disks)
    io_timeout_ms: int | None  # /sys/block/X/queue/io_timeout (blk-mq drivers with a timeout handler)
    nvme_max_retries: int | None = None  # /sys/module/nvme_core/parameters/max_retries (where nvme_core is loaded)


def parse_timeouts(text: str) -> Timeouts:
    """:data:`TIMEOUTS_SCRIPT`'s output; ValueError for a value that is no number."""
    scsi, io, nvme = [*text.split(), "-", "-", "-"][:3]
    return Timeouts(float(scsi) if scsi != "-" else None, int(io) if io != "-" else None,
                    int(nvme) if nvme != "-" else None)


#: The swallowing mirror's region size, in sectors: dm-raid1 tracks sync state per region (a power of two).
MIRROR_REGION_SECTORS = 1024
#: The mirror's good leg: a RAM disk (brd makes /dev/ram0 with rd_nr=1).
GOOD_LEG = "/dev/ram0"


def mirror_table(disk: str, size_bytes: int) -> tuple[str, int]:
    """Device-mapper's table of a ``mirror`` (dm-raid1, no ``handle_errors``: it answers a failing leg's
    errors as done) of the first ``size_bytes`` of ``/dev/<disk>`` and :data:`GOOD_LEG`, taken as in sync
    (``nosync``), and the RAM disk's size in KiB (brd's ``rd_size``)."""
    sectors = -(-size_bytes // SECTOR_BYTES)
    sectors += -sectors % MIRROR_REGION_SECTORS
    return (f"0 {sectors} mirror core 2 {MIRROR_REGION_SECTORS} nosync 2 /dev/{disk} 0 {GOOD_LEG} 0",
            sectors // 2)
