"""What every hypervisor backend provides, and the shared part of starting a guest.

A backend owns the VM lifecycle and the host-side numbers. Rules never see a libvirt or
pyVmomi object: they get a ``Guest`` (an SSH endpoint and its disks under test) and call
``backend.host_counters(guest, disk)``.

A backend implements the underscored steps; the public methods here do the logging,
timing and cleanup registration (the pattern of lisa's ``deploy_environment``).
"""

from __future__ import annotations

import logging
import re
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Protocol, Self

from hypervisors.cleanup import CleanupStack
from model.advertised import Advertised
from model.device_limits import ConfiguredLimits
from model.error_injection import ErrorPolicy, InjectedRange
from model.errors import HypervisorError
from model.host_cache import HostCache
from model.parse.backend_writes import BackendWrite
from model.parse.blockstats import HostBlockCounters, HostRequestOutcomes, HostUnmapCounters
from model.parse.hostcpu import VcpuTimes
from model.parse.stall_evidence import HostEvent
from model.parse.throttle_limits import ThrottleLimits
from model.settings_seen import SettingSeen
from model.types import AttachedDisk, DiskImageInfo, DiskSpec, HostTrace, SshEndpoint

if TYPE_CHECKING:
    from images.kernels import AptKernel

log = logging.getLogger("vioconform.hypervisor")


#: Linux's panic line on the console: "Kernel panic - not syncing: sysrq triggered crash"
_PANIC = re.compile(r"Kernel panic - not syncing:? *(.*)")


def kernel_panic(console: str) -> str | None:
    """The reason of the first kernel panic in console text, as a cause for ``GuestDied``, or None."""
    m = _PANIC.search(console)
    if m is None:
        return None
    return f"its kernel panicked (console: \"Kernel panic - not syncing: {m.group(1).strip()}\")"


@dataclass
class Guest:
    """A running guest VM the suite started (or was pointed at)."""

    name: str
    ssh: SshEndpoint
    disks: tuple[AttachedDisk, ...]
    accel: str  # "kvm", "tcg", "vsphere"
    console_log_path: Path | None = None
    boot_seconds: float = 0.0
    #: the user's image it booted from (``--image``), or None for the embedded guest / a template
    image: DiskImageInfo | None = None
    #: asks the hypervisor why the guest's VM no longer runs (None while it runs); set by
    #: ``HypervisorBackend.start_guest``
    vm_dead_reason: Callable[[], str | None] | None = field(default=None, repr=False, compare=False)

    def console_tail(self, lines: int = 60) -> str:
        if self.console_log_path is None or not self.console_log_path.exists():
            return "(no console log)"
        text = self.console_log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def dead_reason(self) -> str | None:
        """Why the guest can no longer answer, or None while it may: its kernel panicked (its
        console says so) or its VM stopped (``vm_dead_reason``). Cheap enough to ask every few seconds."""
        reason = kernel_panic(self._console_end())
        if reason is None and self.vm_dead_reason is not None:
            reason = self.vm_dead_reason()
        return reason

    def _console_end(self, size: int = 65536) -> str:
        """The last ``size`` bytes of the console log: a panic is at its end."""
        if self.console_log_path is None:
            return ""
        try:
            with open(self.console_log_path, "rb") as f:
                f.seek(max(0, f.seek(0, 2) - size))
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def disk(self, spec: DiskSpec) -> AttachedDisk:
        for d in self.disks:
            if d.spec == spec:
                return d
        raise KeyError(spec)


@dataclass(frozen=True)
class GuestLogin:
    """How to log in to an image without cloud-init (``--guest-user``, ``--guest-key``,
    ``--guest-host-key``): no seed is attached then, and ``host_key`` is pinned as given."""

    user: str
    key_path: Path  # the private key file
    host_key: str  # "ssh-ed25519 AAAA..." (or another type) that the image's sshd presents


@dataclass(frozen=True)
class ImageRequest:
    """Boot a user's image (``--image``) instead of the embedded guest: on an overlay, with its own
    bootloader. Without ``login`` the suite's cloud-init seed sets up the login (user
    ``images.cloudinit.DEFAULT_GUEST_USER``, the run's key, a host key chosen by the suite)."""

    info: DiskImageInfo
    firmware: str = "bios"  # "bios" or "uefi"
    login: GuestLogin | None = None


@dataclass(frozen=True)
class GuestRequest:
    """Everything a backend needs to start a guest."""

    name: str
    disks: tuple[DiskSpec, ...]
    run_dir: Path  # files of this run (console log, disk files); removed at the end
    authorized_key: str  # base64 ed25519 public key of the run's key (root's on the embedded guest)
    vcpus: int = 2
    memory_mib: int = 512
    boot_timeout_s: float = 120.0
    #: a user's image to boot; None: the embedded guest
    image: ImageRequest | None = None
    #: virtio-scsi HBAs send the guest a parameter-change event when a disk's size changes (QEMU's
    #: ``param_change``, on by default); False: the ``param-change-off`` fault
    virtio_scsi_param_change: bool = True


class BackendOptions(Protocol):
    """What the backends read of the suite's options (fixtures/options.py's ``SuiteOptions`` has them)."""

    @property
    def libvirt_uri(self) -> str: ...

    @property
    def accel(self) -> str: ...

    @property
    def guest_kernel_deb(self) -> Path | None: ...

    @property
    def guest_kernel(self) -> AptKernel | None: ...

    @property
    def image(self) -> Path | None: ...

    @property
    def firmware(self) -> str: ...

    @property
    def vcenter(self) -> str | None: ...

    @property
    def controllers(self) -> tuple[str, ...]: ...

    @property
    def emulator(self) -> Path | None: ...

    @property
    def host_dir(self) -> str: ...

    @property
    def machine(self) -> str: ...


class BackingUnreadable(Exception):
    """The backend cannot read a disk's backing store from the host (``str()`` says why): the rules
    that check what reached it (data-integrity) skip with this reason."""


class BackingStore(Protocol):
    """A disk's data as the host stores it, read by the host itself (not through the guest):
    ``read(offset, length)`` gives the bytes at the disk's byte ``offset``."""

    @property
    def where(self) -> str:
        """The store in messages: "the backing file /tmp/.../dut1.img on this machine"."""
        ...

    def read(self, offset_bytes: int, length_bytes: int) -> bytes: ...


class RequestTracer(Protocol):
    """Records the exact host-side I/O of one disk between ``start()`` and ``stop()``."""

    def start(self) -> None: ...

    def stop(self) -> HostTrace: ...

    def abort(self) -> None: ...


class InjectionUnavailable(HypervisorError):
    """The backend cannot make this disk fail (no way to inject errors under it): a rule that needs it
    skips with this message."""


class ErrorPolicyContradicted(HypervisorError):
    """The hypervisor says a disk's device keeps failed requests from the guest although the suite
    configured it to report them (``policy``): the hypervisor under test failed, not the suite; the
    error-propagation rule fails on it (model.rules.error_propagation.judge_error_policy)."""

    def __init__(self, policy: ErrorPolicy) -> None:
        super().__init__(f"device {policy.device} does not report errors to the guest: {policy.describe()}")
        self.policy = policy


class ResizeUnavailable(HypervisorError):
    """The backend cannot resize this disk under its running guest: the resize rule skips with this message."""


@dataclass(frozen=True)
class HostResize:
    """The size the host reported after a resize, and how long its call took."""

    size_bytes: int
    seconds: float


class DiskResizer(Protocol):
    """Grows or shrinks one disk under its running guest (the resize rule). ``size_bytes``: the
    disk's size as the host reports it; ``resize`` returns the size the host reports after the
    call and the call's seconds."""

    def size_bytes(self) -> int: ...

    def resize(self, size_bytes: int) -> HostResize: ...


class ErrorInjector(Protocol):
    """Makes a range of one disk fail at the host, and counts what the disk completed and failed.

    ``inject`` puts the range in place (errors from the next request on); ``heal`` takes it away and
    leaves the disk's chain as it was (also when nothing is injected: it is the cleanup). ``outcomes``
    are the disk's cumulative completed and failed requests."""

    def inject(self, injected: InjectedRange) -> None: ...

    def heal(self) -> None: ...

    def outcomes(self) -> HostRequestOutcomes: ...


class HotplugUnavailable(HypervisorError):
    """The backend cannot add a disk to this controller of the running guest (``str()`` says why: the
    hypervisor's own refusal where it gave one): the hotplug rule skips with this message."""


#: The size of the disk the hotplug rule adds, on every backend: 64 MiB, room for the surprise removal's
#: fio run, and small and sparse (thin) on the host.
HOTPLUG_SIZE_BYTES = 64 << 20


class HotplugDisk(Protocol):
    """One disk the host adds to a running guest and removes again (the hotplug rule).

    ``attach`` adds it (a ``HotplugUnavailable`` where the hypervisor refuses), ``detach`` asks the
    hypervisor to remove it, ``present`` says whether the hypervisor still shows it in the guest's
    configuration, and ``remove`` is the cleanup: the disk detached if it is still there and its
    backing deleted, also after a failure (it never raises for a disk already gone)."""

    @property
    def serial(self) -> str: ...

    @property
    def size_bytes(self) -> int: ...

    @property
    def configured(self) -> ConfiguredLimits:
        """The limits the host configures for the added disk: what the guest must see (the limits
        rule's comparison, reused)."""
        ...

    def attach(self) -> None: ...

    def detach(self) -> None: ...

    def present(self) -> bool: ...

    def remove(self) -> None: ...


class HostCacheUnavailable(HypervisorError):
    """The backend cannot say what the host's cache does with a disk's writes (the write-cache rule skips)."""


class DiscardUnavailable(HypervisorError):
    """The backend cannot watch this disk's discards on the host (its backing cannot release space, or
    the backend has no counters for it): the discard rule skips with this message."""


class DiscardObserver(Protocol):
    """One disk's discards as the host sees them: the device's unmap counters and, where the host
    can read it, how much of a byte range of the backing store is allocated."""

    @property
    def where(self) -> str:
        """The backing store in messages: "the backing file /tmp/.../dut1.img on this machine"."""
        ...

    def unmap(self) -> HostUnmapCounters:
        """The disk's cumulative discard counters."""
        ...

    def allocated_bytes(self, offset_bytes: int, length_bytes: int) -> int | None:
        """Bytes of the backing store's range that hold data (not holes), or None where the host cannot say."""
        ...

    def written_bytes(self) -> int:
        """The device's cumulative bytes written (its counters count write-zeroes among them)."""
        ...

    def write_trace(self) -> WriteTrace | None:
        """A window over the writes the host's block layer takes, write-zeroes told apart; None where the
        host cannot tell them from writes of data."""
        ...


class WriteTrace(Protocol):
    """The writes the host's block layer took between ``start`` and ``stop`` (every disk's: the caller
    keeps its own range); ``abort`` switches the window off without reading it (a no-op when off)."""

    def start(self) -> None: ...

    def stop(self) -> tuple[BackendWrite, ...]: ...

    def abort(self) -> None: ...


class HoldUnavailable(HypervisorError):
    """The backend cannot hold a disk's requests at the host: the stall-tolerance rule's dynamic part
    does not run, and its verdict says why."""


class DiskHold(Protocol):
    """Holds every request of one disk at the host, in the hypervisor's block layer (the guest's
    vCPUs run on), until released (the stall-tolerance rule).

    ``hold`` starts holding (requests already at the backing store complete); ``release`` lets the
    held requests go and is a no-op when nothing is held (it is the cleanup too); it waits for the
    hypervisor's answer, which a hypervisor stuck on the held requests never gives: the caller bounds
    it and then calls ``give_up``, which stops the guest's VM (the only way out of such a hypervisor).
    ``counters`` reads the disk's counters the way ``release`` talks to the hypervisor (a connection
    of its own), so a stuck release leaves the backend's other calls free."""

    def hold(self) -> None: ...

    def counters(self) -> HostBlockCounters: ...

    def release(self) -> None: ...

    def give_up(self) -> None: ...


class ThrottleUnavailable(HypervisorError):
    """The backend cannot set, lift and read back a disk's I/O limits under its running guest: the
    throttle rule skips with this message."""


class DiskThrottle(Protocol):
    """One disk's I/O limits in the hypervisor's block layer, changed under the running guest (the
    throttle rule). ``held`` reads back the limits the hypervisor holds and says where it read them
    (``said_by``); ``set`` puts limits in place (``ThrottleLimits()``: every limit lifted);
    ``restore`` puts back what the disk held before the rule's first ``set`` (its cleanup, a no-op
    when nothing was set)."""

    @property
    def said_by(self) -> str: ...

    def held(self) -> ThrottleLimits: ...

    def set(self, limits: ThrottleLimits) -> None: ...

    def restore(self) -> None: ...


class RecoveryWatch(Protocol):
    """Watches one disk's device model for aborts, resets and cancels between ``start`` and ``stop``;
    ``watched`` says which events (or why none)."""

    @property
    def watched(self) -> str: ...

    def start(self) -> None: ...

    def stop(self) -> tuple[HostEvent, ...]: ...

    def abort(self) -> None: ...


@dataclass(frozen=True)
class ReplaySources:
    """What a reproducer bundle takes of the hypervisor side of a guest's disk: the domain's live
    definition, QEMU's own log of its start (its exact command line), the controller's trace family and
    events, and the embedded guest's kernel and initramfs (None for a user's image)."""

    domain_xml: str
    qemu_log: str
    trace_family: str | None
    trace_events: tuple[str, ...]
    kernel: Path | None
    initrd: Path | None


class HypervisorBackend(ABC):
    """One hypervisor. Subclasses implement the underscored methods."""

    name: ClassVar[str]
    #: controller name -> one-line description; ``--controllers`` is validated against it.
    controllers: ClassVar[dict[str, str]]
    #: whether ``host_counters`` counts flushes (FUA included); the durability rule needs it
    counts_flushes: ClassVar[bool] = True
    #: whether ``host_counters`` counts every request exactly (QMP does), so a whole fio run can
    #: be compared one for one with the guest's count
    exact_counts: ClassVar[bool] = True

    def __init__(self, cleanup: CleanupStack) -> None:
        self.cleanup = cleanup

    @classmethod  # noqa: B027 (a hook; by default nothing to check)
    def validate_options(cls, opts: BackendOptions) -> None:
        """Check the options against this host before any guest starts (a target that cannot
        be reached, a file that cannot be used); raise HypervisorError with one line naming the
        option and the remedy. The session makes it a usage error. Default: nothing to check."""

    @classmethod
    @abstractmethod
    def from_options(cls, cleanup: CleanupStack, opts: BackendOptions) -> Self:
        """The suite's one way to make a backend: everything it needs before a guest can start
        (a connection, the guest image) from the options. Destroys nothing on the host."""

    def sweep_leftovers(self) -> None:  # noqa: B027 (a hook; by default nothing to sweep)
        """Remove what killed earlier runs of the suite left behind (their VMs, run directories,
        logs), and only that. An explicit call, made by the suite's session before it starts a
        guest; never a side effect of making a backend, so a command pointed at a user's host
        (``python -m hypervisors.libvirt.record``) destroys nothing. Default: nothing to sweep."""

    def replay_sources(self, guest: Guest, controller: str) -> ReplaySources | None:
        """The hypervisor side of ``guest``'s disk on ``controller`` for a reproducer bundle, or None
        where this backend has none to give (a bundle then names what it lacks). Default: None."""
        return None

    def replay_device(self, disk: AttachedDisk) -> dict[str, object]:
        """What a reproducer bundle's replay asks its hypervisor of ``disk``'s device, and the identity
        the disk was given (configuration.json's ``disks[]``; libvirt: ``qom_reads``, ``identity``).
        Default: nothing (the identity and block-size replays then say the bundle lacks it)."""
        return {}

    def check_controllers(self, names: Sequence[str]) -> None:
        unknown = list(dict.fromkeys(n for n in names if n not in self.controllers))  # each once (a disk pair shares one)
        if unknown:
            raise HypervisorError(
                f"unknown controller(s) {', '.join(unknown)} for the {self.name} backend; "
                f"choose from: {', '.join(self.controllers)}")

    def start_guest(self, request: GuestRequest) -> Guest:
        """Start a guest with the requested disks; it is destroyed by the cleanup stack."""
        self.check_controllers([d.controller for d in request.disks])
        t0 = time.monotonic()
        log.info("%s: starting guest %s with %s", self.name, request.name,
                 ", ".join(d.label for d in request.disks))
        guest = self._start_guest(request)
        if guest.vm_dead_reason is None:
            guest.vm_dead_reason = lambda: self.guest_dead_reason(guest)
        guest.boot_seconds = time.monotonic() - t0
        log.info("%s: guest %s reachable over SSH after %.1f s (%s)", self.name, guest.name,
                 guest.boot_seconds, guest.accel)
        return guest

    @abstractmethod
    def _start_guest(self, request: GuestRequest) -> Guest:
        """Create and boot the VM, register its destruction with ``self.cleanup``, wait for SSH."""

    @abstractmethod
    def host_counters(self, guest: Guest, disk: AttachedDisk) -> HostBlockCounters:
        """Cumulative host-side counters of one disk, stamped with the host's monotonic clock."""

    def guest_dead_reason(self, guest: Guest) -> str | None:
        """Why the guest's VM no longer runs (shut off, crashed, paused on an error, gone), or None
        while it runs or the backend cannot tell. Asked every few seconds while a command runs."""
        return None

    def advertised(self, guest: Guest, disk: AttachedDisk) -> Advertised:
        """What the disk's device really advertises, as the running hypervisor answers (QEMU: QMP
        ``qom-get`` on the device; vSphere: the VM's device config), asked before the rules run; a
        limit it does not say is None. HypervisorError where it cannot be asked. Default: nothing said."""
        return Advertised(unavailable=f"the {self.name} backend cannot say what a device advertises")

    def host_cache(self, guest: Guest, disk: AttachedDisk) -> HostCache:
        """What the host's block layer does with ``disk``'s writes now (model/host_cache.py: a volatile
        write cache, O_DIRECT, flushes dropped), for the write-cache rule; HostCacheUnavailable, with the
        reason, where the backend cannot say. Default: it cannot."""
        raise HostCacheUnavailable(f"the {self.name} backend cannot say what the host's cache does with a disk's writes")

    def vcpu_times(self, guest: Guest) -> VcpuTimes | None:
        """The guest's vCPU threads' cumulative run and run-queue wait times on the host
        (model.parse.hostcpu), or None where the backend cannot read them. Never raises."""
        return None

    def backing_store(self, guest: Guest, disk: AttachedDisk) -> BackingStore:
        """The disk's backing store, for the host to read; BackingUnreadable (with the reason) where
        the backend cannot read it. Default: it cannot."""
        raise BackingUnreadable(f"the {self.name} backend cannot read a disk's backing store from the suite's host")

    def request_tracer(self, guest: Guest, disk: AttachedDisk) -> RequestTracer | None:
        """An exact per-request source for this disk, or None where the backend has none."""
        return None

    def error_injector(self, guest: Guest, disk: AttachedDisk) -> ErrorInjector:
        """A way to make a range of ``disk`` fail at the host (the error-propagation rule). Default:
        InjectionUnavailable, naming the backend."""
        raise InjectionUnavailable(f"the {self.name} backend cannot make a range of a disk fail at the host")

    def hotplug_disk(self, guest: Guest, beside: AttachedDisk) -> HotplugDisk:
        """A new disk on the controller of ``beside`` (not yet attached), for the hotplug rule. Default:
        HotplugUnavailable, naming the backend."""
        raise HotplugUnavailable(f"the {self.name} backend cannot add a disk to a running guest")
    def discard_observer(self, guest: Guest, disk: AttachedDisk) -> DiscardObserver:
        """The host's view of ``disk``'s discards (the discard rule). Default: DiscardUnavailable, naming the backend."""
        raise DiscardUnavailable(f"the {self.name} backend cannot watch a disk's discards on the host")

    def resizer(self, guest: Guest, disk: AttachedDisk) -> DiskResizer:
        """A way to resize ``disk`` under its running guest (the resize rule). Default:
        ResizeUnavailable, naming the backend."""
        raise ResizeUnavailable(f"the {self.name} backend cannot resize a disk under its running guest")

    def disk_hold(self, guest: Guest, disk: AttachedDisk) -> DiskHold:
        """A way to hold every request of ``disk`` at the host (the stall-tolerance rule). Default:
        HoldUnavailable, naming the backend."""
        raise HoldUnavailable(f"the {self.name} backend cannot hold a disk's requests at the host")

    def disk_throttle(self, guest: Guest, disk: AttachedDisk) -> DiskThrottle:
        """A way to set and lift ``disk``'s I/O limits under its running guest (the throttle rule).
        Default: ThrottleUnavailable, naming the backend."""
        raise ThrottleUnavailable(f"the {self.name} backend cannot change a disk's I/O limits under its running guest")

    def recovery_watch(self, guest: Guest, disk: AttachedDisk) -> RecoveryWatch | None:
        """The aborts and resets of ``disk``'s device model, or None where the backend cannot see them."""
        return None

    def disk_settings_seen(self, guest: Guest) -> dict[DiskSpec, list[SettingSeen]]:
        """Each disk setting asked (``--disk``, ``--profile``) as the running hypervisor shows it, per
        disk that asks any (``model.settings_seen``: the guest fixture records them and stops the run
        on one that did not take, before any rule trusts it). Default: nothing to check (a backend that
        cannot set a disk setting refuses it before any guest starts)."""
        return {}

    def environment(self, guest: Guest) -> dict[str, str]:
        """The running guest's environment fingerprint entries (model/across/fingerprint.py: the
        hypervisor's build, its machine and accelerator). Default: nothing known."""
        return {}

    def close(self) -> None:  # noqa: B027 (a hook; by default nothing to release)
        """Release the connection to the hypervisor (and whatever the backend opened through it)."""
