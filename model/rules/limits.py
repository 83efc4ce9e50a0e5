"""Rule 6, limits advertisement: the guest's view of a disk against the hypervisor's configuration.

For each limit the hypervisor configured (queue depth, maximum transfer, logical and
physical block size, optimal I/O size, write cache, discard, queues) the guest must see the
same value, read from sysfs as the driver set it when the disk was probed (before any
``--inject`` fault or ``--guest-setup`` command: those are guest settings, not what the
device advertises). A limit the hypervisor leaves unset is shown, not compared.

Example::

    v = judge_limits([("scratch", configured, guest_view)])
    v.problems  # ('scratch sdb: physical block size: configured 4096, guest sees 512', ...)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from model.limits import ConfiguredLimits, GuestLimits
from model.rules.verdict import Number, RuleVerdict

RULE = "limits"


@dataclass(frozen=True)
class LimitComparison:
    limit: str
    key: str
    configured: object  # None: the hypervisor does not set it
    guest: object

    @property
    def compared(self) -> bool:
        return self.configured is not None

    @property
    def matches(self) -> bool:
        return not self.compared or self.configured == self.guest


def compare_limits(cfg: ConfiguredLimits, guest: GuestLimits) -> list[LimitComparison]:
    """Every advertised limit, configured value against the guest's (in the guest's units)."""
    depth = guest.scsi_queue_depth if guest.scsi_queue_depth is not None else guest.nr_requests
    return [
        LimitComparison("queue depth", "queue_depth", cfg.queue_depth, depth),
        LimitComparison("maximum transfer (KiB)", "max_hw_sectors_kb",
                        cfg.max_transfer_bytes // 1024 if cfg.max_transfer_bytes else None, guest.max_hw_sectors_kb),
        LimitComparison("logical block size", "logical_block_size", cfg.logical_block_bytes, guest.logical_block_size),
        LimitComparison("physical block size", "physical_block_size", cfg.physical_block_bytes,
                        guest.physical_block_size),
        LimitComparison("optimal I/O size", "optimal_io_size", cfg.optimal_io_bytes, guest.optimal_io_size),
        LimitComparison("write cache", "write_cache",
                        None if cfg.write_cache is None else ("write back" if cfg.write_cache else "write through"),
                        guest.write_cache),
        LimitComparison("discard", "discard", cfg.discard, guest.discard_max_bytes > 0),
        LimitComparison("hardware queues", "nr_hw_queues", cfg.queues, guest.nr_hw_queues),
    ]


def judge_limits(disks: Sequence[tuple[str, ConfiguredLimits, GuestLimits]]) -> RuleVerdict:
    """``disks``: (role, configured, guest view) for each disk of one controller."""
    lines: list[str] = []
    problems: list[str] = []
    notes: list[str] = []
    props: dict[str, Number] = {}
    for role, cfg, guest in disks:
        shown = []
        for c in compare_limits(cfg, guest):
            props[f"{role}_{c.key}_guest"] = str(c.guest)
            if c.compared:
                props[f"{role}_{c.key}_configured"] = str(c.configured)
                shown.append(f"{c.limit} {c.guest}" + ("" if c.matches else f" (configured {c.configured})"))
                if not c.matches:
                    problems.append(f"{role} disk {guest.name}: {c.limit}: the hypervisor configured "
                                    f"{c.configured}, the guest sees {c.guest}")
            else:
                shown.append(f"{c.limit} {c.guest} (not configured)")
        lines.append(f"{role} disk {guest.name} ({guest.driver or 'driver unknown'}): " + "; ".join(shown))
        props[f"{role}_disk"] = guest.name
    return RuleVerdict(RULE, tuple(lines), tuple(problems), tuple(notes), props)
