"""Rule 6, limits advertisement: the guest's view of a disk against what the suite asked of the
hypervisor, and what the hypervisor says the device advertises.

For each limit the suite asks for (queue depth, maximum transfer, logical and physical block size,
optimal I/O size, write cache, discard, queues) the guest must see the asked value, read from
sysfs as the driver set it when the disk was probed (before any ``--inject`` fault or
``--guest-setup`` command: those are guest settings, not what the device advertises). A limit the
suite leaves to the hypervisor is shown, not compared. Beside both stands the hypervisor's own
answer (``model.advertised.Advertised``): a mismatch names the layer at fault (``model/blame.py``):
the hypervisor where the device advertises something other than asked, the guest's driver where
the device advertises the asked value and the guest sees another, unknown where the hypervisor did
not say. "The hypervisor advertises X" is said only where the hypervisor said X.

Example::

    v = judge_limits([("scratch", asked, guest_view, advertised)])
    v.problems  # ('scratch disk sdb: queue depth: the suite asked for 128, the device advertises 1 ...',)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from model.advertised import Advertised
from model.blame import LIMIT_KEYS, BlameSettings, Trail, disk_trails, layer_at_fault
from model.device_limits import ConfiguredLimits, GuestLimits
from model.judging.spec import PARAM, Metrics, MetricSpec
from model.judging.verdict import Number, RuleVerdict

RULE = "limits"
#: The settings (model/blame.py's trail keys) the rule's verdict depends on, and that it judges
#: the probe-time view only (what the device advertised), never a setting changed after boot.
BLAME = BlameSettings(frozenset({"queue_depth", "max_hw_sectors_kb", "logical_block_size", "physical_block_size",
                                "optimal_io_size", "write_cache", "discard", "nr_hw_queues"}),
                      probe_time_only=True)
#: It reads settings, which do not vary: one read, whatever --repeats says.
DEFAULT_REPEATS = 1
REPEATABLE = False
#: Which of its metrics follow the host CPU the guest gets (model/across/contention.py).
HOST_CPU_BOUND: tuple[str, ...] = ()

#: The roles of the disks the rule reads (model/disks.py: the disk under test and the scratch disk).
ROLES = ("dut", "scratch")
_ROLE = "(" + "|".join(ROLES) + ")_"

#: What the rule records (model/judging/spec.py), as text: per disk role and limit (model/blame.py's
#: LIMIT_KEYS) the guest's view, the asked ("configured") value and the hypervisor's answer, and
#: the disk's kernel name.
METRICS: Metrics = (
    (_ROLE + "(" + "|".join(k for k in LIMIT_KEYS if not k.endswith("_block_size")) + ")_(guest|configured|advertised)",
     MetricSpec("", PARAM)),  # the block sizes: model/across/metrics.py's SHARED_METRICS (block-size's too)
    (_ROLE + "disk", MetricSpec("", PARAM)),
)
#: Nothing the rule records is a measured quantity: no minimum effect to measure.
MIN_EFFECTS: Mapping[str, float] = {}


@dataclass(frozen=True)
class LimitComparison:
    limit: str
    key: str
    configured: object  # what the suite asked for; None: it asks for no value
    guest: object
    advertised: object = None  # what the hypervisor says the device advertises; None: not said
    said_by: str = ""

    @property
    def compared(self) -> bool:
        return self.configured is not None

    @property
    def matches(self) -> bool:
        return not self.compared or self.configured == self.guest


def _comparison(t: Trail) -> LimitComparison:
    return LimitComparison(t.setting, t.key, t.asked, t.probed, t.advertised, t.said_by)


def compare_limits(cfg: ConfiguredLimits, guest: GuestLimits,
                   advertised: Advertised | None = None) -> list[LimitComparison]:
    """Every advertised limit: the asked value, the hypervisor's answer and the guest's (in the guest's units)."""
    return [_comparison(t) for t in disk_trails("", cfg, advertised, guest) if t.key in LIMIT_KEYS]


def _problem(name: str, t: Trail) -> str:
    """One limit the guest does not see as asked, with the layer at fault."""
    b = layer_at_fault(BLAME, [t])
    if t.hypervisor_differs:
        said = f"the suite asked for {t.asked}, the device advertises {t.advertised} ({t.said_by}), the guest sees"
    elif t.advertised is not None:
        said = f"the device advertises {t.advertised} as asked ({t.said_by}), the guest's driver sees"
    else:
        said = f"the suite asked for {t.asked}, the hypervisor did not say what the device advertises ({t.not_said}), " \
               "the guest sees"
    return f"{name}: {t.setting}: {said} {t.probed} [blame: {b.layer}]"


def judge_limits(disks: Sequence[tuple[str, ConfiguredLimits, GuestLimits]
                                 | tuple[str, ConfiguredLimits, GuestLimits, Advertised | None]]) -> RuleVerdict:
    """``disks``: (role, asked, the guest's probe-time view[, the hypervisor's answer]) for each disk
    of one controller."""
    lines: list[str] = []
    problems: list[str] = []
    notes: list[str] = []
    props: dict[str, Number] = {}
    for entry in disks:
        role, cfg, guest = entry[0], entry[1], entry[2]
        advertised = entry[3] if len(entry) > 3 else None
        shown = []
        name = f"{role} disk {guest.name}"
        for t in disk_trails(name, cfg, advertised, guest):
            if t.key not in LIMIT_KEYS:
                continue
            props[f"{role}_{t.key}_guest"] = str(t.probed)
            if advertised is not None:
                props[f"{role}_{t.key}_advertised"] = "not said" if t.advertised is None else str(t.advertised)
            said = "" if t.advertised is None or t.advertised == t.asked else f", advertised {t.advertised}"
            if t.asked is not None:
                props[f"{role}_{t.key}_configured"] = str(t.asked)
                ok = t.asked == t.probed
                shown.append(f"{t.setting} {t.probed}" + ("" if ok and not said else f" (asked {t.asked}{said})"))
                if not ok:
                    problems.append(_problem(name, t))
                elif t.hypervisor_differs:  # the guest sees what was asked: the answer is read, not judged
                    notes.append(f"{name}: {t.setting}: the device advertises {t.advertised} ({t.said_by}) where "
                                 f"the suite asked for {t.asked}, yet the guest sees {t.probed}")
            else:
                shown.append(f"{t.setting} {t.probed} (not configured{said})")
        lines.append(f"{name} ({guest.driver or 'driver unknown'}): " + "; ".join(shown))
        if advertised is not None:
            lines.append(f"{name}: what the device advertises, from {advertised.source or 'nowhere'}"
                         + (f" ({advertised.unavailable})" if advertised.unavailable else "") + ": "
                         + ("; ".join(f"{k}: {v}" for k, v in sorted(advertised.said_by.items())) or "nothing said"))
            notes.extend(f"{name}: {n}" for n in advertised.notes)
        props[f"{role}_disk"] = guest.name
    return RuleVerdict(RULE, tuple(lines), tuple(problems), tuple(notes), props)
