"""The SSH connection to a remote libvirt host (``--libvirt-uri qemu+ssh://user@host/system``).

libvirt opens its own SSH connection for its API (``ssh``, ``libssh`` or ``libssh2`` transport).
The suite opens a second one, with paramiko, for what libvirt's API does not carry:

- the files a guest needs on the host (kernel, initramfs, disk files, the trace log) over SFTP,
  in a staging directory of the suite's own (``--host-dir``), removed at the end;
- the guest's SSH: QEMU forwards a port on the host's loopback (user-mode networking, as on
  this machine), and the suite reaches it through a ``direct-tcpip`` channel of this
  connection. No bridge, NAT rule or firewall change is made on the host;
- the console, the QEMU log and the exact-trace log, read back over SFTP.

The host's key is checked, never skipped: against the URI's ``known_hosts=FILE`` (libvirt's own
parameter name) or ``~/.ssh/known_hosts`` and ``/etc/ssh/ssh_known_hosts``, as ``ssh`` does. The
client key is the URI's ``keyfile=`` or the user's default keys and agent, as ``ssh`` uses them.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import logging
import shlex
import stat
import threading
import time
from dataclasses import dataclass
from pathlib import Path, PurePath
from urllib.parse import parse_qs, urlparse

import paramiko

from model.errors import HypervisorError
from model.secret import redact_url
from transport.ssh import SshNoAnswer, SshTimeouts, connect

log = logging.getLogger("vioconform.libvirt")

#: URI schemes whose daemon is reached over SSH (``qemu+ssh``, ``qemu+libssh``, ``qemu+libssh2``)
SSH_TRANSPORTS = ("ssh", "libssh", "libssh2")
#: Seconds to reach the host's SSH server (and to open a tunnel through it). Each step of opening the
#: connection has 10 s (HOST_SSH_TIMEOUTS), so a host that fails at any one of them is reported within
#: the 30 s the suite allows for a bad host.
CONNECT_TIMEOUT_S = 10.0
#: Seconds for the banner: sshd sends it as soon as it accepts, before reading anything (ms here; a
#: loaded host's fork and exec, a second or two). A port that accepts and stays silent is not an SSH server
#: that is up.
BANNER_TIMEOUT_S = 10.0
#: Seconds for key exchange and the key login: well under a second against a host's sshd here; 10 s
#: leaves room for a loaded host and an agent that asks its user.
HANDSHAKE_TIMEOUT_S = 10.0
HOST_SSH_TIMEOUTS = SshTimeouts(connect_s=CONNECT_TIMEOUT_S, banner_s=BANNER_TIMEOUT_S, handshake_s=HANDSHAKE_TIMEOUT_S)
#: How often a long upload logs its progress.
PROGRESS_EVERY_S = 5.0
#: Seconds a command on the host may take (``id -u``, ``uname -r``, ``rm -rf`` of a staging directory).
COMMAND_TIMEOUT_S = 30.0


class HostLinkError(HypervisorError):
    """The libvirt host's SSH could not be used: unreachable, an unknown or changed host key,
    authentication refused, SFTP missing."""


@dataclass(frozen=True)
class HostAddress:
    """Who and where, from a remote libvirt URI."""

    uri: str
    user: str
    host: str
    port: int
    keyfile: Path | None
    known_hosts: Path | None

    @property
    def shown(self) -> str:
        return f"{self.user}@{self.host}:{self.port}"

    @property
    def host_id(self) -> str:
        """The name known_hosts files give this host (``[host]:port`` off port 22)."""
        return self.host if self.port == 22 else f"[{self.host}]:{self.port}"

    @classmethod
    def from_uri(cls, uri: str) -> HostAddress:
        u = urlparse(uri)
        transport = u.scheme.partition("+")[2]
        if transport not in SSH_TRANSPORTS or not u.hostname:
            raise HostLinkError(f"--libvirt-uri {redact_url(uri)}: a remote libvirt host is reached over SSH; use "
                                "qemu+ssh://user@host/system (or qemu+libssh://...)")
        query = parse_qs(u.query)
        keyfile = query.get("keyfile", [None])[0]
        known = query.get("known_hosts", [None])[0]
        return cls(uri, u.username or "root", u.hostname, u.port or 22,
                   Path(keyfile) if keyfile else None, Path(known) if known else None)


class HostLink:
    """One paramiko connection to the libvirt host: commands, SFTP and tunnels. Thread-safe as
    paramiko is: each use opens its own channel."""

    def __init__(self, address: HostAddress, timeouts: SshTimeouts = HOST_SSH_TIMEOUTS) -> None:
        self.address = address
        self._client = _connect(address, timeouts)
        self._sftp: paramiko.SFTPClient | None = None
        self._lock = threading.Lock()
        #: SFTP requests one at a time: the console mirror's thread reads while the main thread works
        self._io = threading.RLock()
        transport = self._client.get_transport()
        if transport is not None:
            transport.set_keepalive(15)

    # -- commands --------------------------------------------------------------------------
    def run(self, command: str, timeout_s: float = COMMAND_TIMEOUT_S) -> str:
        """Run a shell command on the host; its stdout, or HostLinkError with its stderr."""
        try:
            _stdin, stdout, stderr = self._client.exec_command(command, timeout=timeout_s)
            out = stdout.read().decode(errors="replace")
            err = stderr.read().decode(errors="replace")
            code = stdout.channel.recv_exit_status()
        except (OSError, EOFError, paramiko.SSHException) as e:
            raise HostLinkError(f"libvirt host {self.address.shown}: {command!r} failed: {e or type(e).__name__}") from e
        if code != 0:
            raise HostLinkError(f"libvirt host {self.address.shown}: {command!r} exited {code}: {err.strip()}")
        return out

    def tunnel(self, host: str, port: int) -> paramiko.Channel:
        """A ``direct-tcpip`` channel to ``host:port`` as the libvirt host sees it (the guest's
        forwarded SSH port on the host's loopback)."""
        transport = self._client.get_transport()
        if transport is None or not transport.is_active():
            raise OSError(f"SSH connection to the libvirt host {self.address.shown} is closed")
        try:
            return transport.open_channel("direct-tcpip", (host, port), ("127.0.0.1", 0), timeout=CONNECT_TIMEOUT_S)
        except paramiko.ChannelException as e:
            # the host's sshd could not connect there (nothing listens yet): as a refused socket
            raise ConnectionRefusedError(f"{host}:{port} via {self.address.shown}: {e.text}") from e
        except (EOFError, paramiko.SSHException) as e:
            raise OSError(f"{host}:{port} via {self.address.shown}: {e or type(e).__name__}") from e

    # -- files -----------------------------------------------------------------------------
    @property
    def sftp(self) -> paramiko.SFTPClient:
        with self._lock:
            if self._sftp is None:
                try:
                    self._sftp = self._client.open_sftp()
                except (OSError, EOFError, paramiko.SSHException) as e:
                    raise HostLinkError(f"libvirt host {self.address.shown} offers no SFTP ({e}); the suite "
                                        "stages the guest's files over it (sshd's Subsystem sftp)") from e
            return self._sftp

    def put(self, src: Path, dest: PurePath, mode: int = 0o644) -> None:
        """Copy ``src`` to the host; a copy that takes longer than ``PROGRESS_EVERY_S`` logs its
        progress that often (bytes, rate, time left): a user's 10 GB image takes minutes."""
        t0 = time.monotonic()
        last = [t0]

        def progress(sent: int, total: int) -> None:
            now = time.monotonic()
            if now - last[0] >= PROGRESS_EVERY_S and total:
                last[0] = now
                rate = sent / max(now - t0, 1e-6)
                log.info("uploading %s to %s: %.0f of %.0f MiB (%.0f MiB/s, %.0f s left)", src.name,
                         self.address.host, sent / 2**20, total / 2**20, rate / 2**20, (total - sent) / max(rate, 1.0))

        with self._io:
            self.sftp.put(str(src), str(dest), callback=progress)
            self.sftp.chmod(str(dest), mode)

    def write(self, path: PurePath, data: bytes, append: bool = False) -> None:
        with self._io, self.sftp.open(str(path), "a" if append else "w") as f:
            f.write(data)

    def create_sparse(self, path: PurePath, size_bytes: int) -> None:
        with self._io, self.sftp.open(str(path), "w") as f:
            f.truncate(size_bytes)

    def give(self, path: PurePath, uid: int, gid: int, mode: int) -> None:
        with self._io:
            self.sftp.chown(str(path), uid, gid)
            self.sftp.chmod(str(path), mode)

    def listdir(self, path: PurePath) -> list[str]:
        with self._io:
            return list(self.sftp.listdir(str(path)))

    def size(self, path: PurePath) -> int:
        """The file's size; 0 if it does not exist (yet)."""
        try:
            with self._io:
                return int(self.sftp.stat(str(path)).st_size or 0)
        except FileNotFoundError:
            return 0

    def read(self, path: PurePath, offset: int = 0) -> bytes:
        """The file from ``offset`` on; empty if it does not exist (yet)."""
        try:
            with self._io, self.sftp.open(str(path), "rb") as f:
                f.seek(offset)
                return bytes(f.read())
        except FileNotFoundError:
            return b""

    def is_dir(self, path: PurePath) -> bool:
        try:
            with self._io:
                return stat.S_ISDIR(self.sftp.stat(str(path)).st_mode or 0)
        except FileNotFoundError:
            return False

    def remove_tree(self, path: PurePath) -> None:
        self.run(f"rm -rf -- {shlex.quote(str(path))}")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            if self._sftp is not None:
                self._sftp.close()
        self._client.close()


def fingerprint(key: paramiko.PKey) -> str:
    """``SHA256:...``, as ``ssh-keygen -lf`` and ``ssh`` show a key."""
    return "SHA256:" + base64.b64encode(hashlib.sha256(key.asbytes()).digest()).decode().rstrip("=")


def _connect(address: HostAddress, timeouts: SshTimeouts) -> paramiko.SSHClient:
    client = paramiko.SSHClient()
    known = address.known_hosts
    try:
        if known is not None:
            client.load_host_keys(str(known))
        else:
            client.load_system_host_keys()  # ~/.ssh/known_hosts
            with contextlib.suppress(OSError):
                client.load_system_host_keys("/etc/ssh/ssh_known_hosts")
    except OSError as e:
        raise HostLinkError(f"--libvirt-uri {redact_url(address.uri)}: cannot read known_hosts {known}: {e}") from e
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    where = f"known_hosts {known}" if known else "~/.ssh/known_hosts"
    try:
        connect(client, address.host, address.port, timeouts, username=address.user,
                key_filename=str(address.keyfile) if address.keyfile else None,
                look_for_keys=address.keyfile is None, allow_agent=address.keyfile is None)
    except paramiko.BadHostKeyException as e:
        client.close()
        raise HostLinkError(f"libvirt host {address.shown} presented a host key other than the one in {where} "
                            f"(it presented {e.key.get_name()} {fingerprint(e.key)}): refusing to connect. If the "
                            "host was reinstalled, check its key and update known_hosts") from None
    except paramiko.AuthenticationException as e:
        client.close()
        raise HostLinkError(f"libvirt host {address.shown} refused the SSH login as {address.user} ({e}); "
                            f"give the key with ?keyfile=PATH in the URI") from None
    except SshNoAnswer as e:
        client.close()
        raise HostLinkError(f"libvirt host {address.shown}: {e}") from None
    except paramiko.SSHException as e:
        client.close()
        if "not found in known_hosts" in str(e):
            raise HostLinkError(f"libvirt host {address.host_id} is not in {where}: its key cannot be checked. "
                                f"Check the key's fingerprint, then add it (ssh-keyscan -p {address.port} "
                                f"{address.host} >> known_hosts) or give ?known_hosts=FILE in the URI") from None
        raise HostLinkError(f"libvirt host {address.shown}: SSH failed: {e}") from None
    except TimeoutError as e:
        client.close()
        raise HostLinkError(f"libvirt host {address.shown} did not accept a TCP connection within "
                            f"{timeouts.connect_s:.0f} s ({e or 'timed out'})") from None
    except OSError as e:
        client.close()
        raise HostLinkError(f"libvirt host {address.shown} is unreachable: {e}") from None
    return client
