"""Whose bug a failing verdict is: the hypervisor, the guest's driver or the guest's configuration.

Each setting a rule depends on is followed through the layers that could have changed it, each
read at its own time (a :class:`Trail`):

1. what the suite **asked** the hypervisor for (``ConfiguredLimits``);
2. what the hypervisor says the device **advertises** (``model.advertised.Advertised``: QMP
   ``qom-get`` on QEMU, the VM's device config on vSphere), read before the rules run;
3. what the guest's driver made of it when the disk was **probed** (sysfs when the suite first
   found the disk, before any ``--inject`` fault or ``--guest-setup`` command);
4. the guest's setting **now**, when the rule ran.

The layer at fault is the first where a setting the rule depends on (its module's ``BLAME``, a
:class:`BlameSettings`) changed:

- ``hypervisor``: the device advertised something other than what was asked (``cmd_per_lun`` 1
  where 128 was asked);
- ``guest driver``: the device advertised it, and the guest's probe-time view differs;
- ``guest configuration``: the probe-time view was right, and a setting was changed after boot
  (a fault, a ``--guest-setup`` command, an image's own tuning);
- ``unknown``: no layer can be singled out: the hypervisor did not say what it advertises and the
  guest's probe-time view differs from what was asked (the hypervisor or the driver), or every
  setting the rule depends on is the same at every layer (the failure is in the I/O path itself).

A failure is never blamed on the hypervisor unless the hypervisor said the value. A rule's own
evidence may name a layer too (queue-depth's cgroup ``io.max``, which no sysfs setting shows):
it is used where the settings single out none.

Example::

    trails = disk_trails("dut disk sdb", asked, advertised, probed, now)
    layer_at_fault(queue_depth.BLAME, trails).layer  # "hypervisor" where cmd_per_lun was 1 and 128 was asked
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from model.advertised import Advertised
from model.device_limits import ConfiguredLimits, GuestLimits

Layer = Literal["hypervisor", "guest driver", "guest configuration", "unknown"]
#: The layers in the order they are blamed: the first that changed a setting is the cause.
LAYERS: tuple[Layer, ...] = ("hypervisor", "guest driver", "guest configuration", "unknown")


@dataclass(frozen=True)
class BlameSettings:
    """What a rule's verdict depends on, which each rule module declares (its ``BLAME``): the settings
    (the ``key`` of a :class:`Trail`) a change of which can explain its failure, and whether the rule
    judges the probe-time view only (what the device advertised), never a setting changed after boot."""

    keys: frozenset[str]
    probe_time_only: bool = False


@dataclass(frozen=True)
class Trail:
    """One setting of one disk at each layer, in the guest's units ("write back", KiB).
    ``asked`` None: the suite asks for no value (a guest-only setting, or one the hypervisor leaves
    open); ``advertised`` None: the hypervisor did not say (``not_said`` says why); ``now`` None: not read."""

    disk: str  # "dut disk sdb"
    key: str  # "queue_depth"
    setting: str  # "queue depth"
    asked: object
    advertised: object
    probed: object
    now: object = None
    said_by: str = ""  # "cmd_per_lun 1 of /machine/peripheral/ua-vioc-virtio-scsi/virtio-backend"
    not_said: str = ""

    @property
    def hypervisor_differs(self) -> bool:
        return self.asked is not None and self.advertised is not None and self.advertised != self.asked

    @property
    def driver_differs(self) -> bool:
        """The device said it, and the guest's driver saw something else at probe time."""
        return self.advertised is not None and self.asked is not None and self.probed != self.advertised

    @property
    def undetermined(self) -> bool:
        """Not as asked at probe time, and the hypervisor did not say what the device advertised."""
        return self.asked is not None and self.advertised is None and self.probed != self.asked

    @property
    def changed_after_probe(self) -> bool:
        return self.now is not None and self.now != self.probed


@dataclass(frozen=True)
class Blame:
    """The layer at fault and the sentence that says why."""

    layer: Layer
    reason: str


#: ConfiguredLimits/Advertised field, the guest's key and the limit's words.
_LIMITS = (("queue_depth", "queue_depth", "queue depth"),
           ("max_transfer_bytes", "max_hw_sectors_kb", "maximum transfer (KiB)"),
           ("logical_block_bytes", "logical_block_size", "logical block size"),
           ("physical_block_bytes", "physical_block_size", "physical block size"),
           ("optimal_io_bytes", "optimal_io_size", "optimal I/O size"),
           ("write_cache", "write_cache", "write cache"),
           ("discard", "discard", "discard"),
           ("queues", "nr_hw_queues", "hardware queues"))
#: The guest's keys of the limits a hypervisor advertises (the limits rule's rows).
LIMIT_KEYS = tuple(key for _, key, _ in _LIMITS)
#: Settings the guest alone decides (no value is asked of the hypervisor for them), changed after boot
#: by a fault or a --guest-setup command: the guest's key and the setting's words.
_GUEST_ONLY = (("nr_requests", "queue/nr_requests"), ("max_sectors_kb", "queue/max_sectors_kb"),
               ("read_ahead_kb", "queue/read_ahead_kb"), ("io_timeout_ms", "queue/io_timeout (ms)"))
#: Every setting a :class:`Trail` follows (its ``key``): what a rule's ``BLAME`` may name.
TRAIL_KEYS = LIMIT_KEYS + tuple(key for key, _ in _GUEST_ONLY)


def in_guest_units(limit: str, value: object) -> object:
    """A ConfiguredLimits/Advertised value as the guest shows it: a transfer in KiB, a write cache
    as "write back"/"write through"; None stays None."""
    if value is None:
        return None
    if limit == "max_transfer_bytes":
        return int(value) // 1024 if isinstance(value, int) and value else None
    if limit == "write_cache":
        return "write back" if value else "write through"
    return value


def guest_value(key: str, lim: GuestLimits) -> object:
    """The guest's value of a trail's setting: a SCSI disk's queue depth is its ``device/queue_depth``,
    any other disk's its ``queue/nr_requests``; discard is whether ``discard_max_bytes`` is above 0."""
    if key == "queue_depth":
        return lim.scsi_queue_depth if lim.scsi_queue_depth is not None else lim.nr_requests
    if key == "discard":
        return lim.discard_max_bytes > 0
    return getattr(lim, key)


def disk_trails(disk: str, asked: ConfiguredLimits, advertised: Advertised | None, probed: GuestLimits,
                now: GuestLimits | None = None) -> list[Trail]:
    """Every setting of one disk through the layers (:class:`Trail`), in the guest's units."""
    adv = advertised or Advertised()
    out = []
    for limit, key, words in _LIMITS:
        said = in_guest_units(limit, adv.value(limit))
        out.append(Trail(disk, key, words, in_guest_units(limit, getattr(asked, limit)), said,
                         guest_value(key, probed), guest_value(key, now) if now is not None else None,
                         adv.said_by.get(limit, ""), "" if said is not None else adv.why_not_said(limit)))
    for key, words in _GUEST_ONLY:
        if key == "nr_requests" and probed.scsi_queue_depth is None:
            continue  # the disk's queue depth itself (the limit above)
        value = getattr(probed, key)
        if value is not None:
            out.append(Trail(disk, key, words, None, None, value, getattr(now, key) if now is not None else None))
    return out


def _value(v: object) -> str:
    return str(v)


def layer_at_fault(settings: BlameSettings | None, trails: Iterable[Trail], hint: Blame | None = None) -> Blame:
    """The layer at fault for a failing verdict of a rule that depends on ``settings`` (its module's
    ``BLAME``; None: a rule no module declares, which depends on every setting) (module docstring): the
    first layer at which a setting the rule depends on changed, else the rule's own ``hint``, else unknown.
    ``model.rules.blame`` looks a rule's settings up by its name."""
    relevant = [t for t in trails if settings is None or t.key in settings.keys]
    probe_only = settings is not None and settings.probe_time_only
    hyp = [t for t in relevant if t.hypervisor_differs]
    if hyp:
        return Blame("hypervisor", "; ".join(
            f"{t.disk}: the device advertises {t.setting} {_value(t.advertised)} ({t.said_by}) where the suite "
            f"asked for {_value(t.asked)}" for t in hyp))
    drv = [t for t in relevant if t.driver_differs]
    if drv:
        return Blame("guest driver", "; ".join(
            f"{t.disk}: the device advertises {t.setting} {_value(t.advertised)} as asked ({t.said_by}), and the "
            f"guest's driver set {_value(t.probed)} when it probed the disk" for t in drv))
    undecided = [t for t in relevant if t.undetermined]
    if undecided:
        return Blame("unknown", "; ".join(
            f"{t.disk}: the guest saw {t.setting} {_value(t.probed)} when it probed the disk where the suite asked "
            f"for {_value(t.asked)}, and the hypervisor did not say what the device advertises ({t.not_said}): "
            "the hypervisor or the guest's driver" for t in undecided))
    changed = [] if probe_only else [t for t in relevant if t.changed_after_probe]
    if changed:
        return Blame("guest configuration", "; ".join(
            f"{t.disk}: {t.setting} was {_value(t.probed)} when the guest probed the disk and is {_value(t.now)} "
            "now: changed after boot (a fault, a --guest-setup command or the image's own tuning)" for t in changed))
    if hint is not None:
        return hint
    if not relevant:
        return Blame("unknown", "no setting of the rule's disks was read: no layer can be singled out")
    said = [t for t in relevant if t.asked is not None]
    unsaid = [t.setting for t in said if t.advertised is None]
    checked = ", ".join(dict.fromkeys(t.setting for t in relevant)) or "none"
    return Blame("unknown", f"every setting this rule depends on ({checked}) is the same at each layer that "
                 "was read" + (f" (the hypervisor did not say {', '.join(dict.fromkeys(unsaid))})" if unsaid else "")
                 + ": the failure is in the I/O path itself, which these settings do not single out")

