"""KVM/QEMU through libvirt: boots the embedded guest with its disks under test.

Works with a libvirt daemon on this machine (``qemu:///system`` by default; as root
``qemu:///session`` is served by the same daemon) or on another host over SSH
(``qemu+ssh://user@host/system``). The guest is reached through a QEMU user-mode port forward on
the libvirt host's 127.0.0.1, so no bridged or NAT network is needed; on a remote host through a
tunnel of the suite's own SSH connection to it (``hypervisors.libvirt.hostlink``), which also
stages the guest's files there (``hypervisors.libvirt.hostfiles``).

Host-side counters come from QMP ``query-blockstats`` through libvirt's monitor
passthrough (``hypervisors.libvirt.qmp``).

Making a backend opens the connection and nothing more; ``sweep_leftovers()``, called by the
suite's session, removes what killed earlier runs left on this host.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import random
import re
import socket
import time
from pathlib import Path, PurePath, PurePosixPath
from typing import ClassVar, Self
from xml.sax.saxutils import escape, quoteattr

import libvirt
import paramiko

from hypervisors.base import (
    BackendOptions,
    BackingUnreadable,
    DiscardUnavailable,
    Guest,
    GuestRequest,
    HoldUnavailable,
    HostCacheUnavailable,
    HotplugUnavailable,
    HypervisorBackend,
    ImageRequest,
    InjectionUnavailable,
    ReplaySources,
    kernel_panic,
)
from hypervisors.cleanup import CleanupStack, signals_deferred, sweep_run_dirs
from hypervisors.libvirt import (
    accel,
    environment,
    host_checks,
    identity,
    imageboot,
    leftovers,
    machine,
    qemulog,
    qom,
    settings_check,
    stall_tolerance,
    trace,
)
from hypervisors.libvirt.accel import PROBE_REMEDY, PROBE_TIMEOUT_S, ProbeResult
from hypervisors.libvirt.controllers import (
    CONTROLLERS,
    NET_PCI_SLOT,
    RNG_PCI_SLOT,
    device_id,
    disk_devices,
    disk_file,
    disk_overrides,
    format_options,
    guest_drivers,
    pci_addr,
)
from hypervisors.libvirt.discard import QmpDiscardObserver
from hypervisors.libvirt.disk_settings import domain_iothreads_xml
from hypervisors.libvirt.error_propagation import BlkdebugInjector
from hypervisors.libvirt.host_checks import check_drives_qemu, is_local, open_connection
from hypervisors.libvirt.hostfiles import (
    DEFAULT_HOST_DIR,
    BackingFile,
    ConsoleMirror,
    HostFiles,
    LocalFiles,
    RemoteFiles,
)
from hypervisors.libvirt.hostlink import HostAddress, HostLink
from hypervisors.libvirt.hotplug import LibvirtHotplugDisk, hotplug_spec, hotplug_xml
from hypervisors.libvirt.leftovers import METADATA_NS, destroy
from hypervisors.libvirt.machine import DEFAULT_MACHINE
from hypervisors.libvirt.qmp import DomainQmp
from hypervisors.libvirt.resize import QmpResizer
from hypervisors.libvirt.throttle import QmpThrottle
from images.build import KERNEL_ARGS, GuestImage, ensure_image
from images.pvh import PVH_NAME, pvh_kernel
from images.user import UserImageError
from model.advertised import Advertised
from model.errors import HypervisorError, ParseError
from model.host_cache import HostCache
from model.parse.blockstats import HostBlockCounters
from model.parse.hostcpu import VcpuTimes, from_domain_stats
from model.settings_seen import SettingSeen
from model.types import AttachedDisk, DiskSpec, GuestDiskId, SshEndpoint

log = logging.getLogger("vioconform.libvirt")

QEMU_NS = "http://libvirt.org/schemas/domain/qemu/1.0"
#: Where a suite-started domain's QEMU writes trace events (in the run directory).
TRACE_LOG = "qemu-trace.log"

# libvirt logs its own errors to stderr by default; the suite reports them itself.
libvirt.registerErrorHandler(lambda _ctx, _err: None, None)


def _free_loopback_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


#: Ports a remote host's forward is taken from (this machine cannot ask the host's kernel for a
#: free one): QEMU refuses a port in use, and the suite tries another (``FORWARD_ATTEMPTS``).
REMOTE_PORTS = (20000, 59999)
FORWARD_ATTEMPTS = 4


def remote_port() -> int:
    """A port for the guest's SSH forward on a remote host's loopback (QEMU checks it is free)."""
    return random.randint(*REMOTE_PORTS)


class LibvirtBackend(HypervisorBackend):
    name: ClassVar[str] = "libvirt"
    controllers: ClassVar[dict[str, str]] = {name: c.description for name, c in CONTROLLERS.items()}
    #: --emulator (None: libvirt's default QEMU) and --machine; class defaults, so the domain XML
    #: can be made without a connection (tests build it on an instance made by __new__)
    emulator: Path | None = None
    machine: str = DEFAULT_MACHINE
    files: HostFiles = LocalFiles()
    #: whether the libvirt host is this machine (set from the URI)
    local: bool = True

    def __init__(self, cleanup: CleanupStack, uri: str = "qemu:///system", accel_mode: str = "auto",
                 image: GuestImage | None = None, emulator: Path | None = None,
                 machine_type: str = DEFAULT_MACHINE, host_dir: PurePath = DEFAULT_HOST_DIR) -> None:
        super().__init__(cleanup)
        self.uri = uri
        self.emulator = emulator
        self.machine = machine_type
        self.local = is_local(uri)
        # A remote host: the suite's own SSH connection first (its host key checked), for files and tunnels.
        self.files = LocalFiles() if self.local else RemoteFiles(HostLink(HostAddress.from_uri(uri)), host_dir)
        try:
            self.conn = open_connection(uri)
            check_drives_qemu(uri, self.conn)
        except BaseException:
            self.files.close()
            raise
        self._accel_mode = accel_mode
        self._image = image
        self._accel: str | None = None
        self._stages: dict[Path, PurePath] = {}
        self._mirrors: dict[str, ConsoleMirror] = {}
        self._hold_conn: libvirt.virConnect | None = None

    @classmethod
    def validate_options(cls, opts: BackendOptions) -> None:
        host_checks.validate_options(opts)

    @classmethod
    def from_options(cls, cleanup: CleanupStack, opts: BackendOptions) -> Self:
        """The guest image first (built once, then cached), then the connection. With ``--image``
        the embedded image is built only if the KVM probe needs it (it boots the embedded kernel)."""
        image = None if opts.image is not None else ensure_image(log.info, opts.guest_kernel_deb,
                                                                         opts.guest_kernel)
        return cls(cleanup, uri=opts.libvirt_uri, accel_mode=opts.accel, image=image, emulator=opts.emulator,
                   machine_type=opts.machine, host_dir=PurePosixPath(opts.host_dir))

    def sweep_leftovers(self) -> None:
        """What runs from this machine that were killed left on the libvirt host: their domains,
        then their directories and QEMU logs (this machine's $TMPDIR, or the remote staging dir)."""
        running = leftovers.sweep_domains(self.conn)
        sweep_run_dirs()  # this machine's run directories, after the domains (their QEMU may hold files)
        if self.local:
            qemulog.sweep_logs(running=running)
        else:
            self.files.sweep()

    def stage(self, run_dir: Path) -> PurePath:
        """Where QEMU finds this run's files on the libvirt host: the run directory itself on this
        machine, a staging directory (removed with the run) on a remote host."""
        if run_dir not in self._stages:
            self._stages[run_dir] = self.files.stage_dir(run_dir, self.cleanup)
        return self._stages[run_dir]

    def tunnel(self, host: str, port: int) -> paramiko.Channel:
        """A connection to ``host:port`` as the remote libvirt host sees it (``SshEndpoint.via``)."""
        assert isinstance(self.files, RemoteFiles)
        return self.files.link.tunnel(host, port)

    @property
    def image(self) -> GuestImage:
        if self._image is None:
            self._image = ensure_image(log.info)
        return self._image

    def accel(self, run_dir: Path) -> str:
        """The domain type to use: ``kvm`` where a real boot under KVM works, else ``qemu`` (TCG)."""
        if self._accel is None:
            self._accel = accel.choose(self.uri, self.conn, self._accel_mode, lambda: self.probe_kvm(run_dir))
        return self._accel

    def probe_kvm(self, run_dir: Path) -> ProbeResult:
        """Boot the embedded kernel under KVM: does it reach the probe marker, and if not, why."""
        stage = self.stage(run_dir)
        kernel, initrd = self.stage_boot_files(stage)
        name = f"vioconform-kvmprobe-{os.getpid()}"
        xml = self.domain_xml(name, "kvm", stage, kernel, initrd, f"{KERNEL_ARGS} vioconform.probe=1",
                              None, None)
        self.files.note_domain(stage, name)
        undo = self.cleanup.push(f"domain {name}", lambda: self.remove_domain(name, run_dir))
        try:
            with signals_deferred():
                dom = self.conn.createXML(xml, 0)
        except libvirt.libvirtError as e:
            undo()
            said = e.get_error_message()
            log.info("KVM probe: libvirt refused a kvm domain: %s", said)
            return ProbeResult(False, qemulog.qemu_cause(said) or said.splitlines()[0])
        try:
            self.wait_for_probe(dom, stage / "console.log")
            return ProbeResult(True)
        except HypervisorError as e:
            first = str(e).splitlines()[0]
            log.info("KVM probe: guest did not boot under KVM: %s", first)
            return ProbeResult(False, qemulog.qemu_cause(str(e)) or first)
        finally:
            undo()
            self.files.remove(stage / "console.log")

    # -- domain XML -------------------------------------------------------------------------
    def domain_xml(self, name: str, domain_type: str, run_dir: PurePath, kernel: PurePath | None,
                   initrd: PurePath | None,
                   cmdline: str, request: GuestRequest | None, ssh_port: int | None,
                   image_files: imageboot.BootFiles | None = None) -> str:
        """The transient domain: the embedded kernel (``kernel``, ``initrd``, ``cmdline``) or, with
        ``image_files``, a user's image booted by its own bootloader (``request.image``)."""
        devices: list[str] = [
            (f"<serial type='file'><source path={quoteattr(str(run_dir / 'console.log'))}/>"
             "<target port='0'/></serial>"),
            "<memballoon model='none'/>",
            # No USB controller (libvirt adds one by default): nothing here uses USB, and the guest
            # kernel's USB hand-off quirk took 185 ms of each boot under TCG (dmesg).
            "<controller type='usb' model='none'/>",
        ]
        # Entropy from the host (QEMU's own getrandom, no device file). Without it the guest's first
        # getrandom() (the SSH host key) waits for the kernel's jitter entropy: 'crng init done' at
        # 3.06 s of uptime, a second of busy loop under TCG, and on a loaded host a boot can stall
        # there for over 100 s (a soft lockup in dropbearkey). With it: 2.10-2.20 s, right after
        # init loads virtio_rng (measured, embedded guest, PVH and bzImage alike).
        qemu_args: list[str] = ["-object", "rng-builtin,id=vioc-rng",
                                "-device", f"virtio-rng-pci,rng=vioc-rng,{pci_addr(RNG_PCI_SLOT)}"]
        overrides = ""
        if ssh_port is not None:
            # No option ROM (romfile=): the guest never boots from the network, and the firmware
            # would otherwise load and start iPXE's ROM at every boot, which is slow under TCG.
            qemu_args += ["-netdev", f"user,id=vioc-net,hostfwd=tcp:127.0.0.1:{ssh_port}-:22",
                          "-device", f"virtio-net-pci,netdev=vioc-net,romfile=,{pci_addr(NET_PCI_SLOT)}"]
        if request is not None:
            # A user's image boots from its own disk (bootindex 1): the disks under test come after it.
            disk_xml, disk_args = disk_devices(request.disks, run_dir,
                                               first_boot_order=2 if image_files is not None else None)
            devices += disk_xml
            overrides = disk_overrides(request.disks, param_change=request.virtio_scsi_param_change)
            qemu_args += disk_args + trace.domain_trace_args(run_dir / TRACE_LOG)
        vcpus = request.vcpus if request else 1
        memory = request.memory_mib if request else 256
        cpu = "<cpu mode='host-passthrough'/>" if domain_type == "kvm" else ""
        if image_files is not None and request is not None and request.image is not None:
            os_xml = imageboot.os_xml(request.image.firmware, image_files.nvram, self.machine, self.local)
            qemu_args += imageboot.qemu_args(image_files)
        else:
            os_xml = (f"<os><type arch='x86_64' machine={quoteattr(self.machine)}>hvm</type>\n    <kernel>{kernel}</kernel>"
                      f"<initrd>{initrd}</initrd><cmdline>{cmdline}</cmdline></os>")
        qemu_xml = "".join(f"<qemu:arg value={quoteattr(a)}/>" for a in machine.on_root_bus(qemu_args, self.machine))
        if self.emulator is not None:
            devices.insert(0, f"<emulator>{escape(str(self.emulator))}</emulator>")
        return f"""<domain type='{domain_type}' xmlns:qemu='{QEMU_NS}'>
  <name>{name}</name>
  <metadata><vioc:run xmlns:vioc='{METADATA_NS}' pid='{os.getpid()}' host={quoteattr(socket.gethostname())} dir={quoteattr(str(run_dir))}/></metadata>
  <memory unit='MiB'>{memory}</memory>
  <vcpu>{vcpus}</vcpu>{domain_iothreads_xml(request.disks) if request else ""}
  {os_xml}
  <features><acpi/></features>{cpu}
  <on_poweroff>destroy</on_poweroff><on_reboot>destroy</on_reboot><on_crash>destroy</on_crash>
  <devices>{''.join(devices)}</devices>
  <qemu:commandline>{qemu_xml}</qemu:commandline>{overrides}
</domain>"""

    def boot(self, xml: str, name: str, run_dir: Path) -> libvirt.virDomain:
        """Create a transient domain; its destruction is registered first, by name, so a Ctrl-C
        that lands while libvirt is still creating it cannot leak it."""
        self.cleanup.push(f"domain {name}", lambda: self.remove_domain(name, run_dir))
        try:
            with signals_deferred():
                return self.conn.createXML(xml, 0)
        except libvirt.libvirtError as e:
            said = e.get_error_message()
            # libvirt does not always pass on QEMU's own words: under load, when QEMU exits on a
            # taken forwarded port, libvirt may say only "failed to connect to monitor socket:
            # Connection refused". The domain's QEMU log has them (this start's part of it).
            cause = qemulog.qemu_cause(said) or qemulog.qemu_cause(qemulog.last_start(self._qemu_log(name)))
            raise HypervisorError(f"libvirt refused to start {name}: {cause or said.splitlines()[0]}"
                                  f"\n--- libvirt said ---\n{said}") from e

    def _qemu_log(self, name: str) -> str:
        """The domain's QEMU log so far, or "" where it cannot be read (it only adds to an error)."""
        try:
            return self.files.qemu_log(name)
        except (OSError, HypervisorError, paramiko.SSHException):
            return ""

    def remove_domain(self, name: str, run_dir: Path | None) -> None:
        """Destroy the domain and move its QEMU log (libvirt never removes it) into ``run_dir``.
        The log goes even when the domain never came up: libvirt writes it before QEMU starts."""
        try:
            self.destroy_by_name(name)
        finally:
            mirror = self._mirrors.pop(name, None)
            if mirror is not None:
                mirror.stop()
            self.files.take_qemu_log(name, run_dir)

    def destroy_by_name(self, name: str) -> None:
        try:
            dom = self.conn.lookupByName(name)
        except libvirt.libvirtError as e:
            if e.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN:
                return
            raise
        destroy(dom)

    @functools.cached_property
    def boot_kernel(self) -> Path:
        """The kernel QEMU is given: on this machine's libvirt the PVH ELF where the kernel has one
        (images.pvh: no decompressor to emulate, about 2.3 s less per boot under TCG), else
        the bzImage. A remote host gets the bzImage: the ELF is 62 MiB against 8 MiB, staged over
        SFTP at every run, which over a network costs more than the decompression it saves."""
        if not self.local:
            return self.image.kernel_path
        return pvh_kernel(self.image.kernel_path, log.info) or self.image.kernel_path

    def stage_boot_files(self, stage: PurePath) -> tuple[PurePath, PurePath]:
        """Copy kernel and initramfs into the staging directory (``stage``): the cache under /root
        is not readable by the QEMU user, and libvirt relabels what it boots. Once per run."""
        source = self.boot_kernel
        kernel = stage / ("vmlinux" if source.name == PVH_NAME else "vmlinuz")
        initrd = stage / "initrd.img"
        if self.files.size(kernel) == 0:
            self.files.put(source, kernel)
            self.files.put(self.image.initrd_path, initrd)
        return kernel, initrd

    # -- HypervisorBackend --------------------------------------------------------------------
    def _start_guest(self, request: GuestRequest) -> Guest:
        run_dir = request.run_dir
        os.chmod(run_dir, 0o755)
        domain_type = self.accel(run_dir)
        stage = self.stage(run_dir)
        for disk in request.disks:
            if disk.backing == "file":
                self.files.create_disk(disk_file(stage, disk), disk.size_bytes, disk.settings.format or "raw")
        console = stage / "console.log"
        self.files.remove(console)
        self.files.for_qemu(stage / TRACE_LOG)
        if request.image is not None:
            return self._start_image_guest(request, request.image, domain_type,
                                           _free_loopback_port() if self.local else remote_port())
        kernel, initrd = self.stage_boot_files(stage)
        cmdline = (f"{KERNEL_ARGS} vioconform.drivers={','.join(guest_drivers(request.disks))} "
                   f"vioconform.key={request.authorized_key}")
        self.files.note_domain(stage, request.name)
        for attempt in range(1, FORWARD_ATTEMPTS + 2):
            port = _free_loopback_port() if self.local else remote_port()
            xml = self.domain_xml(request.name, domain_type, stage, kernel, initrd, cmdline, request, port)
            (run_dir / f"{request.name}.xml").write_text(xml)
            try:
                dom = self.boot(xml, request.name, run_dir)
            except HypervisorError as e:
                # Another process took the port between its choice and QEMU's bind (two runs, two
                # workers): QEMU says so; another port.
                if "host forwarding rule" not in str(e) or attempt >= FORWARD_ATTEMPTS:
                    raise
                log.warning("guest %s: port %d on the libvirt host is taken; another", request.name, port)
                continue
            try:
                host_key = self.wait_for_console(dom, console, "VIOCONFORM-READY", request.boot_timeout_s)
                break
            except GuestStoppedDuringBoot as e:
                # QEMU 7.2 under TCG can segfault while a guest with many controllers boots
                # (memory_region_dispatch_write, vCPU 1). One retry; a second stop is reported.
                if attempt >= 2:
                    raise
                log.warning("guest %s stopped during boot, starting it once more: %s",
                            request.name, str(e).splitlines()[0])
                self.files.remove(console)
        local_console = run_dir / "console.log"
        if isinstance(self.files, RemoteFiles):
            self._mirrors[request.name] = ConsoleMirror(self.files, console, local_console).start()
        via = None if self.local else self.tunnel
        return Guest(request.name, SshEndpoint("127.0.0.1", port, "root", run_dir / "id_ed25519", host_key, via=via),
                     _attached(request), accel=_accel_name(domain_type), console_log_path=local_console)

    def _start_image_guest(self, request: GuestRequest, image: ImageRequest, domain_type: str, port: int) -> Guest:
        """Boot a user's image on an overlay (``hypervisors.libvirt.imageboot``) and wait until the
        suite can log in; everything it makes is in the run directory (on a remote host: its staging
        directory, the image uploaded once), removed with it."""
        run_dir = request.run_dir
        stage = self.stage(run_dir)
        console = stage / "console.log"
        run_key = run_dir / "id_ed25519"
        remote = self.files if isinstance(self.files, RemoteFiles) else None
        self.files.note_domain(stage, request.name)
        for attempt in (1, 2):
            try:
                files = imageboot.prepare(request, image, run_key, remote, stage)
            except UserImageError as e:
                raise HypervisorError(str(e)) from None
            xml = self.domain_xml(request.name, domain_type, stage, None, None, "", request, port, files)
            (run_dir / f"{request.name}.xml").write_text(xml)
            endpoint = SshEndpoint("127.0.0.1", port, files.endpoint_user, files.key_path, files.host_key,
                                   via=None if remote is None else self.tunnel)
            dom = self.boot(xml, request.name, run_dir)
            log.info("%s: booting %s (%s, %s) from its own bootloader; waiting for SSH as %s (timeout %.0f s)",
                     request.name, image.info.path, image.info.format, image.firmware, endpoint.user,
                     request.boot_timeout_s)
            qmp = DomainQmp(self.conn, request.name, imageboot.BOOT_DEVICE_ID)
            try:
                imageboot.wait_for_ssh(request.name, endpoint, request.boot_timeout_s,
                                       imageboot.access_of(files, image), image.firmware,
                                       lambda: self.files.read(console).decode(errors="replace"),
                                       stopped=functools.partial(self._raise_if_stopped, dom, console),
                                       panicked=kernel_panic, boot_disk_read=functools.partial(_read_bytes, qmp))
                break
            except GuestStoppedDuringBoot as e:
                # As for the embedded guest: QEMU 7.2 under TCG can crash during a boot; one retry,
                # on a fresh overlay (the first boot wrote to it).
                if attempt == 2:
                    raise
                log.warning("guest %s stopped during boot, starting it once more: %s",
                            request.name, str(e).splitlines()[0])
                self.files.remove(console)
                self.files.remove(files.overlay)
        local_console = run_dir / "console.log"
        if remote is not None:
            self._mirrors[request.name] = ConsoleMirror(remote, console, local_console).start()
        return Guest(request.name, endpoint, _attached(request), accel=_accel_name(domain_type),
                     console_log_path=local_console, image=image.info)

    def _raise_if_stopped(self, dom: libvirt.virDomain, console: PurePath) -> None:
        if _is_active(dom):
            return
        said = self.qemu_log(dom.name())
        text = self.files.read(console).decode(errors="replace")
        raise GuestStoppedDuringBoot(f"guest {dom.name()} stopped during boot; QEMU said: "
                                     f"{qemulog.qemu_cause(said) or 'nothing'}\n--- QEMU log (last lines) "
                                     f"---\n{said}", console_log=_tail(text))

    def wait_for_probe(self, dom: libvirt.virDomain, console: PurePath) -> None:
        """Wait for the KVM probe's marker, for the probe's fixed time."""
        self.wait_for_console(dom, console, "VIOCONFORM-PROBE-OK", PROBE_TIMEOUT_S, remedy=PROBE_REMEDY)

    def wait_for_console(self, dom: libvirt.virDomain, console: PurePath, marker: str, timeout_s: float,
                         remedy: str = "raise --boot-timeout if the host is slow") -> str:
        """Wait until the console (a file on the libvirt host) shows ``marker``; return the host key
        line printed before it. ``remedy``: what the error says to do when the time runs out."""
        deadline = time.monotonic() + timeout_s
        text = ""
        period = 0.2 if self.local else 0.5  # a remote read is an SFTP round trip
        while time.monotonic() < deadline:
            text = self.files.read(console).decode(errors="replace")
            if marker in text:
                m = re.search(r"VIOCONFORM-HOSTKEY (ssh-ed25519 \S+)", text)
                return m.group(1) if m else ""
            panic = kernel_panic(text)
            if panic is not None:  # at once: the kernel waits there for ever (panic=0)
                raise HypervisorError(f"guest {dom.name()} did not boot: {panic}", console_log=_tail(text))
            if not _is_active(dom):
                said = self.qemu_log(dom.name())
                raise GuestStoppedDuringBoot(f"guest {dom.name()} stopped during boot; QEMU said: "
                                             f"{qemulog.qemu_cause(said) or 'nothing'}\n--- QEMU log (last lines) "
                                             f"---\n{said}", console_log=_tail(text))
            time.sleep(period)
        raise HypervisorError(f"guest {dom.name()} did not reach {marker} within {timeout_s:.0f} s ({remedy})",
                              console_log=_tail(text))

    def qemu_log(self, name: str) -> str:
        return _tail(self.files.qemu_log(name), 15) or "(no QEMU log)"

    def channel(self, guest: Guest, disk: AttachedDisk) -> DomainQmp:
        """The guest's monitor and the disk's counters."""
        return DomainQmp(self.conn, guest.name, disk.host_ref)

    def host_counters(self, guest: Guest, disk: AttachedDisk) -> HostBlockCounters:
        return self.channel(guest, disk).counters()

    def vcpu_times(self, guest: Guest) -> VcpuTimes | None:
        """libvirt's ``vcpu.N.time`` and ``vcpu.N.delay`` of the guest's domain (local or remote)."""
        try:
            dom = self.conn.lookupByName(guest.name)
            sent = time.monotonic()
            stats = self.conn.domainListGetStats([dom], libvirt.VIR_DOMAIN_STATS_VCPU)
            at = (sent + time.monotonic()) / 2
        except libvirt.libvirtError as e:
            log.debug("%s: no vCPU statistics: %s", guest.name, e)
            return None
        return from_domain_stats(dict(stats[0][1]), at) if stats else None

    def guest_dead_reason(self, guest: Guest) -> str | None:
        try:
            state, reason = self.conn.lookupByName(guest.name).state()
        except libvirt.libvirtError as e:
            if e.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN:  # a transient domain is gone once QEMU exits
                return f"its domain {guest.name} no longer exists (QEMU exited); QEMU said: {self.qemu_log(guest.name)}"
            return None  # libvirt did not answer: no evidence about the guest
        if state in (libvirt.VIR_DOMAIN_RUNNING, libvirt.VIR_DOMAIN_BLOCKED):
            return None
        if state == libvirt.VIR_DOMAIN_PAUSED:
            # Paused by a user or for a libvirt job (snapshot, dump) it resumes; on an error it stays.
            why = _PAUSED_ON_ERROR.get(reason)
            return None if why is None else f"its domain {guest.name} is paused: {why}"
        return f"its domain {guest.name} is {_DOMAIN_STATES.get(state, f'in libvirt state {state}')}"

    def advertised(self, guest: Guest, disk: AttachedDisk) -> Advertised:
        """QEMU's answer: QMP ``qom-get`` on the disk's device and its HBA (hypervisors/libvirt/qom.py)."""
        return qom.read_advertised(self.conn, guest.name, disk.spec)

    def host_cache(self, guest: Guest, disk: AttachedDisk) -> HostCache:
        """QMP ``query-block``'s cache of the disk's block backend, as QEMU has it now (hypervisors/libvirt/qom.py)."""
        cache = qom.host_cache(self.conn, guest.name, device_id(disk.spec))
        if cache is None:
            raise HostCacheUnavailable(f"QEMU's query-block lists no block backend of {disk.spec.label} "
                                       f"(device {device_id(disk.spec)}): its cache cannot be read")
        return cache

    def disk_settings_seen(self, guest: Guest) -> dict[DiskSpec, list[SettingSeen]]:
        """Live domain XML, QMP query-block and qom-get (hypervisors/libvirt/settings_check.py)."""
        return settings_check.check_domain(self.conn, guest.name, tuple(d.spec for d in guest.disks))

    def backing_store(self, guest: Guest, disk: AttachedDisk) -> BackingFile:
        """A file-backed disk's raw file in the run's staging directory (this machine's, or the remote
        host's over SFTP); a disk of another backing (the null-co latency disk) holds no data."""
        if disk.spec.backing != "file":
            raise BackingUnreadable(f"{disk.spec.label} is a {disk.spec.backing} disk, not file-backed: it keeps no "
                                    "data to read back")
        if disk.spec.settings.format not in (None, "raw"):
            raise BackingUnreadable(f"{disk.spec.label} is a {disk.spec.settings.format} image: its file is not the "
                                    "guest's bytes in order (the suite reads raw files only)")
        if guest.console_log_path is None:
            raise BackingUnreadable(f"the run directory of guest {guest.name} is unknown: its disk files cannot be found")
        return BackingFile(self.files, disk_file(self.stage(guest.console_log_path.parent), disk.spec))

    def replay_sources(self, guest: Guest, controller: str) -> ReplaySources:
        """The live domain XML, libvirt's log of the domain (QEMU's command line), the controller's trace
        events, and the embedded guest's kernel and initramfs (a guest of ``--image``: None)."""
        family = CONTROLLERS[controller].trace_family
        embedded = self.image if guest.image is None else None
        return ReplaySources(self.conn.lookupByName(guest.name).XMLDesc(0), self.files.qemu_log(guest.name), family,
                             tuple(trace.FAMILY_EVENTS.get(family or "", ())),
                             embedded.kernel_path if embedded else None, embedded.initrd_path if embedded else None)

    def replay_device(self, disk: AttachedDisk) -> dict[str, object]:
        """The QOM properties read of the disk's device and its configured identity (hypervisors/libvirt/identity.py)."""
        return identity.replay_device(disk.spec)

    def request_tracer(self, guest: Guest, disk: AttachedDisk) -> trace.QemuTracer | None:
        family = CONTROLLERS[disk.spec.controller].trace_family
        if family is None or guest.console_log_path is None:
            return None
        return trace.QemuTracer(self.channel(guest, disk), family, self.stage(guest.console_log_path.parent) / TRACE_LOG,
                                logical_block_bytes=disk.configured.logical_block_bytes, files=self.files)

    def error_injector(self, guest: Guest, disk: AttachedDisk) -> BlkdebugInjector:
        """QEMU's blkdebug under the disk's format node (hypervisors/libvirt/error_propagation.py): file-backed disks."""
        kills = CONTROLLERS[disk.spec.controller].injected_error_kills
        if kills:
            raise InjectionUnavailable(f"on {disk.spec.controller} {kills} (measured: docs/rules/error-propagation.md)")
        options = format_options(disk.spec)
        if options is None:
            raise InjectionUnavailable(f"disk {disk.spec.label} is not file-backed: errors are injected between a "
                                       "disk's raw node and its file")
        return BlkdebugInjector(self.channel(guest, disk), options)

    def hotplug_disk(self, guest: Guest, beside: AttachedDisk) -> LibvirtHotplugDisk:
        """A raw file disk on the controller of ``beside``, after the guest's own disks
        (hypervisors/libvirt/hotplug.py); the file lives in the run's staging directory."""
        if guest.console_log_path is None:
            raise HotplugUnavailable(f"the run directory of guest {guest.name} is unknown: no place for the disk's file")
        spec = hotplug_spec(beside.spec)
        path = self.stage(guest.console_log_path.parent) / f"hotplug{spec.index}.img"
        xml = hotplug_xml([d.spec for d in guest.disks], spec, path)
        return LibvirtHotplugDisk(self.conn, guest.name, self.files, path, xml, spec)
    def discard_observer(self, guest: Guest, disk: AttachedDisk) -> QmpDiscardObserver:
        """QMP's unmap counters of the disk's device and its backing file's allocation
        (hypervisors/libvirt/discard.py): file-backed disks, whose nodes the suite opens with discard=unmap
        (``--disk discard=ignore``: QEMU drops the guest's discards, as asked, and the rule does not apply)."""
        if disk.spec.backing != "file":
            raise DiscardUnavailable(f"{disk.spec.label} is a {disk.spec.backing} disk, not file-backed: it has no "
                                     "backing store to give discarded space back to")
        if disk.spec.settings.discard == "ignore":
            raise DiscardUnavailable(f"{disk.spec.label} is set up with discard=ignore (--disk, --profile): QEMU drops "
                                     "the guest's discards before the file, as asked")
        if disk.spec.settings.format not in (None, "raw"):
            raise DiscardUnavailable(f"{disk.spec.label} is a {disk.spec.settings.format} image: its file's offsets are "
                                     "not the guest's (the allocation is read at the guest's offsets), and qcow2 hands "
                                     "the file the discards of whole allocated clusters only (the suite judges raw "
                                     "files only)")
        if guest.console_log_path is None:
            raise DiscardUnavailable(f"the run directory of guest {guest.name} is unknown: its disk files cannot be found")
        stage = self.stage(guest.console_log_path.parent)
        return QmpDiscardObserver(self.channel(guest, disk), self.files, disk_file(stage, disk.spec),
                                  stage / TRACE_LOG, self.files)

    def resizer(self, guest: Guest, disk: AttachedDisk) -> QmpResizer:
        """QMP ``block_resize`` on the disk's top node (hypervisors/libvirt/resize.py)."""
        return QmpResizer(self.channel(guest, disk))

    def disk_hold(self, guest: Guest, disk: AttachedDisk) -> stall_tolerance.ThrottleHold:
        """QEMU's throttle at 1 byte/s on the disk's block backend (hypervisors/libvirt/stall_tolerance.py), through a
        libvirt connection of the holds' own (opened on first use, closed with the backend's cleanup).
        HoldUnavailable for a disk with I/O limits asked (``--disk iops=``, ``bps=``): the hold's release
        would take them off."""
        if disk.spec.settings.iops or disk.spec.settings.bps:
            raise HoldUnavailable(f"{disk.spec.label} has I/O limits of its own ({disk.spec.settings}): the stall is "
                                  "held with QEMU's throttle, whose release would take them off")
        if self._hold_conn is None:
            self._hold_conn = open_connection(self.uri)
            conn = self._hold_conn
            self.cleanup.push("libvirt connection of the stall's hold", lambda: _close(conn))
        return stall_tolerance.ThrottleHold(DomainQmp(self._hold_conn, guest.name, disk.host_ref),
                                  lambda: self.destroy_by_name(guest.name))

    def disk_throttle(self, guest: Guest, disk: AttachedDisk) -> QmpThrottle:
        """QMP ``block_set_io_throttle`` and ``query-block`` on the disk's block backend (hypervisors/libvirt/throttle.py)."""
        return QmpThrottle(self.channel(guest, disk))

    def recovery_watch(self, guest: Guest, disk: AttachedDisk) -> stall_tolerance.TraceRecoveryWatch | None:
        if guest.console_log_path is None:
            return None
        return stall_tolerance.TraceRecoveryWatch(self.channel(guest, disk), disk.spec.controller,
                                        self.stage(guest.console_log_path.parent) / TRACE_LOG, self.files)

    def environment(self, guest: Guest) -> dict[str, str]:
        return environment.environment(self.conn, guest.name, self.files.kernel_release())

    def close(self) -> None:
        for mirror in self._mirrors.values():
            mirror.stop()
        with contextlib.suppress(libvirt.libvirtError):
            self.conn.close()
        self.files.close()


#: libvirt domain states in which the guest cannot run, as ``guest_dead_reason`` names them
_DOMAIN_STATES = {libvirt.VIR_DOMAIN_SHUTDOWN: "shutting down", libvirt.VIR_DOMAIN_SHUTOFF: "shut off",
                  libvirt.VIR_DOMAIN_CRASHED: "crashed", libvirt.VIR_DOMAIN_PMSUSPENDED: "suspended by the guest"}
#: pause reasons that leave the guest paused until someone intervenes
_PAUSED_ON_ERROR = {libvirt.VIR_DOMAIN_PAUSED_IOERROR: "a host I/O error on one of its disks",
                    libvirt.VIR_DOMAIN_PAUSED_CRASHED: "the guest crashed",
                    libvirt.VIR_DOMAIN_PAUSED_WATCHDOG: "its watchdog fired",
                    libvirt.VIR_DOMAIN_PAUSED_SHUTTING_DOWN: "it is shutting down",
                    libvirt.VIR_DOMAIN_PAUSED_POSTCOPY_FAILED: "a failed migration"}


class GuestStoppedDuringBoot(HypervisorError):
    """The domain went away before the guest was up (QEMU exited or crashed)."""


def _attached(request: GuestRequest) -> tuple[AttachedDisk, ...]:
    """The request's disks as the suite attached them: QEMU device, configured limits, found by serial."""
    return tuple(AttachedDisk(d, device_id(d), CONTROLLERS[d.controller].configured(d),
                              GuestDiskId("serial", d.serial)) for d in request.disks)


def _close(conn: libvirt.virConnect) -> None:
    with contextlib.suppress(libvirt.libvirtError):
        conn.close()


def _accel_name(domain_type: str) -> str:
    """The Guest's ``accel`` for a libvirt domain type: "kvm", or "tcg" for type qemu."""
    return "kvm" if domain_type == "kvm" else "tcg"


def _is_active(dom: libvirt.virDomain) -> bool:
    try:
        return bool(dom.isActive())
    except libvirt.libvirtError:
        return False


def _read_bytes(qmp: DomainQmp) -> int | None:
    """Bytes the guest read from its boot disk so far; None if the monitor does not say (yet)."""
    try:
        return qmp.counters().rd_bytes
    except (HypervisorError, ParseError, libvirt.libvirtError):
        return None


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.splitlines()[-lines:])

