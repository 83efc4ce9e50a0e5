"""A disk under test as the guest sees it, and how it is set up: found by its serial, faults and
``--guest-setup`` commands applied, limits read. One function does that for the suite's session
and for a standalone guest (benchmarks, tests)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from guest.tools.disk_survey import DiskSurvey
from guest.tools.facts import GuestFacts
from guest.tools.fio import Fio
from guest.tools.sysfs import Sysfs
from guest.tools.tool import GuestTool, GuestTools
from hypervisors import guest_driver
from hypervisors.base import Guest, HypervisorBackend
from model.advertised import Advertised
from model.blame import Trail, disk_trails
from model.configuration import Configuration
from model.device_limits import GuestLimits
from model.errors import HypervisorError, ParseError
from model.faults import Fault, SysfsSetting
from model.parse.blockstats import HostBlockCounters
from model.parse.guestfacts import DiskFacts, DriverPresence
from model.parse.hostcpu import VcpuTimes
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


class DiskSkip(Exception):
    """The rules on this disk cannot run on this guest: they skip with this reason (they would
    pass or fail for the wrong cause, or not run at all)."""


class FaultNotApplicable(DiskSkip):
    """An ``--inject`` fault this disk cannot carry, or that did not take: the rules on the disk
    skip with this reason (they would pass or fail for the wrong cause)."""


class DriverMissing(DiskSkip):
    """The guest's kernel has no driver for the disk's controller (Debian's ``cloud`` kernel
    flavour has no ``mptsas``): the rules of that controller skip, naming the module."""


class SettingMissing(DiskSkip):
    """The guest's kernel does not show a block-layer setting the rules need (a file under
    ``/sys/block/<disk>/`` it does not have): the rules on the disk skip, naming it."""


@dataclass
class GuestDisk:
    """A disk under test as the guest sees it: kernel name, limits, the guest's tools, the host side."""

    guest: Guest
    backend: HypervisorBackend
    tools: GuestTools
    attached: AttachedDisk
    kernel_name: str
    limits: GuestLimits
    #: the configuration it is the disk under test of; its ``str()`` is the test id (:attr:`config_id`)
    configuration: Configuration
    #: the limits as the driver set them when the disk was found, before any ``--inject`` fault
    #: or ``--guest-setup`` command: what the device advertised (the limits rule compares these)
    probed_limits: GuestLimits | None = None
    #: what set this disk up (faults, --guest-setup), in order
    settings: list[DiskSetting] = field(default_factory=list)
    #: the disk's drivers, their versions and the block-layer settings the image chose at boot,
    #: read when the disk was found (before faults and --guest-setup); None if the guest could not say
    boot_facts: DiskFacts | None = None
    #: what the hypervisor says the disk's device advertises, asked when the disk was found; None: not asked
    advertised: Advertised | None = None
    #: the disk's kept settings (guest.tools.sysfs.KEPT_SETTINGS) as the last rule left them, set back
    #: where it had changed one (measure/kept.py), or as its set-up read them where no fault or
    #: --guest-setup command changed it since; None where unknown (its first rule reads them)
    kept: dict[str, str] | None = None

    @property
    def config_id(self) -> str:
        """The test id of its configuration, e.g. ``libvirt:virtio-scsi:latency5ms``: its raw data's folder,
        its key in a baseline file, its name in messages."""
        return str(self.configuration)

    @property
    def device_path(self) -> str:
        return f"/dev/{self.kernel_name}"

    @property
    def advertised_limits(self) -> GuestLimits:
        """The as-probed limits, or the current ones where none were kept."""
        return self.probed_limits or self.limits

    @property
    def label(self) -> str:
        """The disk in messages: "dut disk sdb"."""
        return f"{self.attached.spec.role} disk {self.kernel_name}"

    def trails(self) -> list[Trail]:
        """Each setting of this disk as asked, advertised, probed and now (model.blame.Trail): what
        a failing verdict's blame is decided from."""
        return disk_trails(self.label, self.attached.configured, self.advertised, self.advertised_limits, self.limits)

    def tool(self, tool: type[T]) -> T:
        """The guest's ``tool`` (``disk.tool(Fio)``); ToolMissing if the guest lacks its programs."""
        return self.tools.get(tool)

    def host_counters(self) -> HostBlockCounters:
        return self.backend.host_counters(self.guest, self.attached)

    def vcpu_times(self) -> VcpuTimes | None:
        """The guest's vCPU threads' host CPU and run-queue wait so far (model.parse.hostcpu), or None."""
        return self.backend.vcpu_times(self.guest)

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
        device's cache mode again and resets ``queue/write_cache`` (which would undo flush-dropped)."""
        for setting in self.settings:
            self.apply(setting, check=False)
        self.read_limits()


def kernel_of(tools: GuestTools) -> str:
    """The guest's kernel release, for messages ("6.1.0-28-cloud-amd64"); "(unknown)" if it cannot say."""
    try:
        return tools.get(GuestFacts).system().kernel
    except (GuestCommandError, ParseError) as e:
        log.warning("cannot read the guest's kernel release: %s", e)
        return "(unknown)"


def read_facts(tools: GuestTools, disk: str) -> DiskFacts | None:
    """The disk's drivers, versions and boot settings now; None (logged) if the guest cannot say:
    what was tested is a record, never a reason to stop the run."""
    try:
        return tools.get(GuestFacts).disk(disk)
    except (GuestCommandError, ParseError) as e:
        log.warning("cannot read the facts of %s: %s", disk, e)
        return None


def surveyed(read: GuestLimits | ParseError | None, again: Callable[[], GuestLimits]) -> GuestLimits:
    """The limits the survey read (its ParseError raised), or where it read none, ``again()``'s."""
    if isinstance(read, ParseError):
        raise read
    return read if read is not None else again()


def facts_of(read: DiskFacts | ParseError | None, disk: str) -> DiskFacts | None:
    """The facts the survey read; None (logged) where they could not be read, as ``read_facts``."""
    if isinstance(read, ParseError):
        log.warning("cannot read the facts of %s: %s", disk, read)
        return None
    return read


def driver_presence(backend: HypervisorBackend, tools: GuestTools, controller: str) -> DriverPresence | None:
    """Whether the guest's kernel has the driver of ``controller`` (the backend's controller table
    names it); None where the table names none or the guest cannot answer."""
    module = guest_driver(backend.name, controller)
    if not module:
        return None
    try:
        return tools.get(GuestFacts).driver(module)
    except (GuestCommandError, ParseError) as e:
        log.warning("cannot ask the guest for driver %s: %s", module, e)
        return None


def missing_driver(found: DriverPresence, controller: str) -> str | None:
    """Why a controller's disk is missing when its driver is: "the guest's kernel 6.1.0-28-cloud-amd64
    has no mptsas driver for mptsas1068 ..."; None if the driver exists, or the guest cannot tell
    (then the disk's absence has another cause, and stays an error)."""
    if found.present or not found.known:
        return None
    m, k = found.module, found.kernel
    return (f"the guest's kernel {k} has no {m} driver for {controller} (not loaded, not in modules.builtin, "
            f"no {m}.ko under /lib/modules/{k}): use an image whose kernel has it (Debian's cloud kernel flavour, "
            "for one, lacks mptsas) or leave this controller out of --controllers")


def ask_advertised(backend: HypervisorBackend, guest: Guest, attached: AttachedDisk) -> Advertised:
    """What the hypervisor says the disk's device advertises; where it cannot be asked, an answer
    that says why (logged): a record for the blame, never a reason to stop the run."""
    try:
        return backend.advertised(guest, attached)
    except Exception as e:  # noqa: BLE001 - libvirt and pyVmomi raise their own errors; none may stop the run
        said = str(e).splitlines()[0] if str(e) else type(e).__name__
        log.warning("cannot ask the hypervisor what %s advertises: %s", attached.spec.label, said)
        return Advertised(unavailable=said)


def render(command: str, disk: str) -> str:
    """A ``--guest-setup`` command with ``{disk}`` replaced by the kernel name of the disk under test."""
    return command.replace("{disk}", disk)


def prepare_disk(guest: Guest, backend: HypervisorBackend, tools: GuestTools, attached: AttachedDisk,
                 configuration: Configuration, faults: Sequence[Fault] = (), guest_setup: Sequence[str] = (),
                 on_found: Callable[[DiskFacts], None] | None = None,
                 on_advertised: Callable[[Advertised], None] | None = None) -> GuestDisk:
    """Find the disk in the guest by its ``guest_id`` (serial or WWN), keep the limits its driver
    set, ask the hypervisor what the disk's device advertises, apply ``faults`` and then the
    ``guest_setup`` commands, and check that the guest has fio. ``on_found`` is given the disk's
    facts (drivers, boot settings) and ``on_advertised`` the hypervisor's answer as soon as they
    are read, before anything that may skip the disk.

    HypervisorError if the guest does not show the disk or a --guest-setup command fails,
    DriverMissing if it does not show it because its kernel has no driver for the controller,
    SettingMissing if its kernel lacks a setting the limits need, FaultNotApplicable if a fault
    cannot apply or does not take, ToolMissing without fio."""
    sysfs = tools.get(Sysfs)
    ident = attached.guest_id.value
    survey = tools.get(DiskSurvey).survey(ident)  # name, limits and facts in one guest command
    try:
        name = survey.name or sysfs.one_disk(ident, list(survey.names))
    except LookupError as e:
        found = driver_presence(backend, tools, attached.spec.controller)
        missing = missing_driver(found, attached.spec.controller) if found else None
        if missing:
            raise DriverMissing(missing) from e
        hint = ""
        if found is not None and found.present and not found.loaded:
            hint = (f"; its driver {found.module} is in the guest's kernel but not loaded: the image did not load it "
                    f"at boot (add it to the image's modules to load, e.g. /etc/modules-load.d/)")
        raise HypervisorError(f"{e}{hint}", guest.console_tail()) from e
    try:
        limits = surveyed(survey.limits, lambda: sysfs.limits(name))
    except ParseError as e:
        raise SettingMissing(f"{name}: {e}; the guest's kernel {kernel_of(tools)} lacks a setting the rules "
                             "read") from e
    facts = facts_of(survey.facts, name) if survey.name else read_facts(tools, name)
    if facts is not None and on_found is not None:
        on_found(facts)
    advertised = ask_advertised(backend, guest, attached)
    if on_advertised is not None:
        on_advertised(advertised)
    disk = GuestDisk(guest, backend, tools, attached, name, limits, configuration, probed_limits=limits,
                     boot_facts=facts, advertised=advertised)
    for fault in faults:
        if fault.setting is None:  # the rule prepares the disk with the fault itself
            continue
        reason = fault.cannot_apply(limits)
        if reason:
            raise FaultNotApplicable(f"--inject {fault.name}: {reason}")
        if not sysfs.exists(name, fault.setting.path):
            raise FaultNotApplicable(f"--inject {fault.name}: the guest's kernel {kernel_of(tools)} has no "
                                     f"/sys/block/{name}/{fault.setting.path}: the fault cannot apply")
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
    if not disk.settings and survey.name:
        disk.kept = survey.kept  # as the survey read them: the first rule needs no read of its own
    tools.get(Fio)  # every rule but limits runs fio: without it, a set-up error now
    return disk
