"""A range of a disk the host makes fail: what the error-propagation rule asks a backend for, and what
the kernel-log check is told to expect errors in.

Example: ``InjectedRange(first_sector=2116, sectors=16, kind="read")`` makes every read that touches
sectors 2116-2131 (512-byte sectors) fail with EIO at the host, and nothing else.
"""

from __future__ import annotations

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
