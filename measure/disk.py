"""A disk under test as the guest sees it, and how it is set up: found by its serial, faults and
``--guest-setup`` commands applied, limits read. One function does that for the suite's session
and for a standalone guest (benchmarks, tests)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from guest.tools.base import GuestTool, GuestTools
from guest.tools.fio import Fio
from guest.tools.sysfs import Sysfs
from hypervisors.base import Guest, HypervisorBackend
from model.blockstats import HostBlockCounters
from model.errors import HypervisorError
from model.faults import Fault, SysfsSetting
from model.limits import GuestLimits
from model.types import AttachedDisk
from transport.ssh import CommandResult, GuestCommandError

log = logging.getLogger("vioconform.disk")

T = TypeVar("T", bound=GuestTool)


@dataclass(frozen=True)
class GuestSetupCommand:
    """A ``--guest-setup`` command, ``{disk}`` already replaced: the user's own shell command, the
    one place the suite runs a shell string it did not build."""

    command: str


#: What set a disk up, in order: a fault's sysfs setting or a user's command.
DiskSetting = SysfsSetting | GuestSetupCommand


class FaultNotApplicable(Exception):
    """An ``--inject`` fault this disk cannot carry, or that did not take: the rules on the disk
    skip with this reason (they would pass or fail for the wrong cause)."""


@dataclass
class GuestDisk:
    """A disk under test as the guest sees it: kernel name, limits, the guest's tools, the host side."""

    guest: Guest
    backend: HypervisorBackend
    tools: GuestTools
    attached: AttachedDisk
    kernel_name: str
    limits: GuestLimits
    config_id: str  # "libvirt:virtio-scsi:latency5ms"
    #: the limits as the driver set them when the disk was found, before any ``--inject`` fault
    #: or ``--guest-setup`` command: what the device advertised (the limits rule compares these)
    probed_limits: GuestLimits | None = None
    #: what set this disk up (faults, --guest-setup), in order
    settings: list[DiskSetting] = field(default_factory=list)

    @property
    def device_path(self) -> str:
        return f"/dev/{self.kernel_name}"

    @property
    def advertised_limits(self) -> GuestLimits:
        """The as-probed limits, or the current ones where none were kept."""
        return self.probed_limits or self.limits

    def tool(self, tool: type[T]) -> T:
        """The guest's ``tool`` (``disk.tool(Fio)``); ToolMissing if the guest lacks its programs."""
        return self.tools.get(tool)

    def host_counters(self) -> HostBlockCounters:
        return self.backend.host_counters(self.guest, self.attached)

    def read_limits(self) -> GuestLimits:
        self.limits = self.tool(Sysfs).limits(self.kernel_name)
        return self.limits

    def apply(self, setting: DiskSetting, check: bool = True) -> CommandResult:
        """Apply one setting to this disk (a fault's sysfs value, or run a user's command)."""
        if isinstance(setting, SysfsSetting):
            return self.tool(Sysfs).write(self.kernel_name, setting.path, setting.value, check=check)
        return self.tools.shell.run(setting.command, check=check)

    def reapply_settings(self) -> None:
        """Apply the disk's faults and --guest-setup commands again. A rule that makes the guest
        revalidate the disk (re-reading its partition table) must: Linux's sd then reads the
        device's cache mode again and resets ``queue/write_cache`` (seen: flush-dropped undone)."""
        for setting in self.settings:
            self.apply(setting, check=False)
        self.read_limits()


def render(command: str, disk: str) -> str:
    """A ``--guest-setup`` command with ``{disk}`` replaced by the kernel name of the disk under test."""
    return command.replace("{disk}", disk)


def prepare_disk(guest: Guest, backend: HypervisorBackend, tools: GuestTools, attached: AttachedDisk,
                 config_id: str, faults: Sequence[Fault] = (), guest_setup: Sequence[str] = ()) -> GuestDisk:
    """Find the disk in the guest by its ``guest_id`` (serial or WWN), keep the limits its driver
    set, apply ``faults`` and then the ``guest_setup`` commands, and check that the guest has fio.

    HypervisorError if the guest does not show the disk or a --guest-setup command fails,
    FaultNotApplicable if a fault cannot apply or does not take, ToolMissing without fio."""
    sysfs = tools.get(Sysfs)
    try:
        name = sysfs.find_disk(attached.guest_id.value)
    except LookupError as e:
        raise HypervisorError(str(e), guest.console_tail()) from e
    limits = sysfs.limits(name)
    disk = GuestDisk(guest, backend, tools, attached, name, limits, config_id, probed_limits=limits)
    for fault in faults:
        if fault.setting is None:  # the rule prepares the disk with the fault itself
            continue
        reason = fault.cannot_apply(limits)
        if reason:
            raise FaultNotApplicable(f"--inject {fault.name}: {reason}")
        applied = disk.apply(fault.setting, check=False)
        disk.settings.append(fault.setting)
        reason = fault.not_effective(disk.read_limits())
        if reason:
            said = applied.stderr.strip().splitlines()[-1:] if not applied.ok else []
            raise FaultNotApplicable(f"--inject {fault.name}: {reason}" + (f" ({said[0]})" if said else ""))
        if not applied.ok:
            raise GuestCommandError(applied, f"applying fault {fault.name} ({fault.setting.describe(name)})")
    for command in guest_setup:
        setting = GuestSetupCommand(render(command, name))
        disk.settings.append(setting)
        try:
            disk.apply(setting)
        except GuestCommandError as e:
            raise HypervisorError(f"--guest-setup command failed on {name}: {e}") from e
    if guest_setup:
        tools.forget()  # the commands may have added or removed programs
        disk.read_limits()
    tools.get(Fio)  # every rule but limits runs fio: without it, a set-up error now
    return disk
