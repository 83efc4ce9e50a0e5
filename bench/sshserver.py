"""A private SSH server on loopback standing in for a remote libvirt host (for the e2e tests of remote
hosts and python -m bench.pool_starts, which imports no test module): Debian's own ``sshd``
(openssh-server) with its own host key, config and port, root login with a key made for the
test; stopped and removed afterwards, also when a test fails. The system's sshd (if any) and its
configuration are neither used nor touched.

What a user's machine has for a real host, the test makes in its temporary directory:

- ``known_hosts``: the server's host key, pinned, and nowhere else (not in ``~/.ssh``). The URI
  names it with ``known_hosts=`` and no ``command=``, as a user writes it: the suite's own SSH
  connection reads it, and the suite gives libvirt's ``ssh`` transport (which ignores
  ``known_hosts=``) a wrapper of its own making that checks the same file;
- ``client``: the key root logs in with (``keyfile=``).

``write_ssh_wrapper`` makes the ``command=`` program a user might write instead (``uri(wrapper=...)``),
for the tests of a ``command=`` that checks another file.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SSHD = Path("/usr/sbin/sshd")


class NoSshd(Exception):
    """No OpenSSH server on this machine (scripts/setup-host.sh installs openssh-server)."""


@dataclass(frozen=True)
class SshServer:
    port: int
    top: Path

    @property
    def client_key(self) -> Path:
        return self.top / "client"

    @property
    def known_hosts(self) -> Path:
        return self.top / "known_hosts"

    def uri(self, known_hosts: Path | None = None, wrapper: Path | None = None) -> str:
        """The libvirt URI of this "remote" host (qemu+ssh, root, the test's key, its known_hosts; a
        ``command=`` only if ``wrapper`` is given)."""
        kh = known_hosts or self.known_hosts
        return (f"qemu+ssh://root@127.0.0.1:{self.port}/system?keyfile={self.client_key}&known_hosts={kh}"
                + (f"&command={wrapper}" if wrapper else ""))

    def host_key_line(self) -> str:
        return " ".join((self.top / "hostkey.pub").read_text().split()[:2])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True, timeout=30)


def write_known_hosts(path: Path, port: int, key_line: str) -> Path:
    path.write_text(f"[127.0.0.1]:{port} {key_line}\n")
    return path


def write_ssh_wrapper(path: Path, known_hosts: Path) -> Path:
    path.write_text(f"#!/bin/sh\nexec ssh -o UserKnownHostsFile={known_hosts} -o StrictHostKeyChecking=yes "
                    "-o BatchMode=yes \"$@\"\n")
    path.chmod(0o755)
    return path


@contextlib.contextmanager
def private_sshd() -> Iterator[SshServer]:
    if not SSHD.exists():
        raise NoSshd(f"no {SSHD}: install Debian's openssh-server package (scripts/setup-host.sh does)")
    top = Path(tempfile.mkdtemp(prefix="vioconform-sshd-"))
    top.chmod(0o755)
    proc = None
    try:
        _keygen(top / "hostkey")
        _keygen(top / "client")
        shutil.copyfile(top / "client.pub", top / "authorized_keys")
        port = _free_port()
        (top / "sshd_config").write_text(
            f"Port {port}\nListenAddress 127.0.0.1\nHostKey {top / 'hostkey'}\nPidFile {top / 'sshd.pid'}\n"
            f"AuthorizedKeysFile {top / 'authorized_keys'}\nPermitRootLogin prohibit-password\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM yes\nStrictModes no\n"
            "AllowTcpForwarding yes\nSubsystem sftp internal-sftp\nLogLevel ERROR\n")
        Path("/run/sshd").mkdir(exist_ok=True)  # its privilege-separation directory
        proc = subprocess.Popen([str(SSHD), "-D", "-e", "-f", str(top / "sshd_config")],
                                stdout=subprocess.DEVNULL, stderr=open(top / "sshd.log", "w"))  # noqa: SIM115
        server = SshServer(port, top)
        write_known_hosts(server.known_hosts, port, server.host_key_line())
        deadline = time.monotonic() + 10
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"sshd did not start: {(top / 'sshd.log').read_text()}")
            time.sleep(0.05)
        yield server
    finally:
        if proc is not None:
            proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
        shutil.rmtree(top, ignore_errors=True)
