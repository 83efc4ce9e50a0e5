"""A disk's I/O limits as the host holds them: QEMU's throttle of a block backend, read back from
QMP ``query-block`` (``inserted``'s ``iops``, ``bps`` and their ``_rd``/``_wr``, ``_max`` and
``_max_length`` fields; qapi/block-core.json's ``BlockDeviceInfo``). A field QEMU leaves out is 0:
QEMU 7.2 reports ``iops_max`` and ``iops_max_length`` only where a burst was set.

Example::

    held = parse_throttle(entry["inserted"], "query-block of vioc-1, device ua-vioc-dut00")
    held.iops, held.burst_ios  # 200, 0
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from model.errors import ParseError

#: block_set_io_throttle's six mandatory limits (QEMU 7.2), all off.
NO_LIMITS: dict[str, object] = {"bps": 0, "bps_rd": 0, "bps_wr": 0, "iops": 0, "iops_rd": 0, "iops_wr": 0}


@dataclass(frozen=True)
class ThrottleLimits:
    """Total (read and write) limits of one disk, 0 where none: ``iops`` I/Os per second, ``bps`` bytes
    per second; ``iops_max``/``bps_max`` the burst rate a full bucket allows for ``*_max_length_s``
    seconds; ``iops_rd`` and the like: the per-direction limits, which the suite never sets."""

    iops: int = 0
    bps: int = 0
    iops_max: int = 0
    bps_max: int = 0
    iops_max_length_s: int = 0
    bps_max_length_s: int = 0
    iops_rd: int = 0
    iops_wr: int = 0
    bps_rd: int = 0
    bps_wr: int = 0

    @property
    def none(self) -> bool:
        """No limit at all."""
        return not any(getattr(self, f.name) for f in fields(self))

    @property
    def burst_ios(self) -> float:
        """I/Os a full bucket lets through above ``iops`` (QEMU's burst: ``iops_max`` for
        ``iops_max_length`` s); 0 where no burst above the limit was set."""
        return max(0, self.iops_max - self.iops) * max(1, self.iops_max_length_s) if self.iops_max else 0

    @property
    def burst_bytes(self) -> float:
        return max(0, self.bps_max - self.bps) * max(1, self.bps_max_length_s) if self.bps_max else 0

    def describe(self) -> str:
        """``iops=200, bps=0`` and whatever else is set; "no limit" where none is."""
        if self.none:
            return "no limit"
        shown = [f"{f.name.removesuffix('_s')}={getattr(self, f.name)}" for f in fields(self)
                 if getattr(self, f.name) or f.name in ("iops", "bps")]
        return ", ".join(shown)


#: query-block's field of each ThrottleLimits field.
_QMP_FIELDS = {f.name: f.name.removesuffix("_s") for f in fields(ThrottleLimits)}


def parse_throttle(inserted: Mapping[str, Any], source: str) -> ThrottleLimits:
    """The limits in one ``query-block`` entry's ``inserted`` object; ParseError naming ``source``
    and the field where one is not a whole number or the mandatory ``iops``/``bps`` are missing."""
    for key in ("iops", "bps"):
        if key not in inserted:
            raise ParseError(f"{source}: inserted has no {key!r} (QEMU reports every disk's limits, 0 where none)")
    values: dict[str, int] = {}
    for name, key in _QMP_FIELDS.items():
        value = inserted.get(key, 0)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ParseError(f"{source}: inserted.{key} is {value!r}, not a whole number of at least 0")
        values[name] = value
    return ThrottleLimits(**values)


def qmp_arguments(limits: ThrottleLimits) -> dict[str, object]:
    """QMP ``block_set_io_throttle``'s arguments for ``limits`` but the block backend's ``id`` (its field
    names; the burst lengths only where a burst is set: QEMU refuses a length without its rate)."""
    out: dict[str, object] = {}
    for f in fields(limits):
        value = getattr(limits, f.name)
        if value or f.name in NO_LIMITS:
            out[f.name.removesuffix("_s")] = value
    return out
