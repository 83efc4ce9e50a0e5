"""What the libvirt backend checks before any guest starts: each a one-line usage error.

A user's image (``--image``: readable, qcow2 or raw, a disk; see guest.image.user), OVMF for
``--firmware uefi``, the kernel package (``--guest-kernel-deb``), the image and KVM probe caches, the URI (opened,
with a timeout) and ``--accel kvm`` on a host where KVM cannot boot a guest. The session
turns a failure here into pytest's usage error (exit 4): no guest, no traceback.
"""

from __future__ import annotations

import shlex
import socket
import tempfile
import threading
from pathlib import Path, PurePath, PurePosixPath
from urllib.parse import urlparse

import libvirt

from guest.cache import CacheNotWritable
from guest.image.build import check_image_cache, check_kernel_deb
from guest.image.errors import ImageBuildError
from guest.image.user import Reader, UserImageError, check_image, check_space
from hypervisors.base import BackendOptions
from hypervisors.libvirt import accel, environment, imageboot, machine
from hypervisors.libvirt.hostlink import SSH_TRANSPORTS, HostAddress, HostLink, HostLinkError
from model.errors import HypervisorError
from model.secret import redact_url, scrub

#: Opening a local daemon takes milliseconds; a URI that leads nowhere (a host that swallows
#: packets, a server that never answers) would otherwise hang the run for TCP's minutes.
CONNECT_TIMEOUT_S = 10.0
#: What a run stages on a remote host: the embedded kernel and initramfs (about 40 MB), the logs,
#: and sparse disk files (which take no room until written; the rules write at most a few MB).
HOST_DIR_MIN_FREE_MIB = 200


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
        raise HypervisorError(f"cannot connect to libvirt at {redact_url(uri)!r}: no answer within {timeout_s:.0f} s. "
                              f"{hint}")
    error = box.get("error")
    if isinstance(error, libvirt.libvirtError):
        raise HypervisorError(f"cannot connect to libvirt at {redact_url(uri)!r}: "
                              f"{scrub(str(error.get_error_message()))}. {hint}")
    conn = box["conn"]
    assert isinstance(conn, libvirt.virConnect)
    return conn


def is_local(uri: str) -> bool:
    """Whether the URI's daemon runs on this machine and shares its files: no host or this machine's
    name, and not an SSH transport (``qemu+ssh://`` is a remote host even on loopback: the suite
    then stages its files over SSH, as for any other host)."""
    u = urlparse(uri)
    if u.scheme.partition("+")[2] in SSH_TRANSPORTS:
        return False
    return u.hostname in (None, "", "localhost", "127.0.0.1", "::1", socket.gethostname())


def check_drives_qemu(uri: str, conn: libvirt.virConnect) -> None:
    if conn.getType() != "QEMU":
        raise HypervisorError(f"libvirt URI {redact_url(uri)!r} drives {conn.getType()}, not QEMU; use a qemu:// URI")


def validate_options(opts: BackendOptions) -> None:
    """Raise HypervisorError, in one line, for anything known wrong before a guest starts."""
    local = is_local(opts.libvirt_uri)
    image_bytes = 0
    if opts.image is not None:
        try:
            facts = check_image(opts.image)
            image_bytes = facts.path.stat().st_size
            if local:  # the run directory is made in $TMPDIR (hypervisors.cleanup.make_run_dir)
                check_space(facts.path, facts.format, Path(tempfile.gettempdir()), Reader.of_user(imageboot.QEMU_USER))
        except UserImageError as e:
            raise HypervisorError(str(e)) from None
    if opts.firmware == "uefi" and local:
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
    link = None
    if not local:
        link = HostLink(HostAddress.from_uri(uri))  # the host key is checked here, first
    elif opts.emulator is not None:
        machine.check_emulator(opts.emulator)
    try:
        conn = open_connection(uri)
    except BaseException:
        if link is not None:
            link.close()
        raise
    try:
        check_drives_qemu(uri, conn)
        emulator = opts.emulator or environment.default_emulator(conn)
        types = None
        if link is not None:
            types = machine.machine_types_of(remote_machine_help(link, emulator, opts.emulator is not None),
                                             f"{emulator} on {link.address.host}")
            check_host_dir(link, PurePosixPath(opts.host_dir), image_bytes)
            if opts.firmware == "uefi":
                check_remote_ovmf(link)
        machine.check_machine(emulator, opts.machine, opts.controllers, types)
        if opts.accel == "kvm":
            accel.check_forced_kvm(uri, conn)
        accel.check_cache_writable(uri, conn, opts.accel)
    except CacheNotWritable as e:
        raise HypervisorError(str(e)) from None
    finally:
        conn.close()
        if link is not None:
            link.close()


def remote_machine_help(link: HostLink, emulator: Path, given: bool) -> str:
    """``-machine help`` of the emulator on a remote libvirt host (``--emulator`` names a path there)."""
    what = f"--emulator {emulator}" if given else f"libvirt's QEMU {emulator}"
    try:
        return link.run(f"test -x {shlex.quote(str(emulator))} && {shlex.quote(str(emulator))} -machine help")
    except HostLinkError as e:
        raise HypervisorError(f"{what}: not an executable QEMU on {link.address.host} ({str(e).splitlines()[-1]}); "
                              "install qemu-system-x86 there or give the path of its QEMU") from None


def check_remote_ovmf(link: HostLink) -> None:
    code, variables = imageboot.DEFAULT_OVMF_DIR / imageboot.OVMF_CODE, imageboot.DEFAULT_OVMF_DIR / imageboot.OVMF_VARS
    try:
        link.run(f"test -f {shlex.quote(str(code))} && test -f {shlex.quote(str(variables))}")
    except HostLinkError:
        raise HypervisorError(f"--firmware uefi needs OVMF on {link.address.host} ({code}, {variables}): install "
                              "Debian's ovmf package there") from None


def check_host_dir(link: HostLink, host_dir: PurePath, image_bytes: int = 0) -> None:
    """The remote staging directory can be made and written, and its file system has room for a
    run's boot files (the initramfs alone is tens of MB) and a user's image (uploaded once)."""
    q = shlex.quote(str(host_dir))
    try:
        free_kib = int(link.run(f"mkdir -p -m 0755 {q} && test -w {q} && df -Pk {q} | awk 'NR==2 {{print $4}}'").strip())
    except (HostLinkError, ValueError) as e:
        raise HypervisorError(f"--host-dir {host_dir}: cannot use it on {link.address.host}: {e}") from None
    # QEMU runs as its own user there (Debian: libvirt-qemu) and must reach the files: a directory
    # under a private one (a home, pytest's tmp) fails only when QEMU opens its first file.
    qemu_user = imageboot.QEMU_USER
    try:
        link.run(f"if [ \"$(id -u)\" = 0 ] && id {qemu_user} >/dev/null 2>&1; then "
                 f"runuser -u {qemu_user} -- test -x {q}; fi")
    except HostLinkError:
        raise HypervisorError(f"--host-dir {host_dir} on {link.address.host}: QEMU's user {qemu_user} cannot enter "
                              "it (a parent directory is private); choose one under /var/tmp, such as the default "
                              "/var/tmp/vioconform") from None
    need_mib = HOST_DIR_MIN_FREE_MIB + image_bytes // 1024**2
    if free_kib < need_mib * 1024:
        raise HypervisorError(f"--host-dir {host_dir} on {link.address.host} has {free_kib // 1024} MiB free; a run "
                              f"stages about {need_mib} MiB there (kernel, initramfs, logs"
                              f"{', the image' if image_bytes else ''}); free some space or point --host-dir elsewhere")
