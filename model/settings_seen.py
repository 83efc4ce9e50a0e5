"""Whether each disk setting asked (``--disk``, ``--profile``) took, as the hypervisor shows it:
one ``SettingSeen`` per setting, recorded in the run's properties, and an error naming those that
did not take, so that no rule trusts them. Each backend reads its own side
(hypervisors/libvirt/settings_check.py, hypervisors/vsphere/disk_settings.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from model.errors import HypervisorError
from model.types import DiskSpec


@dataclass(frozen=True)
class SettingSeen:
    """One asked setting: ``took`` (what the host shows is what was asked), ``missing`` (it shows
    something else) or ``not-applicable`` (the disk has no such thing: aio on the null-co disk)."""

    key: str
    asked: str
    status: Literal["took", "missing", "not-applicable"]
    seen: str

    def line(self) -> str:
        return f"{self.status}: {self.seen}"


def properties(checked: dict[DiskSpec, list[SettingSeen]]) -> dict[str, str]:
    """The run's properties of what took: ``disk.<controller>[.<role>].setting.<key>`` (the dut's
    without its role, as the advertised limits are recorded), each ``<status>: <what was seen>``."""
    out = {}
    for disk, seen in checked.items():
        own = f"disk.{disk.controller}" if disk.role == "dut" else f"disk.{disk.controller}.{disk.role}"
        out.update({f"{own}.setting.{s.key}": f"{s.asked} {s.line()}" for s in seen})
    return out


def raise_if_missing(checked: dict[DiskSpec, list[SettingSeen]]) -> None:
    """HypervisorError naming every asked setting the host does not show: no rule may trust the disk."""
    missing = [f"{d.label} disk {d.index}: {s.key}={s.asked} did not take ({s.seen})"
               for d, seen in checked.items() for s in seen if s.status == "missing"]
    if missing:
        raise HypervisorError("the host does not show every disk setting asked (--disk, --profile):\n  "
                              + "\n  ".join(missing))
