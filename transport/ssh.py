"""Runs commands in a guest over SSH (paramiko), with the guest's host key pinned.

The suite never switches host-key checking off: the backend learns the key the guest
presents through a trusted side channel (the embedded guest prints it on its serial
console) and every connection rejects any other key.

A command's wait is a loop on its channel that also watches the guest: every few seconds it
asks the liveness callback the transport was given (the hypervisor's view: VM stopped, kernel
panic on the console) and, for a long command, whether the guest's SSH server still answers.
A dead guest is reported within seconds, with its console, instead of after the command's
timeout; every later command on the transport fails at once with the same cause.
"""

from __future__ import annotations

import contextlib
import logging
import select
import shlex
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import paramiko
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from model.errors import GuestDied, GuestDiedEarlier, HypervisorError
from model.types import SshEndpoint
from transport.probe import BANNER_TIMEOUT_S, HANDSHAKE_TIMEOUT_S
from transport.probe import pinned_key as _pinned_key
from transport.ride_along import Rider, Riders
from transport.root_shell import ROOT_SHELL_COMMAND, SHELL_COMMAND, Frame

# paramiko logs every connection at INFO; the suite's own progress lines are what a user reads.
logging.getLogger("paramiko").setLevel(logging.WARNING)
log = logging.getLogger("vioconform.ssh")
#: paramiko logs a failed handshake with its traceback at ERROR; while a connection opens, the
#: error ``connect`` raises says what happened, in one line, instead.
CONNECT_LOG = "vioconform.ssh.connect.paramiko"
logging.getLogger(CONNECT_LOG).setLevel(logging.CRITICAL + 1)


class GuestCommandError(RuntimeError):
    """A guest command failed; carries its output so the failure can show it."""

    def __init__(self, result: CommandResult, hint: str = "") -> None:
        self.result = result
        msg = (f"guest command failed (exit {result.exit_status}): {result.command}\n"
               f"stdout: {result.stdout.strip()[-1500:] or '(empty)'}\n"
               f"stderr: {result.stderr.strip()[-1500:] or '(empty)'}")
        super().__init__(msg + (f"\n{hint}" if hint else ""))


class GuestCopyError(OSError):
    """A file could not be copied into the guest; the message names the file, the way tried and the cause."""


class GuestUnreachable(RuntimeError):
    """SSH to the guest could not be established; the message says what was tried."""


class SudoNotUsable(GuestUnreachable):
    """A non-root login whose ``sudo -n`` does not work (asks for a password, is missing)."""


def sudo_problem(user: str, ran: CommandResult) -> str | None:
    """What is wrong with ``user``'s ``sudo -n``, from a wrapped ``true`` (``ran``), or None if it works."""
    if ran.ok:
        return None
    said = " ".join((ran.stderr.strip() or ran.stdout.strip()).split())[:200] or f"exit {ran.exit_status}"
    if "password is required" in said:
        why = f"user {user}'s sudo asks for a password ({said})"
    elif ran.exit_status == 127:
        why = f"user {user} has no sudo in the guest ({said})"
    else:
        why = f"sudo -n failed for user {user} ({said})"
    return (f"{why}; the suite runs its commands as root through sudo -n and needs passwordless sudo "
            f"(NOPASSWD): '{user} ALL=(ALL) NOPASSWD:ALL' in the image's /etc/sudoers.d/, or log in as root")


class SshNoAnswer(paramiko.SSHException):
    """The server accepted the TCP connection but did not speak SSH in time: no banner (silent, or
    closed at once), or a handshake it did not finish. The message names the server and the wait."""


@dataclass(frozen=True)
class SshTimeouts:
    """How long each step of opening an SSH connection may take."""

    #: the TCP connection
    connect_s: float
    #: the server's SSH banner, after the TCP connection (a server that accepts and never speaks)
    banner_s: float
    #: key exchange and authentication, after the banner
    handshake_s: float

    def within(self, remaining_s: float) -> SshTimeouts:
        """These timeouts, none longer than ``remaining_s`` (a caller's overall deadline)."""
        cap = max(remaining_s, 0.1)
        return replace(self, connect_s=min(self.connect_s, cap), banner_s=min(self.banner_s, cap),
                       handshake_s=min(self.handshake_s, cap))


#: The guest's SSH (and an ESXi host's). TCP connect: 10 s, instant to QEMU's forward on 127.0.0.1
#: and a few ms to a vSphere guest on the LAN, so 10 s covers three lost SYNs (retransmitted after
#: 1, 2 and 4 s). Banner and handshake as the boot wait's probe allows them (transport/probe.py:
#: QEMU's forward holds a connection silent while the guest's network is not up; key exchange and
#: authentication take a few hundred ms to 2 s under TCG here).
GUEST_SSH_TIMEOUTS = SshTimeouts(connect_s=10.0, banner_s=BANNER_TIMEOUT_S, handshake_s=HANDSHAKE_TIMEOUT_S)


def connect(client: paramiko.SSHClient, host: str, port: int, timeouts: SshTimeouts, sock: Any = None,
            **login: Any) -> None:
    """Open ``client``'s connection to ``host:port`` (or over ``sock``, a connected socket or
    channel), each step within its timeout. ``login`` goes to paramiko (username, key_filename, ...).

    A server that accepts and stays silent raises SshNoAnswer after ``timeouts.banner_s`` (paramiko
    alone would give "No existing session" and log a traceback); so does one that closes without a
    banner or stalls in the handshake. The wait for the banner comes before paramiko sends its own
    identification: an SSH server sends its banner as soon as it accepts (RFC 4253 4.2: both sides
    send theirs; OpenSSH, dropbear and paramiko's server do not wait for the client's). OSError (TimeoutError) for the TCP connection; paramiko's
    BadHostKeyException, AuthenticationException and SSHException for the rest."""
    where = f"{host}:{port}"
    if sock is None:
        sock = socket.create_connection((host, port), timeout=timeouts.connect_s)
    try:
        spoke, _, _ = select.select([sock], [], [], timeouts.banner_s)
    except (OSError, ValueError):  # closed under us: paramiko's read says how
        spoke = [sock]
    if not spoke:
        sock.close()
        raise SshNoAnswer(f"the server at {where} did not answer SSH within {timeouts.banner_s:.0f} s (it accepted "
                          "the TCP connection and sent nothing); is that port its SSH server, and is the server "
                          "hung?")
    client.set_log_channel(CONNECT_LOG)
    try:
        client.connect(host, port=port, sock=sock, timeout=timeouts.handshake_s, banner_timeout=timeouts.banner_s,
                       auth_timeout=timeouts.handshake_s, **login)
    except paramiko.BadHostKeyException:
        raise
    except paramiko.AuthenticationException as e:
        if "timeout" in str(e).lower():  # paramiko's "Authentication timeout."
            raise SshNoAnswer(f"the server at {where} did not finish the SSH login within {timeouts.handshake_s:.0f} "
                              "s") from None
        raise
    except (paramiko.SSHException, EOFError) as e:
        transport = client.get_transport()
        banner = transport.remote_version if transport is not None else ""
        if not banner:
            raise SshNoAnswer(f"the server at {where} sent no SSH banner ({e or type(e).__name__}); is that port "
                              "its SSH server?") from None
        if str(e) == "No existing session":  # paramiko's words for a key exchange that never finished
            raise SshNoAnswer(f"the server at {where} ({banner}) did not finish the SSH handshake within "
                              f"{timeouts.handshake_s:.0f} s") from None
        raise
    transport = client.get_transport()
    if transport is not None:
        transport.set_log_channel("paramiko.transport")  # paramiko's own logging from here on


class SshConnectionLost(GuestUnreachable, HypervisorError):
    """The SSH connection dropped under a command while the guest itself still runs (its SSH
    server exited or was killed, its network went down). Carries the guest's console tail."""


#: Why the guest can no longer answer (its VM stopped, its kernel panicked), or None while it may.
Liveness = Callable[[], str | None]

#: Seconds between liveness checks while a command runs: a dead guest is reported this soon.
LIVENESS_PERIOD_S = 2.0
#: A command running longer than this has the guest's SSH server checked too, this often: a
#: channel open it must answer within SSH_ANSWER_TIMEOUT_S. That catches a guest that hangs
#: without a word on its console (or has no console the suite can read, as on vSphere).
SSH_CHECK_PERIOD_S = 5.0
#: Measured here: the embedded guest answers a channel open in 3-45 ms under TCG with fio at
#: depth 32 running, on this 2-core host shared with other busy guests; 15 s of silence is a
#: hung guest, not a busy one. With the check period, a hang is reported within 20 s.
SSH_ANSWER_TIMEOUT_S = 15.0
#: paramiko's keepalive: traffic on an idle connection, so NATs and firewalls keep it, and a
#: peer that went away shows up as a send error.
KEEPALIVE_S = 5
#: A file copy's blocks (SFTP writes them in 32 KiB requests; the ``cat`` fallback sends the same).
COPY_BLOCK_BYTES = 32768
#: After the connection drops, how long the liveness callback gets to name a cause (libvirt
#: notices a QEMU that exited a moment after its sockets close).
LOST_GRACE_S = 3.0


@dataclass(frozen=True)
class CommandResult:
    command: str
    exit_status: int
    stdout: str
    stderr: str
    duration_s: float

    @property
    def ok(self) -> bool:
        return self.exit_status == 0

    def error_line(self, stdout_too: bool = False) -> str:
        """What a failed command said, in one line: the last line of its stderr (of its stdout where
        ``stdout_too`` and stderr is empty), or its exit status where it said nothing."""
        said = self.stderr or (self.stdout if stdout_too else "")
        return (said.strip().splitlines() or [f"exit {self.exit_status}"])[-1]


def generate_run_key(directory: Path) -> tuple[Path, str]:
    """Write a fresh ed25519 private key for this run; return its path and the public key's base64."""
    key = Ed25519PrivateKey.generate()
    path = directory / "id_ed25519"
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                       serialization.NoEncryption()))
    path.chmod(0o600)
    pub = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return path, pub.decode().split()[1]


class SshTarget(Protocol):
    """A guest as ``SshTransport.to_guest`` reaches it (``hypervisors.base.Guest`` is one)."""

    @property
    def ssh(self) -> SshEndpoint: ...

    def dead_reason(self) -> str | None: ...

    def console_tail(self, lines: int = ...) -> str: ...


class SshTransport:
    """One SSH connection to a guest; ``run`` executes a shell command as root, in one root shell
    per connection (transport/root_shell.py): ``sudo -n sh`` for a login that is not root (checked
    once on connecting: ``SudoNotUsable``), ``sh`` for root where ``root_shell``; a root login without
    it runs each command on a channel of its own (an ESXi host's, whose shell the suite does not test).

    ``liveness`` (see ``Guest.dead_reason``) is asked every few seconds while a command runs;
    ``console`` gives the guest's console tail for the errors. ``SshTransport.to_guest(guest)``
    wires both for a guest a backend started, and its root shell."""

    def __init__(self, endpoint: SshEndpoint, connect_timeout_s: float = 60.0,
                 liveness: Liveness | None = None, console: Callable[[], str] | None = None,
                 root_shell: bool = False) -> None:
        self.endpoint = endpoint
        #: what the connection's root shell runs (None: each command on a channel of its own)
        self._shell_command = SHELL_COMMAND if endpoint.user != "root" else ROOT_SHELL_COMMAND if root_shell else None
        self._liveness = liveness
        self._console = console
        #: set once the guest died or the connection dropped: later commands fail at once with it
        self._gone: tuple[type[HypervisorError], str, str | None] | None = None
        #: the connection's root shell (transport/root_shell.py), once the first command opened it
        self._shell: paramiko.Channel | None = None
        self._shell_lock = threading.Lock()
        self._client = self._connect(connect_timeout_s)
        transport = self._client.get_transport()
        if transport is not None:
            transport.set_keepalive(KEEPALIVE_S)
        if endpoint.user != "root":
            self._check_sudo()

    def _check_sudo(self) -> None:
        """Commands of a non-root user go through ``sudo -n``: check once that it works."""
        problem = sudo_problem(self.endpoint.user, self.run("true", check=False, timeout_s=60))
        if problem is not None:
            self.close()
            raise SudoNotUsable(problem)

    @classmethod
    def to_guest(cls, guest: SshTarget, connect_timeout_s: float = 60.0) -> SshTransport:
        return cls(guest.ssh, connect_timeout_s, liveness=guest.dead_reason, console=guest.console_tail,
                   root_shell=True)

    def _connect(self, timeout_s: float) -> paramiko.SSHClient:
        ep = self.endpoint
        deadline = time.monotonic() + timeout_s
        last: Exception | None = None
        while time.monotonic() < deadline:
            client = paramiko.SSHClient()
            host_id = ep.host if ep.port == 22 else f"[{ep.host}]:{ep.port}"
            key = _pinned_key(ep.host_key)
            client.get_host_keys().add(host_id, key.get_name(), key)
            client.set_missing_host_key_policy(paramiko.RejectPolicy())
            try:
                sock = ep.via(ep.host, ep.port) if ep.via is not None else None
                connect(client, ep.host, ep.port, GUEST_SSH_TIMEOUTS.within(deadline - time.monotonic()), sock,
                        username=ep.user, key_filename=str(ep.key_path), allow_agent=False, look_for_keys=False)
                return client
            except paramiko.BadHostKeyException as e:
                client.close()
                raise GuestUnreachable(f"guest at {host_id} presented a host key other than the pinned one: {e}") from e
            except (TimeoutError, OSError, paramiko.SSHException) as e:
                client.close()
                last = e
                time.sleep(0.5)
        raise GuestUnreachable(f"SSH to {ep.user}@{ep.host}:{ep.port} failed for {timeout_s:.0f} s: {last}")

    def run(self, command: str, check: bool = True, timeout_s: float = 300.0, hint: str = "") -> CommandResult:
        """Run ``command`` with /bin/sh; raise GuestCommandError on a non-zero exit if ``check``.
        In the connection's root shell (transport/root_shell.py: one ``sudo -n sh`` or ``sh`` per
        connection, not one a command), else on a channel of its own.

        GuestDied if the guest dies meanwhile (or died under an earlier command), SshConnectionLost
        if the connection drops under it, GuestUnreachable after ``timeout_s``."""
        taken = self._queue().take()
        self._last_riders().riders = taken.riders if taken is not None else ()
        try:
            if self._gone is not None:
                kind, message, console = self._gone
                raise kind(message, console)
            t0 = time.monotonic()
            status, stdout, stderr = self._run_once(command, command if taken is None else taken.script(command), t0,
                                                    timeout_s)
        except BaseException as e:
            if taken is not None:
                taken.never_returned(str(e).splitlines()[0] if str(e) else type(e).__name__)
            raise
        out = stdout.decode(errors="replace")
        if taken is not None:
            status, out = taken.settle(status, out)
        result = CommandResult(command, status, out, stderr.decode(errors="replace"), time.monotonic() - t0)
        if check and not result.ok:
            raise GuestCommandError(result, hint)
        return result

    def ride_along(self, script: str, after: bool = False) -> Rider:
        """Run ``script`` with the next command, before it or (``after``) after it, in the same round trip
        (transport/ride_along.py); the Rider holds its output and status once that command ran."""
        return self._queue().add(script, after)

    def drop_rider(self, rider: Rider) -> None:
        """Send ``rider`` with no command after all, where it is still queued."""
        self._queue().drop(rider)

    def riders_of_last_command(self) -> tuple[Rider, ...]:
        """The riders the calling thread's last command carried, in the order they were queued (the journal
        of guest commands lists them: fixtures/journal.py)."""
        riders: tuple[Rider, ...] = getattr(self._last_riders(), "riders", ())
        return riders

    def _last_riders(self) -> threading.local:
        if not hasattr(self, "_riders_sent"):
            self._riders_sent = threading.local()
        return self._riders_sent

    def _queue(self) -> Riders:
        """The scripts queued for the next command, made on first use (as JournaledSsh's journal is)."""
        if not hasattr(self, "_riders"):
            self._riders = Riders()
        return self._riders

    def _run_once(self, command: str, sent: str, t0: float, timeout_s: float) -> tuple[int, bytes, bytes]:
        """``sent`` (``command`` with its riders) run once; errors name ``command``."""
        if self._shell_command is None:
            return self._exec(command, t0, timeout_s, sent)
        if self._shell_lock.acquire(blocking=False):
            try:
                return self._in_root_shell(command, t0, timeout_s, self._shell_command, sent)
            finally:
                self._shell_lock.release()
        # another thread's command holds the shell: this one runs beside it, on its own channel
        return self._exec(command, t0, timeout_s, sent if self.endpoint.user == "root"
                          else f"sudo -n sh -c {shlex.quote(sent)}")

    def _open_channel(self, command: str, t0: float, exec_: str) -> paramiko.Channel:
        """A session channel running ``exec_``; the connection's loss (as for ``command``) if none opens."""
        transport = self._client.get_transport()
        try:
            if transport is None or not transport.is_active():
                raise paramiko.SSHException("the SSH connection is closed")
            channel = transport.open_session(timeout=SSH_ANSWER_TIMEOUT_S)
            channel.exec_command(exec_)
        except (OSError, EOFError, paramiko.SSHException) as e:
            raise self._lost(command, t0, f"could not start the command: {e}") from e
        return channel

    def _exec(self, command: str, t0: float, timeout_s: float, exec_: str) -> tuple[int, bytes, bytes]:
        """``command`` on a channel of its own (sent as ``exec_``): its exit status, output and error output."""
        channel = self._open_channel(command, t0, exec_)
        try:
            stdout, stderr = self._wait(channel, command, t0, timeout_s)
        finally:
            channel.close()
        if channel.exit_status == -1:  # paramiko's "closed without an exit status"
            raise self._lost(command, t0, "the command's channel closed without an exit status")
        return channel.exit_status, stdout, stderr

    def _in_root_shell(self, command: str, t0: float, timeout_s: float, shell_command: str,
                       sent: str | None = None) -> tuple[int, bytes, bytes]:
        """``command`` (sent as ``sent`` where given) in the connection's root shell, opened on first need and
        again after one ended.
        A command that fails, times out or loses its guest closes the shell's channel, as ``_exec``
        closes the command's own (the next command opens a new shell)."""
        shell = self._shell
        if shell is None or shell.closed or shell.eof_received or shell.exit_status_ready():
            self._drop_shell()
            shell = self._shell = self._open_channel(command, t0, shell_command)
        frame = Frame(command if sent is None else sent)
        try:
            # A shell that ended (its sudo refused) takes no input: its status and words are read below.
            with contextlib.suppress(OSError, EOFError, paramiko.SSHException):
                shell.sendall(frame.script())
            stdout, stderr = self._wait(shell, command, t0, timeout_s, lambda o, e: frame.read(o, e) is not None)
        except BaseException:
            self._drop_shell()
            raise
        framed = frame.read(stdout, stderr)
        if framed is not None:
            return framed.exit_status, framed.stdout, framed.stderr
        self._drop_shell()  # the shell ended before the command did: its own status and words
        if shell.exit_status == -1:
            raise self._lost(command, t0, "the command's shell closed without an exit status")
        return shell.exit_status, frame.after_start(stdout), frame.after_start(stderr)

    def _drop_shell(self) -> None:
        if self._shell is not None:
            self._shell.close()
            self._shell = None

    def put_file(self, local: Path, remote: str, mode: int = 0o644, timeout_s: float = 300.0) -> str:
        """Copy ``local`` to ``remote`` in the guest, with ``mode``, as the login user (not through
        ``run``'s shell, so a non-root user needs a directory it may write). Over SFTP; where the
        guest's SSH server has no SFTP subsystem (dropbear without sftp-server) the file is streamed
        into ``cat > remote`` over an exec channel, which any shell can take. Returns the way used,
        ``"sftp"`` or ``"cat"``. GuestCopyError, in one line, if neither works."""
        if self._gone is not None:
            kind, message, console = self._gone
            raise kind(message, console)
        user = self.endpoint.user
        channel: paramiko.Channel | None = None
        try:
            transport = self._client.get_transport()
            if transport is None or not transport.is_active():
                raise paramiko.SSHException("the SSH connection is closed")
            channel = transport.open_session(timeout=SSH_ANSWER_TIMEOUT_S)
            channel.invoke_subsystem("sftp")
            sftp = paramiko.SFTPClient(channel)
        except (OSError, EOFError, paramiko.SSHException) as e:
            if channel is not None:
                channel.close()
            no_sftp = str(e) or type(e).__name__
            log.info("no SFTP in the guest (%s): copying %s through cat", no_sftp, local.name)
            if not self._connected():
                # Under load, dropbear may close the connection after its failed sftp subsystem: the
                # next channel open then fails with paramiko's "Unable to open channel.", which it
                # says when the connection has closed. A new one serves the copy.
                log.warning("the SSH connection closed after the SFTP attempt; connecting again")
                self._reconnect()
        else:
            try:
                channel = sftp.get_channel()
                if channel is not None:
                    channel.settimeout(timeout_s)
                sftp.put(str(local), remote, confirm=True)
                sftp.chmod(remote, mode)
            except (OSError, EOFError, paramiko.SSHException) as e:
                raise GuestCopyError(f"cannot copy {local} to the guest's {remote} over SFTP as {user}: "
                                     f"{getattr(e, 'strerror', None) or e}") from e
            finally:
                sftp.close()
            return "sftp"
        self._put_by_cat(local, remote, mode, timeout_s, no_sftp)
        return "cat"

    def _put_by_cat(self, local: Path, remote: str, mode: int, timeout_s: float, no_sftp: str) -> None:
        where = f"the guest's {remote} as {self.endpoint.user} (no SFTP: {no_sftp}; through `cat`)"
        q = shlex.quote(remote)
        command = f"cat > {q} && chmod {mode:o} {q}"
        transport = self._client.get_transport()
        if transport is None or not transport.is_active():
            raise GuestCopyError(f"cannot copy {local} to {where}: the SSH connection is closed")
        try:
            channel = transport.open_session(timeout=SSH_ANSWER_TIMEOUT_S)
        except (OSError, EOFError, paramiko.SSHException) as e:
            raise GuestCopyError(f"cannot copy {local} to {where}: {e}") from e
        try:
            channel.settimeout(timeout_s)
            channel.exec_command(command)
            sent_all = True
            try:
                with local.open("rb") as f:
                    for block in iter(lambda: f.read(COPY_BLOCK_BYTES), b""):
                        channel.sendall(block)
                channel.shutdown_write()
            except (OSError, EOFError, paramiko.SSHException):
                sent_all = False  # cat ended early (it could not write): its status says why
            if not channel.status_event.wait(timeout_s):
                raise GuestCopyError(f"cannot copy {local} to {where}: no answer within {timeout_s:.0f} s")
            status = channel.recv_exit_status()
            err = b""
            while channel.recv_stderr_ready():
                err += channel.recv_stderr(65536)
        except (OSError, EOFError, paramiko.SSHException) as e:
            raise GuestCopyError(f"cannot copy {local} to {where}: {e}") from e
        finally:
            channel.close()
        said = err.decode(errors="replace").strip().splitlines()
        if status != 0 or not sent_all:
            raise GuestCopyError(f"cannot copy {local} to {where}: `{command}` exited {status}"
                                 + (f": {said[-1]}" if said else ""))

    def _wait(self, channel: paramiko.Channel, command: str, t0: float, timeout_s: float,
              finished: Callable[[bytes, bytes], bool] | None = None) -> tuple[bytes, bytes]:
        """Collect the command's output until it ends (its channel's end, or ``finished`` says so
        of what came), checking on the guest meanwhile."""
        out, err = bytearray(), bytearray()
        next_check, next_ssh_check = t0 + LIVENESS_PERIOD_S, t0 + SSH_CHECK_PERIOD_S
        while True:
            had = len(out) + len(err)
            while channel.recv_ready():
                out += channel.recv(65536)
            while channel.recv_stderr_ready():
                err += channel.recv_stderr(65536)
            if finished is not None and len(out) + len(err) > had and finished(bytes(out), bytes(err)):
                return bytes(out), bytes(err)
            # Closed, or at end of data with its status: everything it sent is in the buffers.
            if channel.closed or (channel.eof_received and channel.exit_status_ready()):
                while channel.recv_ready():
                    out += channel.recv(65536)
                while channel.recv_stderr_ready():
                    err += channel.recv_stderr(65536)
                return bytes(out), bytes(err)
            now = time.monotonic()
            if now - t0 > timeout_s:
                raise GuestUnreachable(f"guest command timed out after {now - t0:.0f} s: {command}")
            if now >= next_check:
                self._check_alive(command, t0)
                next_check = now + LIVENESS_PERIOD_S
            if now >= next_ssh_check:
                self._check_ssh_answers(command, t0)
                next_ssh_check = time.monotonic() + SSH_CHECK_PERIOD_S
            wait = max(0.0, min(next_check, t0 + timeout_s) - time.monotonic())
            if channel.eof_received:  # only the exit status is still to come
                channel.status_event.wait(min(wait, 0.05))
            else:  # the channel's pipe turns readable when output arrives
                select.select([channel], [], [], wait)

    def _check_alive(self, command: str, t0: float) -> None:
        reason = self._liveness() if self._liveness is not None else None
        if reason is not None:
            raise self._died(reason, command, t0)

    def _check_ssh_answers(self, command: str, t0: float) -> None:
        transport = self._client.get_transport()
        if transport is None or not transport.is_active():
            return  # the command's channel closes too; the wait loop reports it
        t = time.monotonic()
        try:
            transport.open_session(timeout=SSH_ANSWER_TIMEOUT_S).close()
        except (OSError, EOFError, paramiko.SSHException) as e:
            if not transport.is_active():
                return
            if isinstance(e, paramiko.SSHException) and time.monotonic() - t < SSH_ANSWER_TIMEOUT_S:
                # An answer, not silence: the server refused the channel (paramiko's ChannelException,
                # or "Unable to open channel." for a refusal without a reason). The guest runs; the
                # next check, or the command's own end, tells more.
                log.warning("guest at %s:%d refused a check channel (%s); it answered, so it is not hung",
                            self.endpoint.host, self.endpoint.port, e)
                return
            self._check_alive(command, t0)
            raise self._died(f"its SSH server did not answer for {SSH_ANSWER_TIMEOUT_S:.0f} s ({e}): the guest "
                             "hangs, or its SSH server is stopped", command, t0) from e

    def declare_dead(self, reason: str) -> GuestDied:
        """The suite found the guest unusable by other means (its disk's I/O or its hypervisor hung in
        a storage stall): from now on every command fails at once with ``reason``, as after a death the
        transport saw itself. Returns the error to raise now, with the guest's console tail."""
        log.error("guest at %s:%d given up: %s", self.endpoint.host, self.endpoint.port, reason)
        console = self._console() if self._console is not None else None
        self._gone = (GuestDiedEarlier, f"the guest died earlier: {reason}", console)
        return GuestDied(reason, console)

    def _died(self, reason: str, command: str, t0: float) -> GuestDied:
        log.error("guest at %s:%d died: %s", self.endpoint.host, self.endpoint.port, reason)
        console = self._console() if self._console is not None else None
        self._gone = (GuestDiedEarlier, f"the guest died earlier: {reason}", console)
        return GuestDied(f"the guest died {time.monotonic() - t0:.1f} s into the command {command!r}: {reason}",
                         console)

    def _lost(self, command: str, t0: float, detail: str) -> RuntimeError:
        """The connection (or the command's channel) dropped: the guest's own death if the
        liveness callback names one soon, else a lost connection."""
        deadline = time.monotonic() + LOST_GRACE_S
        while True:
            reason = self._liveness() if self._liveness is not None else None
            if reason is not None:
                return self._died(reason, command, t0)
            if time.monotonic() >= deadline or (self._liveness is None and not self._connected()):
                break
            time.sleep(0.5)
        took = time.monotonic() - t0
        if self._connected():
            # The connection lives; only this command's session ended without a status (its
            # shell was killed by a signal): paramiko reports exit -1 then.
            return GuestUnreachable(f"guest command ended without an exit status after {took:.1f} s "
                                    f"(killed by a signal?): {command}")
        cause = (("the guest still runs: " if self._liveness is not None else "")
                 + "its SSH server exited or was killed, or its network went down")
        console = self._console() if self._console is not None else None
        self._gone = (SshConnectionLost, f"the SSH connection to the guest was lost earlier ({detail}); {cause}",
                      console)
        return SshConnectionLost(f"the SSH connection to the guest was lost {took:.1f} s into the command {command!r} "
                                 f"({detail}); {cause}", console)

    def _reconnect(self, timeout_s: float = 60.0) -> None:
        """A new connection in place of one that closed (the guest itself still answering)."""
        self._drop_shell()
        self._client.close()
        self._client = self._connect(timeout_s)
        transport = self._client.get_transport()
        if transport is not None:
            transport.set_keepalive(KEEPALIVE_S)

    def _connected(self) -> bool:
        transport = self._client.get_transport()
        return transport is not None and transport.is_active()

    def close(self) -> None:
        self._drop_shell()
        self._client.close()
