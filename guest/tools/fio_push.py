"""Which fio the guest runs: the image's own, or a static fio the suite pushes into it.

A guest image without fio (a cloud image, a RHEL template) still gets one, with no network in the
guest: the host's static fio (images/fio_static.py builds and caches it) is copied over SSH
(SFTP, or ``cat`` where the SSH server has no SFTP) into a tmpfs of the suite's own,
``FIO_BIN_DIR``, and run from there. A tmpfs apart from the work directory (/run/vioconform,
16 MiB, for fio's outputs): the binary would take most of that one, and /run itself is mounted
noexec on systemd distributions, while this one is mounted ``exec``.

The guest's login user may not be root (the transport runs commands through ``sudo -n``) while the
copy runs as that user: the directory is handed to the user (``SUDO_UID``, which sudo sets, or
``id -u`` when the login is root) for the copy, then the binary and the directory are made
root's again, so nothing the user does later can swap the binary fio runs as root.

The choice is made once per guest and kept (``GuestTools.forget`` keeps it): a run uses one fio
throughout, and the record says which (``FioIdentity``).
"""

from __future__ import annotations

import logging
import re
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from guest.tools.tool import GuestTool, ToolMissing
from images.fio_static import sha256_of

log = logging.getLogger("vioconform.fio")

#: The suite's tmpfs for programs it brings into the guest.
FIO_BIN_DIR = "/run/vioconform-bin"
#: The tmpfs is sized to the binary plus this (tmpfs rounds its size up to whole pages): room for
#: the one file, no more, so it cannot take the guest's memory.
FIO_BIN_SPARE_KIB = 256
#: What a copy of the binary may take. Measured: 2.8 MB into the embedded guest under TCG
#: (dropbear, no SFTP: through ``cat``) in 2.0-9.4 s on this loaded 2-core host; 300 s is the
#: transport's command timeout, 30x that.
PUSH_TIMEOUT_S = 300.0
#: The origin of the image's own fio in ``FioIdentity.origin``.
ORIGIN_IMAGE = "image"
#: How many hex digits of the pushed binary's SHA-256 the origin shows: "pushed: 9e49087bead9".
SHA_PREFIX = 12


class FioPushError(RuntimeError):
    """The static fio could not be put into the guest or does not run there; the message says which step failed."""


@runtime_checkable
class GuestFiles(Protocol):
    """A guest shell that can also copy a file into the guest (``transport.ssh.SshTransport``)."""

    def put_file(self, local: Path, remote: str, mode: int = ..., timeout_s: float = ...) -> str: ...


@dataclass(frozen=True)
class FioIdentity:
    """The fio a guest runs: ``version`` as ``fio --version`` prints it ("fio-3.33"), ``origin``
    "image" (the image's own) or "pushed: <SHA-256 prefix>" (the suite's static fio), and ``path``,
    how the suite calls it in the guest."""

    version: str
    origin: str
    path: str

    @property
    def pushed(self) -> bool:
        return self.origin != ORIGIN_IMAGE

    def properties(self) -> dict[str, str]:
        """The run properties (JUnit suite properties, report) that say which fio ran."""
        return {"fio_version": self.version, "fio_origin": self.origin}


class FioBinary(GuestTool):
    """The guest's fio, found or pushed on first use (``identity()``), then kept for the guest's life.

    ``GuestTools(..., fio_binary=supplier)`` gives the host-side static binary: ``supplier()`` is
    called only when a push is needed (it may build the binary first). ``push_fio=True`` pushes
    even into an image that has fio, so runs on different images use the same fio."""

    name = "fio"
    keep_on_forget = True
    install_hint = ("install fio in the guest image, or let the suite push its static fio (the session does; "
                    "python -m images.fio_static builds it)")

    _identity: FioIdentity | None = None
    _failed: Exception | None = None
    #: how the push went, for the log and measurements: "cat, 1.1 s"; None when nothing was pushed
    push_summary: str | None = None

    def identity(self) -> FioIdentity:
        """The guest's fio, found or pushed on the first call. A failure is kept and raised again:
        every disk asks, and a build or push that failed once is not tried once per disk."""
        if self._failed is not None:
            raise self._failed
        if self._identity is None:
            try:
                self._identity = self._resolve()
            except Exception as e:
                self._failed = e
                raise
        return self._identity

    @property
    def path(self) -> str:
        """How to call fio in the guest: an absolute path."""
        return self.identity().path

    def _resolve(self) -> FioIdentity:
        supplier: Callable[[], Path] | None = self.tools.fio_binary
        if not self.tools.push_fio:
            found = self._run("command -v fio || true", timeout_s=60).stdout.strip()
            if found.startswith("/"):
                return FioIdentity(self._version(found, "the image's fio"), ORIGIN_IMAGE, found)
        if supplier is None:
            raise ToolMissing(self.name, ("fio",), (("fio",),), self.tools.guest, self.install_hint)
        return self.push(supplier())

    def _version(self, path: str, what: str) -> str:
        ran = self._run(f"{shlex.quote(path)} --version", check=False, timeout_s=60)
        said = ran.stdout.strip().splitlines()
        if not ran.ok or not said:
            err = (ran.stderr.strip().splitlines() or ["no output"])[-1]
            raise FioPushError(f"{what} at {path} does not run in guest {self.tools.guest} "
                               f"(`{path} --version` exited {ran.exit_status}: {err})")
        return said[0].strip()

    def push(self, local: Path) -> FioIdentity:
        """Copy the static fio ``local`` into ``FIO_BIN_DIR`` in the guest and check it there."""
        if not isinstance(self.shell, GuestFiles):
            raise FioPushError(f"cannot push {local} into guest {self.tools.guest}: its shell cannot copy files")
        size = local.stat().st_size
        digest = sha256_of(local)
        d, remote = FIO_BIN_DIR, f"{FIO_BIN_DIR}/fio"
        kib = -(-size // 4096) * 4 + FIO_BIN_SPARE_KIB
        opts = f"size={kib}k,mode=0700,nosuid,nodev,exec"
        # SUDO_UID: the login user when the transport runs this through sudo; else this shell's user.
        self._run(f"if grep -q ' {d} ' /proc/mounts; then mount -o remount,size={kib}k {d}; "
                  f"else mkdir -p {d} && mount -t tmpfs -o {opts} vioconform-bin {d}; fi && rm -f {remote} && "
                  f"chown \"${{SUDO_UID:-$(id -u)}}:${{SUDO_GID:-$(id -g)}}\" {d} && chmod 0700 {d}")
        t0 = time.monotonic()
        way = self.shell.put_file(local, remote, 0o755, PUSH_TIMEOUT_S)
        took = time.monotonic() - t0
        ran = self._run(f"chown 0:0 {d} {remote} && chmod 0755 {d} {remote} && "
                        f"{{ if command -v sha256sum >/dev/null 2>&1; then sha256sum {remote}; else wc -c <{remote}; "
                        f"fi; }}")
        seen = ran.stdout.split()[0] if ran.stdout.split() else ""
        expected = digest if re.fullmatch(r"[0-9a-f]{64}", seen) else str(size)
        if seen != expected:
            raise FioPushError(f"the fio pushed into guest {self.tools.guest} arrived damaged: {remote} has "
                               f"{'SHA-256' if len(expected) == 64 else 'size'} {seen or '(nothing)'}, sent {expected}")
        version = self._version(remote, "the pushed static fio")
        self.push_summary = f"{way}, {took:.1f} s"
        log.info("pushed a static %s (%.1f MB, sha256 %s) into guest %s at %s by %s in %.1f s", version, size / 1e6,
                 digest[:SHA_PREFIX], self.tools.guest, remote, way, took)
        return FioIdentity(version, f"pushed: {digest[:SHA_PREFIX]}", remote)
