"""What the libvirt backend checks before any guest starts: each a one-line usage error.

A user's image (``--image``: readable, qcow2 or raw, a disk; see guest.image.user), OVMF for
``--firmware uefi``, the kernel package (``--guest-kernel-deb``), the image and KVM probe caches, the URI (opened,
with a timeout) and ``--accel kvm`` on a host where KVM cannot boot a guest. The session
turns a failure here into pytest's usage error (exit 4): no guest, no traceback.
"""

from __future__ import annotations

import socket
import tempfile
import threading
from pathlib import Path
from urllib.parse import urlparse

import libvirt

from guest.cache import CacheNotWritable
from guest.image.build import ImageBuildError, check_image_cache, check_kernel_deb
from guest.image.user import Reader, UserImageError, check_image, check_space
from hypervisors.base import BackendOptions
from hypervisors.libvirt import accel, environment, imageboot, machine
from model.errors import HypervisorError

#: Opening a local daemon takes milliseconds; a URI that leads nowhere (a host that swallows
#: packets, a server that never answers) would otherwise hang the run for TCP's minutes.
CONNECT_TIMEOUT_S = 10.0


def open_connection(uri: str, timeout_s: float = CONNECT_TIMEOUT_S) -> libvirt.virConnect:
    hint = ("Is libvirtd running (scripts/setup-host.sh starts it) and is the URI right "
            "(e.g. qemu:///system)?")
    box: dict[str, object] = {}

    def connect() -> None:
        try:
            box["conn"] = libvirt.open(uri)
        except libvirt.libvirtError as e:
            box["error"] = e

    # A thread, because libvirt.open has no timeout; an abandoned one dies with the process.
    opener = threading.Thread(target=connect, name="libvirt-open", daemon=True)
    opener.start()
    opener.join(timeout_s)
    if opener.is_alive():
        raise HypervisorError(f"cannot connect to libvirt at {uri!r}: no answer within {timeout_s:.0f} s. {hint}")
    error = box.get("error")
    if isinstance(error, libvirt.libvirtError):
        raise HypervisorError(f"cannot connect to libvirt at {uri!r}: {error.get_error_message()}. {hint}")
    conn = box["conn"]
    assert isinstance(conn, libvirt.virConnect)
    return conn


def is_local(uri: str) -> bool:
    """Whether the URI's daemon runs on this machine (no host, or this machine's name)."""
    return urlparse(uri).hostname in (None, "", "localhost", "127.0.0.1", "::1", socket.gethostname())


def check_drives_qemu(uri: str, conn: libvirt.virConnect) -> None:
    if conn.getType() != "QEMU":
        raise HypervisorError(f"libvirt URI {uri!r} drives {conn.getType()}, not QEMU; use a qemu:// URI")


def validate_options(opts: BackendOptions) -> None:
    """Raise HypervisorError, in one line, for anything known wrong before a guest starts."""
    if opts.image is not None:
        try:
            facts = check_image(opts.image)
            # The run directory is made in $TMPDIR (hypervisors.cleanup.make_run_dir).
            check_space(facts.path, facts.format, Path(tempfile.gettempdir()), Reader.of_user(imageboot.QEMU_USER))
        except UserImageError as e:
            raise HypervisorError(str(e)) from None
    if opts.firmware == "uefi":
        imageboot.ovmf_files()
    try:
        if opts.guest_kernel_deb is not None:
            check_kernel_deb(opts.guest_kernel_deb)
        check_image_cache(opts.guest_kernel_deb)
    except ImageBuildError as e:
        raise HypervisorError(f"--guest-kernel-deb: {e}") from None
    except CacheNotWritable as e:
        raise HypervisorError(str(e)) from None
    uri = opts.libvirt_uri
    if not is_local(uri):
        raise HypervisorError(f"--libvirt-uri {uri}: the libvirt host must be this machine (the guest's SSH "
                              f"is forwarded on 127.0.0.1); run vioconform on {urlparse(uri).hostname}")
    if opts.emulator is not None:
        machine.check_emulator(opts.emulator)
    conn = open_connection(uri)
    try:
        check_drives_qemu(uri, conn)
        machine.check_machine(opts.emulator or environment.default_emulator(conn), opts.machine, opts.controllers)
        if opts.accel == "kvm":
            accel.check_forced_kvm(uri, conn)
        accel.check_cache_writable(uri, conn, opts.accel)
    except CacheNotWritable as e:
        raise HypervisorError(str(e)) from None
    finally:
        conn.close()
