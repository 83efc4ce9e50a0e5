"""The SSH connection to a remote libvirt host (``--libvirt-uri qemu+ssh://user@host/system``).

libvirt opens its own SSH connection for its API (``ssh``, ``libssh`` or ``libssh2`` transport).
The suite opens a second one, with paramiko, for what libvirt's API does not carry:

- the files a guest needs on the host (kernel, initramfs, disk files, the trace log) over SFTP,
  in a staging directory of the suite's own (``--host-dir``), removed at the end;
- the guest's SSH: QEMU forwards a port on the host's loopback (user-mode networking, as on
  this machine), and the suite reaches it through a ``direct-tcpip`` channel of this
  connection. No bridge, NAT rule or firewall change is made on the host;
- the console, the QEMU log and the exact-trace log, read back over SFTP.

Both connections reach the same host and check the same pinned key:

- The host's key is checked, never skipped: against the URI's ``known_hosts=FILE`` (libvirt's own
  parameter name) only, or else ``~/.ssh/known_hosts`` (and ``known_hosts2``) and
  ``/etc/ssh/ssh_known_hosts``, as ``ssh`` does. libvirt's ``ssh`` transport runs the ``ssh`` program,
  which ignores ``known_hosts=`` (only the libssh transports read it): for such a URI without a
  ``command=`` of its own, libvirt is given one of the suite's making (``libvirt_uri``), a wrapper
  that runs ``ssh`` with that file as its only known_hosts and strict checking.
- ``~/.ssh/config`` is read as ``ssh`` reads it: a host alias's ``HostName``, ``Port``, ``User``,
  ``IdentityFile``, ``UserKnownHostsFile`` and ``ProxyJump`` (each jump host through a
  ``direct-tcpip`` channel of the previous one's connection; a jump host's key is checked as
  ``ssh`` checks it, against its own known_hosts files, not the URI's). ``~`` is the home
  directory the passwd database gives the user, as for ``ssh``, which does not read ``$HOME``.
- The client key is the URI's ``keyfile=`` or the config's ``IdentityFile``, else the user's
  default keys and agent, as ``ssh`` uses them; the user is the URI's, else the config's, else
  the local login name (libvirt passes ``-l`` and ``-p`` to ``ssh`` only when the URI names them).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import logging
import os
import pwd
import shlex
import stat
import threading
import time
from dataclasses import dataclass
from pathlib import Path, PurePath
from urllib.parse import parse_qs, quote, urlparse

import paramiko

from images.cache import CacheNotWritable, cache_dir, use_entry, writable_dir
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
#: Jump hosts on the way to one host (``ProxyJump``, and a jump host's own ``ProxyJump``): more is a
#: loop in ~/.ssh/config, not a network (a bastion and an inner jump host are two).
MAX_JUMPS = 8
#: known_hosts files ``ssh`` reads when neither the URI nor ~/.ssh/config names one (ssh_config(5)).
USER_KNOWN_HOSTS = ("known_hosts", "known_hosts2")
GLOBAL_KNOWN_HOSTS = (Path("/etc/ssh/ssh_known_hosts"), Path("/etc/ssh/ssh_known_hosts2"))
#: Where in the cache the wrappers libvirt is given as ``command=`` live (one entry per known_hosts file).
WRAPPER_DIR = "ssh-wrappers"


class HostLinkError(HypervisorError):
    """The libvirt host's SSH could not be used: unreachable, an unknown or changed host key,
    authentication refused, SFTP missing."""


def home_dir() -> Path:
    """The home directory ``ssh`` uses for ``~``: the passwd database's, not ``$HOME`` (``ssh`` does
    not read ``$HOME``: with HOME=/tmp/x, ``ssh -G`` still reads /root/.ssh/config as root)."""
    try:
        return Path(pwd.getpwuid(os.getuid()).pw_dir)
    except KeyError:
        return Path.home()


def login_name() -> str:
    """The user ``ssh`` logs in as when neither the URI nor ~/.ssh/config names one."""
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return os.environ.get("USER") or "root"


def ssh_config_path() -> Path:
    return home_dir() / ".ssh" / "config"


def load_ssh_config(path: Path | None = None) -> paramiko.SSHConfig:
    """The user's ~/.ssh/config (an empty one if there is none)."""
    path = path or ssh_config_path()
    try:
        return paramiko.SSHConfig.from_path(str(path))
    except FileNotFoundError:
        return paramiko.SSHConfig()
    except (OSError, UnicodeDecodeError, paramiko.SSHException, ValueError) as e:
        raise HostLinkError(f"cannot read {path} (ssh's configuration, which libvirt's ssh reads too): {e}; fix or "
                            "move it") from None


def _expand_home(text: str) -> Path:
    return home_dir() / text[2:] if text.startswith("~/") else Path(text)


def _known_files(entry: paramiko.SSHConfigDict) -> tuple[Path, ...]:
    """The known_hosts files ``ssh`` checks a host's key against: the config's UserKnownHostsFile and
    GlobalKnownHostsFile for it, or the defaults."""
    user = entry.get("userknownhostsfile")
    users = ([_expand_home(p) for p in str(user).split()] if user
             else [home_dir() / ".ssh" / name for name in USER_KNOWN_HOSTS])
    glob = entry.get("globalknownhostsfile")
    globals_ = [_expand_home(p) for p in str(glob).split()] if glob else list(GLOBAL_KNOWN_HOSTS)
    return tuple(users + globals_)


def _shown_files(files: tuple[Path, ...]) -> str:
    """The user's known_hosts files among ``files`` (``~/.ssh/known_hosts``), as messages name them."""
    home = home_dir()
    mine = [f"~/{p.relative_to(home)}" if p.is_relative_to(home) else str(p) for p in files
            if p not in GLOBAL_KNOWN_HOSTS and p.name != USER_KNOWN_HOSTS[1]]
    return " or ".join(mine) or "/etc/ssh/ssh_known_hosts"


def _identity_files(entry: paramiko.SSHConfigDict) -> tuple[Path, ...]:
    """The config's IdentityFile entries that exist (``ssh`` skips the others, with a warning)."""
    return tuple(p for p in (Path(f) for f in entry.get("identityfile", [])) if p.is_file())


@dataclass(frozen=True)
class SshHop:
    """An SSH server on the way to the libvirt host (~/.ssh/config's ``ProxyJump``), resolved
    through the config as ``ssh`` resolves it."""

    #: as ProxyJump names it
    name: str
    user: str
    host: str
    port: int
    identity_files: tuple[Path, ...]
    known_hosts_files: tuple[Path, ...]
    agent: bool

    @property
    def shown(self) -> str:
        return f"{self.user}@{self.host}:{self.port}"


def _port(text: object, where: str) -> int:
    try:
        port = int(str(text))
    except ValueError:
        port = 0
    if not 0 < port < 65536:
        raise HostLinkError(f"{where}: port {text!r} is not a TCP port (1 to 65535)")
    return port


def _hop(spec: str, config: paramiko.SSHConfig, config_path: Path) -> SshHop:
    """One ProxyJump entry (``[user@]host[:port]`` or ``ssh://[user@]host[:port]``)."""
    u = urlparse(spec if spec.startswith("ssh://") else f"ssh://{spec}")
    try:
        given_port = u.port
    except ValueError:
        given_port = None
        _port(spec.rpartition(":")[2], f"{config_path}: ProxyJump {spec}")
    if not u.hostname:
        raise HostLinkError(f"{config_path}: ProxyJump {spec!r} names no host; write it as [user@]host[:port]")
    entry = config.lookup(u.hostname)
    return SshHop(spec, u.username or str(entry.get("user") or login_name()), str(entry.get("hostname") or u.hostname),
                  given_port or _port(entry.get("port", 22), f"{config_path}: Host {u.hostname}"),
                  _identity_files(entry), _known_files(entry),
                  str(entry.get("identitiesonly", "no")).lower() != "yes")


def _jumps(spec: object, config: paramiko.SSHConfig, config_path: Path, depth: int = 0) -> tuple[SshHop, ...]:
    """The jump hosts, first one first: ProxyJump ``a,b`` is ``a`` (after ``a``'s own ProxyJump), then ``b``."""
    if not spec or str(spec).lower() == "none":
        return ()
    names = [s.strip() for s in str(spec).split(",") if s.strip()]
    hops = tuple(_hop(n, config, config_path) for n in names)
    if depth + len(hops) > MAX_JUMPS:
        raise HostLinkError(f"{config_path}: ProxyJump leads through more than {MAX_JUMPS} jump hosts ({spec}); "
                            "is there a loop (a jump host whose own ProxyJump leads back)?")
    first = config.lookup(urlparse(f"ssh://{names[0].removeprefix('ssh://')}").hostname or names[0])
    return _jumps(first.get("proxyjump"), config, config_path, depth + len(hops)) + hops


@dataclass(frozen=True)
class HostAddress:
    """Who and where, from a remote libvirt URI and ~/.ssh/config."""

    uri: str
    user: str
    host: str
    port: int
    #: the URI's keyfile=
    keyfile: Path | None
    #: the URI's known_hosts=
    known_hosts: Path | None
    #: the host as the URI names it (an alias of ~/.ssh/config, or ``host`` itself)
    name: str = ""
    #: the config's IdentityFile entries that exist
    identity_files: tuple[Path, ...] = ()
    #: what the key is checked against without known_hosts= (the config's, or ssh's defaults)
    known_hosts_files: tuple[Path, ...] = ()
    #: the jump hosts on the way (~/.ssh/config's ProxyJump), first one first
    jumps: tuple[SshHop, ...] = ()
    #: whether the user's agent may offer keys (not with keyfile=, nor with IdentitiesOnly)
    agent: bool = True

    @property
    def shown(self) -> str:
        return f"{self.user}@{self.host}:{self.port}"

    @property
    def host_id(self) -> str:
        """The name known_hosts files give this host (``[host]:port`` off port 22)."""
        return self.host if self.port == 22 else f"[{self.host}]:{self.port}"

    @property
    def key_files(self) -> tuple[Path, ...]:
        return ((self.keyfile,) if self.keyfile else ()) + self.identity_files

    @property
    def checked_against(self) -> str:
        """The known_hosts file the key is checked against, as messages name it."""
        if self.known_hosts is not None:
            return f"known_hosts {self.known_hosts}"
        return _shown_files(self.known_hosts_files)

    @classmethod
    def from_uri(cls, uri: str, config: paramiko.SSHConfig | None = None,
                 config_path: Path | None = None) -> HostAddress:
        """The URI's address, through ~/.ssh/config (``config``: the user's unless given)."""
        u = urlparse(uri)
        transport = u.scheme.partition("+")[2]
        if transport not in SSH_TRANSPORTS or not u.hostname:
            raise HostLinkError(f"--libvirt-uri {redact_url(uri)}: a remote libvirt host is reached over SSH; use "
                                "qemu+ssh://user@host/system (or qemu+libssh://...)")
        config_path = config_path or ssh_config_path()
        if config is None:
            config = load_ssh_config(config_path)
        query = parse_qs(u.query)
        keyfile = query.get("keyfile", [None])[0]
        known = query.get("known_hosts", [None])[0]
        entry = config.lookup(u.hostname)
        if entry.get("proxycommand") and str(entry["proxycommand"]).lower() != "none" \
                and not entry.get("proxyjump"):
            raise HostLinkError(f"{config_path} gives {u.hostname} a ProxyCommand, which the suite's own SSH "
                                "connection does not run; write the jump as ProxyJump HOST (libvirt's ssh follows "
                                "it too)")
        try:
            uri_port = u.port
        except ValueError:
            uri_port = None
        return cls(uri, u.username or str(entry.get("user") or login_name()), str(entry.get("hostname") or u.hostname),
                   uri_port or _port(entry.get("port", 22), f"{config_path}: Host {u.hostname}"),
                   Path(keyfile) if keyfile else None, Path(known) if known else None,
                   name=u.hostname, identity_files=_identity_files(entry), known_hosts_files=_known_files(entry),
                   jumps=_jumps(entry.get("proxyjump"), config, config_path),
                   agent=not keyfile and str(entry.get("identitiesonly", "no")).lower() != "yes")
class HostLink:
    """One paramiko connection to the libvirt host: commands, SFTP and tunnels. Thread-safe as
    paramiko is: each use opens its own channel."""

    def __init__(self, address: HostAddress, timeouts: SshTimeouts = HOST_SSH_TIMEOUTS) -> None:
        self.address = address
        self._client, self._jumps = _connect(address, timeouts)
        self._sftp: paramiko.SFTPClient | None = None
        self._lock = threading.Lock()
        #: SFTP requests one at a time: the console mirror's thread reads while the main thread works
        self._io = threading.RLock()
        for client in (self._client, *self._jumps):
            transport = client.get_transport()
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

    def read(self, path: PurePath, offset: int = 0, length: int | None = None) -> bytes:
        """The file from ``offset`` on (``length`` bytes of it at most; None: to its end); empty if
        it does not exist (yet)."""
        try:
            with self._io, self.sftp.open(str(path), "rb") as f:
                f.seek(offset)
                if length is not None:
                    f.prefetch(offset + length)  # the reads' requests in flight at once, not one round trip each
                return bytes(f.read(length))
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
        for jump in reversed(self._jumps):
            jump.close()


def fingerprint(key: paramiko.PKey) -> str:
    """``SHA256:...``, as ``ssh-keygen -lf`` and ``ssh`` show a key."""
    return "SHA256:" + base64.b64encode(hashlib.sha256(key.asbytes()).digest()).decode().rstrip("=")


def _connect(address: HostAddress, timeouts: SshTimeouts) -> tuple[paramiko.SSHClient, tuple[paramiko.SSHClient, ...]]:
    """The connection to the host, through its jump hosts (returned too, first one first: they carry it)."""
    if address.known_hosts is not None and not address.known_hosts.is_file():
        what = "does not exist" if not address.known_hosts.exists() else "is not a file"
        raise HostLinkError(f"--libvirt-uri {redact_url(address.uri)}: known_hosts={address.known_hosts} {what}; give "
                            f"the file that holds the host's key (after checking the key's fingerprint: ssh-keyscan "
                            f"-p {address.port} {address.host} > FILE)")
    if address.keyfile is not None and not address.keyfile.is_file():
        raise HostLinkError(f"--libvirt-uri {redact_url(address.uri)}: keyfile={address.keyfile} does not exist or is "
                            "not a file; give the private key that logs in to the host")
    jumps: list[paramiko.SSHClient] = []
    sock: paramiko.Channel | None = None
    try:
        for i, hop in enumerate(address.jumps):
            what = f"ProxyJump host {hop.shown} (~/.ssh/config's ProxyJump {hop.name} for {address.name})"
            jumps.append(_login(what, hop.host, hop.port, hop.user, hop.identity_files, hop.agent,
                                hop.known_hosts_files, None, _shown_files(hop.known_hosts_files), sock, timeouts,
                                f"ProxyJump host {hop.name}"))
            nxt = address.jumps[i + 1] if i + 1 < len(address.jumps) else address
            sock = _channel(jumps[-1], what, nxt.host, nxt.port)
        client = _login(f"libvirt host {address.shown}", address.host, address.port, address.user, address.key_files,
                        address.agent, address.known_hosts_files, address.known_hosts, address.checked_against, sock,
                        timeouts)
    except BaseException:
        for c in reversed(jumps):
            c.close()
        raise
    return client, tuple(jumps)


def _channel(client: paramiko.SSHClient, what: str, host: str, port: int) -> paramiko.Channel:
    """A ``direct-tcpip`` channel from a jump host to the next one."""
    transport = client.get_transport()
    assert transport is not None
    try:
        return transport.open_channel("direct-tcpip", (host, port), ("127.0.0.1", 0), timeout=CONNECT_TIMEOUT_S)
    except paramiko.ChannelException as e:
        raise HostLinkError(f"{what} could not connect to {host}:{port} ({e.text}); is that host up, and may the "
                            "jump host forward connections (sshd's AllowTcpForwarding)?") from None
    except (EOFError, OSError, paramiko.SSHException) as e:
        raise HostLinkError(f"{what} did not open a connection to {host}:{port} within {CONNECT_TIMEOUT_S:.0f} s "
                            f"({e or type(e).__name__})") from None


def _login(what: str, host: str, port: int, user: str, key_files: tuple[Path, ...], agent: bool,
           known_files: tuple[Path, ...], pinned: Path | None, where: str, sock: paramiko.Channel | None,
           timeouts: SshTimeouts, jump: str = "") -> paramiko.SSHClient:
    """One SSH login, its host key checked against ``pinned`` only (the URI's known_hosts=), or else
    ``known_files``; ``what`` and ``where`` name the host and its known_hosts file in messages,
    ``jump`` a jump host (its key is checked as ``ssh`` checks it, never against the URI's file)."""
    client = paramiko.SSHClient()
    try:
        if pinned is not None:
            client.load_host_keys(str(pinned))
        else:
            for path in known_files:
                with contextlib.suppress(OSError):
                    client.load_system_host_keys(str(path))
    except OSError as e:
        raise HostLinkError(f"cannot read known_hosts {pinned}: {e}") from e
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    host_id = host if port == 22 else f"[{host}]:{port}"
    try:
        connect(client, host, port, timeouts, sock=sock, username=user,
                key_filename=[str(k) for k in key_files] or None, look_for_keys=not key_files, allow_agent=agent)
    except paramiko.BadHostKeyException as e:
        client.close()
        raise HostLinkError(f"{what} presented a host key other than the one in {where} "
                            f"(it presented {e.key.get_name()} {fingerprint(e.key)}): refusing to connect. If the "
                            "host was reinstalled, check its key and update known_hosts") from None
    except paramiko.AuthenticationException as e:
        client.close()
        raise HostLinkError(f"{what} refused the SSH login as {user} ({e}); give the key with ?keyfile=PATH in the "
                            "URI (or IdentityFile in ~/.ssh/config)") from None
    except SshNoAnswer as e:
        client.close()
        raise HostLinkError(f"{what}: {e}") from None
    except paramiko.SSHException as e:
        client.close()
        if "not found in known_hosts" in str(e):
            if jump:
                raise HostLinkError(f"{jump} ({host_id}) is not in {where}: its key cannot be checked. Check the "
                                    f"key's fingerprint, then add it (ssh-keyscan -p {port} {host} >> {where}); a jump "
                                    "host's key is checked as ssh checks it, not against the URI's known_hosts=") \
                    from None
            raise HostLinkError(f"libvirt host {host_id} is not in {where}: its key cannot be checked. Check the key's "
                                f"fingerprint, then add it (ssh-keyscan -p {port} {host} >> known_hosts) or give "
                                "?known_hosts=FILE in the URI") from None
        raise HostLinkError(f"{what}: SSH failed: {e}") from None
    except TimeoutError as e:
        client.close()
        raise HostLinkError(f"{what} did not accept a TCP connection within {timeouts.connect_s:.0f} s "
                            f"({e or 'timed out'})") from None
    except OSError as e:
        client.close()
        raise HostLinkError(f"{what} is unreachable: {e}") from None
    return client


# -- libvirt's own connection --------------------------------------------------------------------
def libvirt_uri(uri: str) -> str:
    """The URI libvirt is given for ``uri``: the same, except an ``ssh`` transport URI with
    ``known_hosts=`` and no ``command=`` gets ``command=`` the suite's wrapper for that file
    (``ssh_wrapper``). libvirt's ``ssh`` transport runs the ``ssh`` program, which ignores
    ``known_hosts=``; a user's own ``command=`` is kept."""
    u = urlparse(uri)
    if u.scheme.partition("+")[2] != "ssh":
        return uri
    query = parse_qs(u.query)
    known = query.get("known_hosts", [None])[0]
    if not known or "command" in query:
        return uri
    wrapper = ssh_wrapper(Path(os.path.abspath(known)))
    return u._replace(query=f"{u.query}&command={quote(str(wrapper), safe='/')}").geturl()


def wrapper_script(known_hosts: Path) -> str:
    """The ``ssh`` wrapper libvirt runs for a URI with ``known_hosts=``: that file is the only one the
    host's key is checked against (no global file either), strictly, never with a prompt. ``ssh``
    takes the first value it is given for an option, so these win over libvirt's own
    (``no_verify=1`` adds ``StrictHostKeyChecking=no``) and over ~/.ssh/config's."""
    text = str(known_hosts)
    if any(c in text for c in '"\\\n'):
        raise HostLinkError(f"known_hosts={text}: its path holds a character ssh's options cannot carry (\", \\ or a "
                            "line break); move the file to a plainer path")
    value = text.replace("%", "%%")  # ssh expands %-tokens in UserKnownHostsFile
    if any(c.isspace() for c in value):
        value = f'"{value}"'
    option = shlex.quote(f"UserKnownHostsFile={value}")
    return ("#!/bin/sh\n"
            f"# vioconform: libvirt's ssh checks the host key in {text} only, as the suite's own connection does\n"
            f"exec ssh -o {option} -o GlobalKnownHostsFile=/dev/null -o StrictHostKeyChecking=yes "
            "-o BatchMode=yes \"$@\"\n")


def ssh_wrapper(known_hosts: Path) -> Path:
    """The wrapper for ``known_hosts`` (``wrapper_script``), in the cache: one entry per script, made
    once (a rename: another process sees all of it or none), stamped at each use, and removed with
    the cache's other entries no run used for a month."""
    text = wrapper_script(known_hosts)
    entry = cache_dir() / WRAPPER_DIR / hashlib.sha256(text.encode()).hexdigest()[:16]
    path = entry / "ssh"
    try:
        with contextlib.suppress(OSError):
            if path.read_text() == text and os.access(path, os.X_OK):
                use_entry(entry, log.info)
                return path
        writable_dir(entry, "cache")
        tmp = entry / f".ssh.{os.getpid()}"
        try:
            tmp.write_text(text)
            tmp.chmod(0o755)
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
    except CacheNotWritable as e:
        raise HostLinkError(f"libvirt's ssh needs a wrapper for known_hosts={known_hosts}: {e}") from None
    except OSError as e:
        raise HostLinkError(f"libvirt's ssh needs a wrapper for known_hosts={known_hosts}, and writing it to {path} "
                            f"failed: {e}; set XDG_CACHE_HOME to a writable directory") from None
    use_entry(entry, log.info)
    return path
