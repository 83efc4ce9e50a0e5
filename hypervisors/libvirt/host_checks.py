"""What the libvirt backend checks before any guest starts: each a one-line usage error.

A user's image (``--image``: readable, qcow2 or raw, a disk; see images.user), OVMF for
``--firmware uefi``, the kernel package (``--guest-kernel-deb``), the image and KVM probe caches, the URI (opened,
with a timeout) and ``--accel kvm`` on a host where KVM cannot boot a guest. The session
turns a failure here into pytest's usage error (exit 4): no guest, no traceback.
"""

from __future__ import annotations

import re
import shlex
import socket
import tempfile
import threading
from pathlib import Path, PurePath, PurePosixPath
from urllib.parse import parse_qs, urlparse

import libvirt

from hypervisors.base import BackendOptions
from hypervisors.libvirt import accel, environment, imageboot, machine
from hypervisors.libvirt.hostlink import SSH_TRANSPORTS, HostAddress, HostLink, HostLinkError, libvirt_uri, login_name
from images.build import check_image_cache, check_kernel_deb
from images.build_error import ImageBuildError
from images.cache import CacheNotWritable
from images.user import Reader, UserImageError, check_image, check_space
from model.errors import HypervisorError
from model.secret import redact_url, scrub

#: Opening a local daemon takes milliseconds; a URI that leads nowhere (a host that swallows
#: packets, a server that never answers) would otherwise hang the run for TCP's minutes.
CONNECT_TIMEOUT_S = 10.0
#: What a run stages on a remote host: the embedded kernel and initramfs (about 40 MB), the logs,
#: and sparse disk files (which take no room until written; the rules write at most a few MB).
HOST_DIR_MIN_FREE_MIB = 200

# libvirt logs its own errors to stderr by default; open_connection reports them itself.
libvirt.registerErrorHandler(lambda _ctx, _err: None, None)


def open_connection(uri: str, timeout_s: float = CONNECT_TIMEOUT_S) -> libvirt.virConnect:
    """libvirt's connection to ``uri`` (through ``libvirt_uri``: an ``ssh`` transport URI with
    ``known_hosts=`` gets the suite's ``command=``), within ``timeout_s``; HypervisorError naming
    the cause and its remedy otherwise."""
    target = libvirt_uri(uri)
    box: dict[str, object] = {}

    def connect() -> None:
        try:
            box["conn"] = libvirt.open(target)
        except libvirt.libvirtError as e:
            box["error"] = e

    # A thread, because libvirt.open has no timeout; an abandoned one dies with the process.
    opener = threading.Thread(target=connect, name="libvirt-open", daemon=True)
    opener.start()
    opener.join(timeout_s)
    if opener.is_alive():
        raise HypervisorError(f"cannot connect to libvirt at {redact_url(uri)!r}: no answer within {timeout_s:.0f} s. "
                              f"{_default_remedy(uri)}")
    error = box.get("error")
    if isinstance(error, libvirt.libvirtError):
        raise HypervisorError(open_error(uri, str(error.get_error_message())))
    conn = box["conn"]
    assert isinstance(conn, libvirt.virConnect)
    return conn


def _default_remedy(uri: str) -> str:
    u = urlparse(uri)
    if u.scheme.partition("+")[2] in SSH_TRANSPORTS or u.hostname:
        return f"Is libvirt's daemon running on {u.hostname}, and is the URI right (qemu+ssh://root@HOST/system)?"
    return "Is libvirtd running (scripts/setup-host.sh starts it) and is the URI right (e.g. qemu:///system)?"


#: What libvirt's error says, lower-cased, for each cause (the ``ssh`` program's words, which libvirt
#: passes on, libssh's, and the daemon's socket). Read top down: the first cause that matches is it.
HOST_KEY_SAYS = ("host key verification failed", "remote host identification has changed", "host key")
LOGIN_SAYS = ("permission denied (", "too many authentication failures", "no more authentication methods",
              "authentication methods with libssh", "failed to authenticate")
UNREACHABLE_SAYS = ("could not resolve hostname", "no route to host", "network is unreachable",
                    "connection timed out", "kex_exchange_identification", "connection closed by")
RIGHTS_SAYS = ("permission denied", "authentication unavailable", "access denied", "polkit",
               "unable to get system bus connection", "not authorized")
DAEMON_SAYS = ("failed to connect socket", "no such file or directory", "connection refused",
               "unix connect failed")
#: libvirt reads the first 4 bytes the host sends as the length of its first packet: text a login
#: prints (nologin's "This account is currently not available.") reads as a length of 1.4 billion.
PRINTED_SAYS = "bytes received from server too large"
#: The length word that starts each packet of libvirt's protocol.
LENGTH_BYTES = 4


def open_error(uri: str, message: str) -> str:
    """One line for libvirt's ``message`` when opening ``uri`` failed: its cause (the host's key,
    the SSH login, the user's rights, the daemon, the network) and what to do about it."""
    full = " ".join(scrub(message).split()).rstrip(".")
    low = full.lower()
    said = _cut(full)
    u = urlparse(uri)
    transport = u.scheme.partition("+")[2]
    remote = transport in SSH_TRANSPORTS or bool(u.hostname)
    host = u.hostname or "this machine"
    user = _ssh_user(uri) if transport in SSH_TRANSPORTS else (u.username or login_name())
    head = f"cannot connect to libvirt at {redact_url(uri)!r}"
    ssh_words = "ssh: connect to host" in low
    if transport in SSH_TRANSPORTS and any(w in low for w in HOST_KEY_SAYS):
        return f"{head}: {_host_key_error(uri, full)}"
    if transport in SSH_TRANSPORTS and any(w in low for w in LOGIN_SAYS):
        return (f"{head}: {host} refused libvirt's SSH login as {user} ({said}). Give the key with ?keyfile=PATH in "
                f"the URI (libvirt and the suite log in with it), or add its public key to {user}'s "
                "~/.ssh/authorized_keys there")
    if transport in SSH_TRANSPORTS and (ssh_words or any(w in low for w in UNREACHABLE_SAYS)):
        return (f"{head}: libvirt's ssh could not reach {host} ({said}). Check the host name and port in the URI "
                "and ~/.ssh/config, and that the host's sshd is up")
    if PRINTED_SAYS in low:
        return (f"{head}: the login on {host} printed text where libvirt's protocol was expected ({said}{_printed(said)})"
                f". {user}'s login shell refuses logins (nologin) or its shell start-up prints; log in as root or as a "
                "member of the libvirt group with a working shell")
    if any(w in low for w in RIGHTS_SAYS):
        who = f"{user} on {host}" if remote else "this user"
        how = (f"Log in as root (qemu+ssh://root@{host}/system) or add {user} to the libvirt group there "
               f"(adduser {user} libvirt)" if remote else
               "Run as root, or add the user to the libvirt group (adduser USER libvirt, then log in again)")
        return f"{head}: {who} may not use libvirt's daemon ({said}). {how}"
    if any(w in low for w in DAEMON_SAYS) or "nc: not found" in low:
        if "nc: not found" in low:
            return (f"{head}: {host} has neither virt-ssh-helper nor nc to reach libvirt's daemon with ({said}). "
                    "Install libvirt there (libvirt-daemon-system: its virt-ssh-helper), or check the URI's socket=")
        how = ("Start it there (systemctl start libvirtd), or check the URI's path (/system)" if remote else
               "Start it (scripts/setup-host.sh starts it; systemctl start libvirtd), or check the URI's socket=")
        return f"{head}: no libvirt daemon answers on {host} ({said}). {how}"
    return f"{head}: {said}. {_default_remedy(uri)}"


def _host_key_error(uri: str, said: str) -> str:
    """libvirt's SSH connection refused the host's key: which key, against which file, and the remedy.
    ``ssh``'s own page of warnings is cut to the sentence that says what happened."""
    u = urlparse(uri)
    query = parse_qs(u.query)
    host = u.hostname or ""
    scan = f"ssh-keyscan {f'-p {u.port} ' if u.port else ''}{host}"
    if "command" in query:
        where = "the known_hosts that the ssh of the URI's command= reads"
        then = ("; make that ssh check the same file as the suite's own connection (known_hosts= or "
                "~/.ssh/known_hosts), or leave command= out: the suite then runs ssh with the URI's known_hosts=")
    else:
        where = f"known_hosts {query['known_hosts'][0]}" if "known_hosts" in query else "~/.ssh/known_hosts"
        then = ""
    changed = re.search(r"fingerprint for the (\S+) key sent by the remote host is\s+(SHA256:[A-Za-z0-9+/=]+)", said)
    if changed or "has changed" in said.lower():
        presented = f" (it presented {changed.group(1)} {changed.group(2)})" if changed else ""
        return (f"libvirt's SSH connection refused {host}: it presented a host key other than the one in {where}"
                f"{presented}. If the host was reinstalled, check its new key's fingerprint and replace the old one "
                f"(ssh-keygen -R HOST -f FILE, then {scan} >> FILE){then}")
    unknown = re.search(r"No \S+ host key is known for \S+", said)
    detail = unknown.group(0) if unknown else said
    return (f"libvirt's SSH connection did not accept {host}'s host key ({_cut(detail)}): it is not in {where}. Check "
            f"the key's fingerprint, then add it ({scan} >> FILE){then}")


#: The most of libvirt's own words a one-line error quotes (ssh's warnings alone run to 1000 characters).
SAID_MAX_CHARS = 300


def _cut(said: str) -> str:
    return said if len(said) <= SAID_MAX_CHARS else said[:SAID_MAX_CHARS - 3] + "..."


def _ssh_user(uri: str) -> str:
    """The user libvirt's ssh logs in as: the URI's, ~/.ssh/config's, or the local login name."""
    try:
        return HostAddress.from_uri(uri).user
    except HypervisorError:
        return urlparse(uri).username or login_name()


def _printed(said: str) -> str:
    """What the host printed, from libvirt's "packet N bytes received from server too large": the 4
    bytes libvirt read as the packet's length, which counts those 4 bytes too (N is that length less 4)."""
    found = re.search(r"packet (\d+) bytes", said)
    if not found or int(found.group(1)) + LENGTH_BYTES >= 2**32:
        return ""
    text = (int(found.group(1)) + LENGTH_BYTES).to_bytes(LENGTH_BYTES, "big").decode("ascii", errors="replace")
    return f"; it began {text!r}" if text.isprintable() else ""


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
        check_image_cache(opts.guest_kernel_deb, opts.guest_kernel)
    except ImageBuildError as e:
        raise HypervisorError(f"--guest-kernel{'-deb' if opts.guest_kernel is None else ''}: {e}") from None
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
