"""The files a guest needs on its libvirt host, on this machine or a remote one.

A run keeps its record in its run directory on this machine (``hypervisors.cleanup.make_run_dir``).
QEMU needs its own files where it runs: the kernel and initramfs, the disk files under test, the
console and trace logs. ``LocalFiles`` (a ``qemu:///`` URI) keeps them in the run directory itself.
``RemoteFiles`` (``qemu+ssh://``) stages them in a directory of the suite's own on the host
(``--host-dir``, default ``/var/tmp/vioconform``): ``<host dir>/vioconform-run-<...>/``, with an
``owner`` file naming this machine and process, so that a later run from this machine can sweep
what a killed one left there, and nothing anyone else made. The directory goes at the end of the
run; the console log comes back to the run directory first.
"""

from __future__ import annotations

import logging
import os
import platform
import shlex
import shutil
import socket
import subprocess
import threading
from pathlib import Path, PurePath, PurePosixPath

import paramiko

from hypervisors.cleanup import OWNER_FILE, RUN_DIR_PREFIX, CleanupStack, owner_alive
from hypervisors.libvirt import qemulog
from hypervisors.libvirt.hostlink import HostLink
from hypervisors.libvirt.trace import LocalLog
from model.errors import HypervisorError
from model.types import DiskImageInfo

log = logging.getLogger("vioconform.libvirt")

#: Where the suite stages a remote guest's files unless --host-dir says otherwise.
DEFAULT_HOST_DIR = PurePosixPath("/var/tmp/vioconform")
#: Where a remote host keeps uploaded images (under the staging base), by SHA-256.
IMAGE_CACHE = "images"
#: The domains a staging directory's run started, one name per line.
DOMAINS_FILE = "domains"
#: The user QEMU runs as under a Debian host's system daemon.
QEMU_USER = "libvirt-qemu"


def _qemu_img_argv(path: PurePath, size_bytes: int, image_format: str) -> list[str]:
    return ["qemu-img", "create", "-q", "-f", image_format, str(path), str(size_bytes)]


def _qemu_img_create(path: PurePath, size_bytes: int, image_format: str) -> None:
    """Make a disk image with qemu-img on this machine; HypervisorError with its words if it fails."""
    argv = _qemu_img_argv(path, size_bytes, image_format)
    try:
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise HypervisorError(f"--disk format={image_format} needs qemu-img (Debian: apt-get install qemu-utils)") from None
    if done.returncode != 0:
        raise HypervisorError(f"{' '.join(argv)} failed: {done.stderr.strip() or done.returncode}")


def owner_line() -> str:
    """Who made a staging directory: this machine and process."""
    return f"{socket.gethostname()} {os.getpid()}\n"


class LocalFiles(LocalLog):
    """The libvirt host is this machine: QEMU's files are the run directory's."""

    local = True

    def stage_dir(self, run_dir: Path, cleanup: CleanupStack) -> PurePath:
        return run_dir

    def note_domain(self, stage: PurePath, name: str) -> None:
        """Local domains' logs are found by the pid in their names (``qemulog.sweep_logs``)."""

    def put(self, src: Path, dest: PurePath) -> None:
        if not Path(dest).exists():
            shutil.copyfile(src, dest)

    def create_disk(self, path: PurePath, size_bytes: int, image_format: str = "raw") -> None:
        """A sparse raw file, or a qcow2 image made with qemu-img (``--disk format=qcow2``)."""
        if image_format != "raw":
            _qemu_img_create(path, size_bytes, image_format)
            return
        with open(path, "wb") as f:
            f.truncate(size_bytes)

    def remove(self, path: PurePath) -> None:
        Path(path).unlink(missing_ok=True)

    def read_range(self, path: PurePath, offset: int, length: int) -> bytes:
        """``length`` bytes of the file from ``offset`` (fewer at its end)."""
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read(length)

    def qemu_log(self, name: str) -> str:
        path = qemulog.log_path(name)
        return path.read_text(errors="replace") if path.exists() else ""

    def take_qemu_log(self, name: str, run_dir: Path | None) -> None:
        qemulog.keep_log(name, run_dir)

    def kernel_release(self) -> str:
        return platform.release()

    def sweep(self) -> None:
        """The local sweep is the session's (run directories in $TMPDIR, QEMU logs)."""

    def close(self) -> None:
        pass


class RemoteFiles:
    """The libvirt host is another machine, reached over ``link``; files go to ``base``."""

    local = False

    def __init__(self, link: HostLink, base: PurePath = DEFAULT_HOST_DIR) -> None:
        self.link = link
        self.base = base
        self._qemu_ids: tuple[int, int] | None = None

    @property
    def qemu_ids(self) -> tuple[int, int]:
        """uid and gid of QEMU's user on the host (root where the host has no libvirt-qemu)."""
        if self._qemu_ids is None:
            out = self.link.run(f"id -u {QEMU_USER} 2>/dev/null && id -g {QEMU_USER} || echo 0 0").split()
            self._qemu_ids = (int(out[0]), int(out[1]))
        return self._qemu_ids

    def stage_dir(self, run_dir: Path, cleanup: CleanupStack) -> PurePath:
        """``<base>/<run dir's name>`` on the host, made now, removed by ``cleanup``; the console
        log is copied back into ``run_dir`` before."""
        path = self.base / run_dir.name
        q = shlex.quote
        self.link.run(f"mkdir -p -m 0755 {q(str(self.base))} && mkdir -m 0755 {q(str(path))}")

        def remove() -> None:
            console = self.read(path / "console.log")
            if console:
                (run_dir / "console.log").write_bytes(console)
            self.link.remove_tree(path)

        cleanup.push(f"staging directory {path} on {self.link.address.host}", remove)
        self.link.write(path / OWNER_FILE, owner_line().encode())
        return path

    def put(self, src: Path, dest: PurePath) -> None:
        self.link.put(src, dest)

    def note_domain(self, stage: PurePath, name: str) -> None:
        """Record a domain started from ``stage``: a sweep of the directory removes its QEMU log."""
        self.link.write(stage / DOMAINS_FILE, f"{name}\n".encode(), append=True)

    def create_disk(self, path: PurePath, size_bytes: int, image_format: str = "raw") -> None:
        if image_format != "raw":
            self.link.run(" ".join(shlex.quote(a) for a in _qemu_img_argv(path, size_bytes, image_format)))
        else:
            self.link.create_sparse(path, size_bytes)
        self.link.give(path, *self.qemu_ids, 0o660)

    def for_qemu(self, path: PurePath) -> None:
        """An empty file QEMU (as its own user) can append to: the trace log."""
        self.link.write(path, b"", append=True)
        self.link.give(path, *self.qemu_ids, 0o644)

    def size(self, path: PurePath) -> int:
        return self.link.size(path)

    # -- a user's image (--image) -----------------------------------------------------------
    def image_on_host(self, info: DiskImageInfo) -> PurePath:
        """The user's image on the host: uploaded once over SFTP into ``<base>/images/<sha256>.<format>``
        (read-only, kept for later runs of the same image; the suite's own cache: remove the
        directory to drop it), then only ever a backing file."""
        cache = self.base / IMAGE_CACHE
        dest = cache / f"{info.sha256}.{info.format}"
        size = info.path.stat().st_size
        if self.link.size(dest) == size:
            log.info("image %s is on %s already (%s)", info.path, self.link.address.host, dest)
            return dest
        q = shlex.quote
        self.link.run(f"mkdir -p -m 0755 {q(str(self.base))} {q(str(cache))}")
        part = cache / f"{info.sha256}.{os.getpid()}.part"
        log.info("uploading image %s (%.0f MiB) to %s:%s", info.path, size / 1024**2, self.link.address.host, dest)
        try:
            self.link.put(info.path, part, 0o444)
            self.link.run(f"mv -f {q(str(part))} {q(str(dest))}")
        finally:
            self.link.run(f"rm -f -- {q(str(part))}")
        return dest

    def overlay(self, backing: PurePath, fmt: str, stage: PurePath) -> PurePath:
        """``stage/overlay.qcow2`` on top of ``backing``, made by qemu-img on the host, QEMU's."""
        overlay = stage / "overlay.qcow2"
        q = shlex.quote
        try:
            self.link.run(f"qemu-img create -q -f qcow2 -F {q(fmt)} -b {q(str(backing))} {q(str(overlay))}")
        except HypervisorError as e:
            raise HypervisorError(f"cannot create the overlay {overlay} on {self.link.address.host}: {e} "
                                  "(qemu-utils installed there?)") from None
        self.link.give(overlay, *self.qemu_ids, 0o600)
        return overlay

    def copy_for_qemu(self, src: PurePath, dest: PurePath, mode: int = 0o644) -> PurePath:
        """Copy a file of the host (OVMF's variable store template) for QEMU's user."""
        self.link.run(f"cp -- {shlex.quote(str(src))} {shlex.quote(str(dest))}")
        self.link.give(dest, *self.qemu_ids, mode)
        return dest

    def put_for_qemu(self, src: Path, dest: PurePath, mode: int = 0o644) -> PurePath:
        self.link.put(src, dest, mode)
        self.link.give(dest, *self.qemu_ids, mode)
        return dest

    def remove(self, path: PurePath) -> None:
        self.link.run(f"rm -f -- {shlex.quote(str(path))}")

    def read(self, path: PurePath, offset: int = 0) -> bytes:
        return self.link.read(path, offset)

    def read_range(self, path: PurePath, offset: int, length: int) -> bytes:
        """``length`` bytes of the file from ``offset`` (fewer at its end), over SFTP."""
        if self.link.size(path) == 0:
            raise FileNotFoundError(f"{path} on {self.link.address.host} is missing or empty")
        return self.link.read(path, offset, length)

    def qemu_log(self, name: str) -> str:
        return self.link.read(PurePosixPath(qemulog.log_path(name))).decode(errors="replace")

    def take_qemu_log(self, name: str, run_dir: Path | None) -> None:
        """Copy the domain's QEMU log (libvirt never removes it) into ``run_dir``, remove it on the host."""
        text = self.link.read(PurePosixPath(qemulog.log_path(name)))
        if text and run_dir is not None and run_dir.is_dir():
            (run_dir / f"{name}.qemu.log").write_bytes(text)
        self.link.run(f"rm -f -- {shlex.quote(str(qemulog.log_path(name)))}")

    def kernel_release(self) -> str:
        return self.link.run("uname -r").strip()

    def sweep(self) -> None:
        """Remove staging directories (and their domains' QEMU logs) that runs from this machine
        left on the host when they were killed: an owner file naming this machine and a process
        that is gone. Anything else in the directory is left alone."""
        if not self.link.is_dir(self.base):
            return
        me = socket.gethostname()
        for entry in self.link.listdir(self.base):
            if not entry.startswith(RUN_DIR_PREFIX):
                continue  # the image cache, or anything that is not a run's
            path = self.base / entry
            owner = self.link.read(path / OWNER_FILE).decode(errors="replace").split()
            if len(owner) != 2 or owner[0] != me or not owner[1].isdigit() or owner_alive(int(owner[1])):
                continue
            log.warning("removing staging directory %s on %s of dead process %s", path, self.link.address.host,
                        owner[1])
            for name in self.link.read(path / DOMAINS_FILE).decode(errors="replace").split():
                # the QEMU logs of the domains this directory's run started (pid-named logs alone
                # could be another machine's run with the same pid)
                if name.startswith("vioconform-"):
                    self.link.run(f"rm -f -- {shlex.quote(str(qemulog.log_path(name)))}")
            self.link.remove_tree(path)

    def close(self) -> None:
        self.link.close()


HostFiles = LocalFiles | RemoteFiles


class BackingFile:
    """A file-backed disk's raw file on the libvirt host (``hypervisors.base.BackingStore``), read by the
    suite itself: on this machine, or over SFTP. QEMU writes it with O_DIRECT (``cache='none'``),
    which leaves no stale page in the host's cache: a read sees what the guest's writes left there."""

    def __init__(self, files: HostFiles, path: PurePath) -> None:
        self.files = files
        self.path = path

    @property
    def where(self) -> str:
        host = "this machine" if isinstance(self.files, LocalFiles) else self.files.link.address.host
        return f"the backing file {self.path} on {host}"

    def read(self, offset_bytes: int, length_bytes: int) -> bytes:
        try:
            data = self.files.read_range(self.path, offset_bytes, length_bytes)
        except OSError as e:
            raise HypervisorError(f"cannot read {self.where}: {e}") from e
        if len(data) != length_bytes:
            raise HypervisorError(f"{self.where}: {len(data)} bytes at {offset_bytes}, not {length_bytes}: the file "
                                  "is shorter than its disk")
        return data



class ConsoleMirror:
    """Keeps a copy of a remote guest's console log in the run directory, fresh to a second, so
    that everything reading the console (errors, panics, the report) reads a local file."""

    PERIOD_S = 1.0

    def __init__(self, files: RemoteFiles, source: PurePath, dest: Path) -> None:
        self.files, self.source, self.dest = files, source, dest
        self._stop = threading.Event()
        self._offset = 0
        self._thread = threading.Thread(target=self._run, name=f"console-{dest.parent.name}", daemon=True)

    def start(self) -> ConsoleMirror:
        self.dest.touch()
        self._thread.start()
        return self

    def copy(self) -> None:
        data = self.files.read(self.source, self._offset)
        if data:
            with open(self.dest, "ab") as f:
                f.write(data)
            self._offset += len(data)

    def _run(self) -> None:
        while not self._stop.wait(self.PERIOD_S):
            try:
                self.copy()
            except (OSError, EOFError, paramiko.SSHException, HypervisorError) as e:
                # the link dropped: the suite reports that where it uses the guest
                log.debug("console mirror of %s stopped: %s", self.source, e)
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
