"""Booting a user's image (``--image``) under libvirt: its disks, its firmware, its readiness.

The image's own bootloader boots it; the domain has no ``<kernel>``. What the guest gets besides
the disks under test:

- the boot disk: a qcow2 overlay (``images.user.create_overlay``) on virtio-blk at PCI slot
  ``BOOT_PCI_SLOT``, serial ``vioc-boot``, first in the firmware's boot order (``bootindex`` 1:
  SeaBIOS would otherwise try the built-in IDE first, where the ``ide`` controller's disks under
  test sit);
- the cloud-init NoCloud seed (``images.seed``), unless a login was given: a read-only
  virtio-blk disk at ``SEED_PCI_SLOT``, serial ``vioc-seed``; cloud-init finds it by its label
  ``cidata``. virtio-blk, not a CD-ROM: the ``ide`` and ``ahci`` controllers under test use the
  built-in IDE and an AHCI HBA, and a seed there would sit among their disks.

Both are QEMU arguments (JSON ``-blockdev``/``-device``), like the suite's other disks libvirt
has no XML for, so libvirt never relabels (chowns) the user's image: the suite hands the
overlay and the seed to QEMU's user itself, and checks that QEMU's user can read the image.
The slots sit below the suite's network (0x11) and disks under test (0x12-0x1f) and well above
those libvirt fills from 0x02 on. The rules find their disks by serial and never see these two.

Firmware: BIOS is SeaBIOS, with its messages on the serial console (``<bios useserial>``).
UEFI is OVMF from Debian's ``ovmf`` package: ``OVMF_CODE_4M.fd`` read-only and a per-run copy of
``OVMF_VARS_4M.fd`` in the run directory (the build without Secure Boot, which needs no SMM and
so runs on the ``pc`` machine the suite uses). ``VIOCONFORM_OVMF_DIR`` points the lookup
elsewhere (the tests point it at an empty directory to see the error of a host without OVMF).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePath
from xml.sax.saxutils import escape

import paramiko

from hypervisors.base import GuestRequest, ImageRequest
from hypervisors.bootwait import PROGRESS_S, Access, BootJudge, Observation
from hypervisors.libvirt.controllers import give_to_qemu
from hypervisors.libvirt.hostfiles import RemoteFiles
from images import cloudinit
from images.seed import write_seed
from images.user import Reader, create_overlay
from model.errors import HypervisorError
from model.types import SshEndpoint
from transport.probe import ProbeResult, Stage, load_private_key, probe

log = logging.getLogger("vioconform.libvirt")

BOOT_PCI_SLOT = 0x0F
SEED_PCI_SLOT = 0x10
BOOT_SERIAL = "vioc-boot"
SEED_SERIAL = "vioc-seed"
#: QEMU device id of the boot disk (its counters are found by it)
BOOT_DEVICE_ID = "ua-vioc-boot"
SEED_DEVICE_ID = "ua-vioc-seed"
#: The user QEMU runs as under the system daemon (Debian's libvirt-daemon-system creates it).
QEMU_USER = "libvirt-qemu"

OVMF_DIR_ENV = "VIOCONFORM_OVMF_DIR"
DEFAULT_OVMF_DIR = Path("/usr/share/OVMF")
OVMF_CODE = "OVMF_CODE_4M.fd"
OVMF_VARS = "OVMF_VARS_4M.fd"
#: Seconds between SSH probes while a guest boots, and between looks at the console and the boot disk.
PROBE_PERIOD_S = 1.0


def ovmf_dir() -> Path:
    return Path(os.environ.get(OVMF_DIR_ENV) or DEFAULT_OVMF_DIR)


def ovmf_files() -> tuple[Path, Path]:
    """OVMF's code and variable-store template; HypervisorError naming the package if absent."""
    d = ovmf_dir()
    code, variables = d / OVMF_CODE, d / OVMF_VARS
    missing = [p for p in (code, variables) if not p.is_file()]
    if missing:
        raise HypervisorError(f"--firmware uefi needs OVMF, and {', '.join(map(str, missing))} "
                              f"{'is' if len(missing) == 1 else 'are'} missing: install Debian's ovmf package "
                              "(apt-get install ovmf; scripts/setup-host.sh does)")
    return code, variables


@dataclass(frozen=True)
class BootFiles:
    """What the run directory holds for an image boot."""

    overlay: PurePath  # on the libvirt host, as the seed and the variable store
    seed: PurePath | None  # None: a login was given, no seed
    nvram: PurePath | None  # the per-run OVMF variable store; None for BIOS
    endpoint_user: str
    key_path: Path
    host_key: str  # the pinned public line


def prepare(request: GuestRequest, image: ImageRequest, run_key: Path, remote: RemoteFiles | None = None,
            stage: PurePath | None = None) -> BootFiles:
    """Overlay, seed and UEFI variables in the run directory (removed with it); with ``remote``, in
    the staging directory ``stage`` on the remote libvirt host (the image uploaded there once)."""
    run_dir = request.run_dir
    nvram: PurePath | None = None
    if remote is not None and stage is not None:
        overlay: PurePath = remote.overlay(remote.image_on_host(image.info), image.info.format, stage)
        if image.firmware == "uefi":
            nvram = remote.copy_for_qemu(DEFAULT_OVMF_DIR / OVMF_VARS, stage / "OVMF_VARS.fd")
    else:
        reader = Reader.of_user(QEMU_USER) if os.geteuid() == 0 else None  # as another user QEMU runs as that user
        overlay = create_overlay(image.info, run_dir, reader)
        if image.firmware == "uefi":
            _, template = ovmf_files()
            nvram = run_dir / "OVMF_VARS.fd"
            shutil.copyfile(template, nvram)  # libvirt hands it to QEMU's user
    if image.login is not None:
        return BootFiles(overlay, None, nvram, image.login.user, image.login.key_path, image.login.host_key)
    host_key = cloudinit.generate_host_key()
    seed: PurePath = write_seed(run_dir / "seed.iso",
                                cloudinit.user_data(cloudinit.DEFAULT_GUEST_USER, request.authorized_key, host_key),
                                cloudinit.meta_data(f"vioconform-{uuid.uuid4()}"))
    if remote is not None and stage is not None:
        seed = remote.put_for_qemu(Path(seed), stage / "seed.iso")
    else:
        give_to_qemu(Path(seed))
    return BootFiles(overlay, seed, nvram, cloudinit.DEFAULT_GUEST_USER, run_key, host_key.public_line)


def os_xml(firmware: str, nvram: PurePath | None, machine: str = "pc", local: bool = True) -> str:
    """The domain's ``<os>``: the image's bootloader, through SeaBIOS or OVMF, on ``machine``
    (a remote host's OVMF is where Debian's package puts it, checked before any guest)."""
    head = f"<os><type arch='x86_64' machine='{escape(machine)}'>hvm</type>"
    if firmware == "uefi":
        code: PurePath = ovmf_files()[0] if local else DEFAULT_OVMF_DIR / OVMF_CODE
        return (f"{head}<loader readonly='yes' type='pflash'>{escape(str(code))}</loader>"
                f"<nvram>{escape(str(nvram))}</nvram></os>")
    return f"{head}<bios useserial='yes'/></os>"


def _virtio_disk(node: str, device_id: str, serial: str, slot: int, bootindex: int | None) -> dict[str, object]:
    props: dict[str, object] = {"driver": "virtio-blk-pci", "drive": node, "id": device_id, "serial": serial,
                                "bus": "pci.0", "addr": f"{slot:#x}"}
    if bootindex is not None:
        props["bootindex"] = bootindex
    return props


#: The boot overlay's cache: the host's page cache, and the guest's flushes end at QEMU (``cache=unsafe``).
#: The overlay lives as long as the run and is thrown away with it (the user's image under it is
#: only read), so a flush has nothing to keep; under TCG each one is a host ``fdatasync`` that the
#: guest's journal commit waits for (docs/benchmarks.md, "The test image's boot").
OVERLAY_CACHE: dict[str, object] = {"direct": False, "no-flush": True}


def qemu_args(files: BootFiles) -> list[str]:
    """The boot disk and the seed as JSON QEMU arguments. QEMU opens the overlay's backing file
    (the user's image, named in its header) read-only."""
    boot: dict[str, object] = {"driver": "qcow2", "node-name": "vioc-boot", "cache": OVERLAY_CACHE,
                               "file": {"driver": "file", "filename": str(files.overlay), "cache": OVERLAY_CACHE}}
    args = ["-blockdev", json.dumps(boot),
            "-device", json.dumps(_virtio_disk("vioc-boot", BOOT_DEVICE_ID, BOOT_SERIAL, BOOT_PCI_SLOT, 1))]
    if files.seed is not None:
        seed = {"driver": "raw", "node-name": "vioc-seed", "read-only": True,
                "file": {"driver": "file", "filename": str(files.seed), "read-only": True}}
        args += ["-blockdev", json.dumps(seed),
                 "-device", json.dumps(_virtio_disk("vioc-seed", SEED_DEVICE_ID, SEED_SERIAL, SEED_PCI_SLOT, None))]
    return args


def access_of(files: BootFiles, image: ImageRequest) -> Access:
    if image.login is None:
        return Access(files.endpoint_user, seeded=True, key_name="the run's key")
    return Access(files.endpoint_user, seeded=False, key_name=f"--guest-key {image.login.key_path}")


def wait_for_ssh(name: str, endpoint: SshEndpoint, timeout_s: float, access: Access, firmware: str,
                 console: Path | Callable[[], str],
                 stopped: Callable[[], None], panicked: Callable[[str], str | None],
                 boot_disk_read: Callable[[], int | None], clock: Callable[[], float] = time.monotonic) -> float:
    """Poll until the guest lets the suite in over SSH as ``endpoint`` says; the seconds it took.

    ``console``: the console log's path, or what reads it (a remote host's, over SFTP).
    ``stopped`` raises if the domain no longer runs (the backend's error, with QEMU's log);
    ``panicked`` names a kernel panic on the console. Raises ``bootwait.BootFailed`` with the
    cause as soon as it shows (see ``hypervisors.bootwait``).

    The SSH probes run in a thread of their own: a probe waits up to ``transport.probe.BANNER_TIMEOUT_S``
    on a silent connection (QEMU holds it open while the guest's network is not up yet), and the
    judge looks at the console, the boot disk and the latest probe every ``PROBE_PERIOD_S`` meanwhile."""
    judge = BootJudge(name, endpoint.port, timeout_s, access, endpoint.host_key, firmware)
    client_key = load_private_key(endpoint.key_path)
    prober = _Prober(endpoint, client_key)
    prober.start()
    t0 = clock()
    next_progress = t0 + PROGRESS_S
    try:
        while True:
            result = prober.latest
            text = console() if callable(console) else (console.read_text(errors="replace") if console.exists() else "")
            panic = panicked(text)  # first: a kernel that panics and reboots also stops the domain (on_reboot)
            if panic is not None:
                raise HypervisorError(f"guest {name} did not boot: {panic}", console_log=_tail(text))
            stopped()
            if judge.judge(Observation(clock() - t0, result, text, boot_disk_read(), os.getloadavg()[0])):
                return clock() - t0
            if clock() >= next_progress:
                log.info("%s", judge.progress())
                next_progress = clock() + PROGRESS_S
            prober.changed.wait(PROBE_PERIOD_S)
            prober.changed.clear()
    finally:
        prober.stop()


class _Prober(threading.Thread):
    """Probes the guest's SSH until stopped or logged in; ``latest`` is the last probe's result."""

    def __init__(self, endpoint: SshEndpoint, client_key: paramiko.PKey) -> None:
        super().__init__(name="vioconform-ssh-probe", daemon=True)
        self.endpoint = endpoint
        self.client_key = client_key
        self.latest = ProbeResult(Stage.NO_BANNER, "no answer yet")
        self.changed = threading.Event()
        self._halt = threading.Event()

    def run(self) -> None:
        ep = self.endpoint
        while not self._halt.is_set():
            started = time.monotonic()
            self.latest = probe(ep.host, ep.port, ep.user, self.client_key, ep.host_key, via=ep.via)
            self.changed.set()
            if self.latest.stage is Stage.READY:
                return
            self._halt.wait(max(0.0, PROBE_PERIOD_S - (time.monotonic() - started)))

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=1.0)  # a probe in a banner wait ends by itself; the thread is a daemon


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.splitlines()[-lines:])
