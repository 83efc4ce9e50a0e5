"""A user's guest image (``--image``): what it is, and the overlay the guest runs on.

The user's file is only ever read. The guest boots from a qcow2 overlay in the run directory
whose backing file is the image (``qemu-img create -f qcow2 -F <format> -b <image>``): every
write of the guest lands in the overlay, which goes with the run directory.

- ``check_image(path)``: cheap checks (``qemu-img info``, the format, a boot signature for raw
  files, no backing chain, not encrypted, and ``qemu-img check`` of a qcow2's metadata: a
  truncated or damaged file), each failure one line naming the cause and the remedy.
  The backend runs it before any guest starts.
- ``inspect_image(path, digest_cache)``: the same, plus the SHA-256 of the file's bytes
  (``model.types.DiskImageInfo``). Hashing reads the whole file: measured here 1.0-2.1 s per GiB
  (hashlib with the CPU's SHA extensions, 1-4 MiB reads, file in the page cache; a cold file
  costs its read from disk on top), so it logs its progress (bytes, rate, time left) every
  ``HASH_PROGRESS_INTERVAL_S``, and the digest is kept in ``digest_cache`` (the run's: the cache
  directory's ``image-digests/``) under the file's path, size, mtime, inode and device: the next run
  on the unchanged file reads the digest instead of the file.
- ``create_overlay(info, dest_dir, reader)``: the overlay, after checking the free space; if
  QEMU's user (``reader``) cannot read the image where it is, a read-only hard link (same
  filesystem, the file itself readable) or else a copy of it is staged in ``dest_dir`` first.
"""

from __future__ import annotations

import contextlib
import grp
import hashlib
import json
import logging
import os
import pwd
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from images.cache import build_lock, cache_dir, replace_text
from model.types import DiskImageInfo

log = logging.getLogger("vioconform.image")

#: The formats the suite boots. Anything else qemu-img recognizes is refused with the command
#: that converts it.
FORMATS = ("qcow2", "raw")
#: Read size for the hash (measured: 1 MiB reads 1.0 s/GiB, 4 MiB 1.0-2.1 s/GiB here; no gain above).
HASH_CHUNK_BYTES = 1 << 20
#: How often hashing logs its progress: a 100 GiB image takes a minute or more (1-2 s per GiB here),
#: and a run that says nothing for that long looks hung.
HASH_PROGRESS_INTERVAL_S = 5.0
#: Free space the overlay needs in the run directory besides a staged copy. A guest's first boot
#: writes its logs, cloud-init's state and SSH keys into the overlay; the suite's rules write only
#: to their own disks. Measured here: the test image's overlay (Debian 12, cloud-init, systemd) held
#: 19 MiB (BIOS) and 21 MiB (UEFI) after its boot (bench.image_boot); 256 MiB is ten times that.
OVERLAY_RESERVE_BYTES = 256 * 1024**2
#: ``qemu-img`` calls on a local file take well under a second; a hung NFS mount must not hang the run.
QEMU_IMG_TIMEOUT_S = 60.0
#: Where a raw disk image shows itself: the MBR boot signature, and a GPT header ("EFI PART")
#: at LBA 1 for 512-byte and 4 KiB sectors.
MBR_SIGNATURE_OFFSET = 510
GPT_HEADER_OFFSETS = (512, 4096)


class UserImageError(RuntimeError):
    """The image cannot be used as given; the one-line message names the cause and the remedy."""


def _qemu_img(*args: str) -> str:
    try:
        done = subprocess.run(["qemu-img", *args], capture_output=True, text=True, timeout=QEMU_IMG_TIMEOUT_S,
                              check=False)
    except FileNotFoundError:
        raise UserImageError("qemu-img is not installed: install Debian's qemu-utils "
                             "(scripts/setup-host.sh does)") from None
    except subprocess.TimeoutExpired:
        raise UserImageError(f"qemu-img {' '.join(args)} did not finish within {QEMU_IMG_TIMEOUT_S:.0f} s") from None
    if done.returncode != 0:
        said = " ".join(done.stderr.split()) or f"exit {done.returncode}"
        raise UserImageError(said)
    return done.stdout


#: ``qemu-img check`` exit codes (qemu-img(1)): 0 consistent, 1 the check could not finish (the
#: metadata is unreadable), 2 corruptions, 3 only leaked clusters (space lost, no data at risk:
#: accepted), 63 a format without checks.
QEMU_IMG_CHECK_INCOMPLETE = 1
QEMU_IMG_CHECK_CORRUPT = 2


def _qemu_img_check(path: Path) -> None:
    """UserImageError with qemu-img's own words when ``qemu-img check`` finds the qcow2 damaged
    (clusters beyond the end of a truncated file, broken refcounts or L2 tables). It reads the
    metadata only, not the data: well under a second for the images here."""
    try:
        done = subprocess.run(["qemu-img", "check", "-f", "qcow2", str(path)], capture_output=True, text=True,
                              timeout=QEMU_IMG_TIMEOUT_S, check=False)
    except FileNotFoundError:
        raise UserImageError("qemu-img is not installed: install Debian's qemu-utils "
                             "(scripts/setup-host.sh does)") from None
    except subprocess.TimeoutExpired:
        raise UserImageError(f"--image {path}: qemu-img check did not finish within {QEMU_IMG_TIMEOUT_S:.0f} s") from None
    if done.returncode not in (QEMU_IMG_CHECK_INCOMPLETE, QEMU_IMG_CHECK_CORRUPT):
        return
    lines = [" ".join(line.split()) for line in (done.stderr + "\n" + done.stdout).splitlines() if line.strip()]
    first = next((line for line in lines if line.startswith("ERROR")), lines[0] if lines else f"exit {done.returncode}")
    total = next((line for line in lines if "errors were found" in line or "error was found" in line), "")
    said = first + (f" ({total.rstrip('.')})" if total and total != first else "")
    if "lock" in said:
        raise UserImageError(f"--image {path}: in use by another process (qemu-img: {said}); stop the VM "
                             "that has it open, or give a copy")
    raise UserImageError(f"--image {path}: qemu-img check finds the image damaged (truncated or corrupt): {said}; "
                         "give an intact copy of the image")


def _readable(path: Path) -> None:
    """Raise UserImageError unless ``path`` is an existing regular file this process can read."""
    if not path.exists():
        raise UserImageError(f"--image {path}: no such file")
    if path.is_dir():
        raise UserImageError(f"--image {path}: is a directory, not a disk image file")
    if not path.is_file():
        raise UserImageError(f"--image {path}: not a regular file (a device or a pipe); give a qcow2 or raw image file")
    try:
        with open(path, "rb") as f:
            f.read(1)
    except OSError as e:
        raise UserImageError(f"--image {path}: cannot be read ({e.strerror}); make it readable by the user "
                             "running the suite") from None


def _looks_like_disk(path: Path) -> bool:
    """Whether a raw file starts like a disk: an MBR boot signature or a GPT header."""
    with open(path, "rb") as f:
        head = f.read(max(GPT_HEADER_OFFSETS) + 8)
    if head[MBR_SIGNATURE_OFFSET:MBR_SIGNATURE_OFFSET + 2] == b"\x55\xaa":
        return True
    return any(head[o:o + 8] == b"EFI PART" for o in GPT_HEADER_OFFSETS)


@dataclass(frozen=True)
class ImageFacts:
    """What ``qemu-img info`` says of the image (``check_image``)."""

    path: Path
    format: str
    virtual_size_bytes: int
    actual_size_bytes: int


def check_image(path: Path) -> ImageFacts:
    """The cheap checks, before any guest starts: a readable file, qcow2 or raw (a raw file with a
    boot signature), no backing file of its own, not encrypted. Raises UserImageError."""
    path = Path(path).expanduser().absolute()
    _readable(path)
    try:
        info = json.loads(_qemu_img("info", "--output=json", str(path)))
    except UserImageError as e:
        if "lock" in str(e):
            raise UserImageError(f"--image {path}: in use by another process (qemu-img: {e}); stop the VM "
                                 "that has it open, or give a copy") from None
        raise UserImageError(f"--image {path}: qemu-img cannot read it: {e}") from None
    except json.JSONDecodeError as e:
        raise UserImageError(f"--image {path}: qemu-img info gave no JSON ({e})") from None
    fmt = str(info.get("format", ""))
    if fmt not in FORMATS:
        raise UserImageError(f"--image {path}: format {fmt or 'unknown'} is not supported (qcow2 or raw); convert "
                             f"it: qemu-img convert -O qcow2 {path} {path.with_suffix('.qcow2')}")
    if info.get("backing-filename"):
        raise UserImageError(f"--image {path}: it has a backing file of its own ({info['backing-filename']}); the "
                             "suite hashes and overlays one file: flatten it first with "
                             f"qemu-img convert -O qcow2 {path} flat.qcow2")
    if info.get("encrypted"):
        raise UserImageError(f"--image {path}: it is encrypted; give an unencrypted image")
    data = info.get("format-specific", {}).get("data", {})
    if data.get("data-file"):
        raise UserImageError(f"--image {path}: its data lives in an external file ({data['data-file']}); "
                             "convert it to a self-contained qcow2 with qemu-img convert -O qcow2")
    if fmt == "raw" and not _looks_like_disk(path):
        raise UserImageError(f"--image {path}: not a disk image (a raw file without an MBR boot signature or a "
                             "GPT header); give a bootable qcow2 or raw disk image")
    if fmt == "qcow2":
        _qemu_img_check(path)
    return ImageFacts(path, fmt, int(info.get("virtual-size", 0)), int(info.get("actual-size", 0)))


def sha256_of(path: Path, progress: Callable[[str], None] = log.info,
              clock: Callable[[], float] = time.monotonic) -> str:
    """The SHA-256 of the file's bytes; every ``HASH_PROGRESS_INTERVAL_S`` ``progress`` is told how
    far it got (bytes, rate, time left)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        start = last = clock()
        done = 0
        while chunk := f.read(HASH_CHUNK_BYTES):
            h.update(chunk)
            done += len(chunk)
            now = clock()
            if now - last >= HASH_PROGRESS_INTERVAL_S:
                last = now
                rate = done / max(now - start, 1e-9)
                progress(f"hashing {path}: {done / 1024**3:.1f} of {size / 1024**3:.1f} GiB "
                         f"({done / max(size, 1):.0%}) at {rate / 1024**2:.0f} MiB/s, about "
                         f"{max(size - done, 0) / rate:.0f} s left")
    return h.hexdigest()


def digest_cache_dir() -> Path:
    """Where the digests of ``--image`` files are kept between runs."""
    return cache_dir() / "image-digests"


def _identity(st: os.stat_result) -> dict[str, int]:
    """What says a file is unchanged since it was hashed: a write changes its size or mtime, a file
    put in its place (cp, mv, a new download) has another inode."""
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "inode": st.st_ino, "device": st.st_dev}


def cached_sha256(path: Path, cache: Path, progress: Callable[[str], None] = log.info) -> str:
    """``sha256_of(path)``, or the digest kept in ``cache`` when the file's path, size, mtime, inode
    and device are those it had when it was hashed. One entry per path (a JSON file named by the
    path's hash); a process hashing a path holds its lock, so a second one (another xdist worker)
    waits and then reads the digest. A cache that cannot be written only costs the next run a hash."""
    path = path.absolute()
    entry = cache / f"{hashlib.sha256(str(path).encode()).hexdigest()[:32]}.json"
    with contextlib.ExitStack() as held:
        with contextlib.suppress(OSError):  # no lock without a writable cache: hashed, not kept
            cache.mkdir(parents=True, exist_ok=True)
            held.enter_context(build_lock(entry))
        before = _identity(path.stat())
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            kept = json.loads(entry.read_text())
            if kept["path"] == str(path) and kept["identity"] == before:
                digest = str(kept["sha256"])
                progress(f"sha256 of {path} from the cache ({entry}): unchanged since it was hashed")
                return digest
        digest = sha256_of(path, progress)
        if _identity(path.stat()) == before:  # not written to while it was read
            with contextlib.suppress(OSError):
                replace_text(entry, json.dumps({"path": str(path), "identity": before, "sha256": digest}))
    return digest


def inspect_image(path: Path, digest_cache: Path | None = None) -> DiskImageInfo:
    """``check_image`` and the SHA-256 of the file (1-2 s per GiB here), from ``digest_cache``
    when the file is unchanged since it was hashed (None: hashed every time)."""
    facts = check_image(path)
    digest = sha256_of(facts.path) if digest_cache is None else cached_sha256(facts.path, digest_cache)
    return DiskImageInfo(facts.path, facts.format, facts.virtual_size_bytes, digest)


# --- who can read the image ------------------------------------------------------------------
@dataclass(frozen=True)
class Reader:
    """The user a process that must read the image runs as (libvirt's QEMU: libvirt-qemu:kvm)."""

    uid: int
    gid: int
    groups: tuple[int, ...]

    @classmethod
    def of_user(cls, name: str) -> Reader | None:
        try:
            pw = pwd.getpwnam(name)
        except KeyError:
            return None
        return cls(pw.pw_uid, pw.pw_gid, tuple(os.getgrouplist(name, pw.pw_gid)))

    def describe(self) -> str:
        try:
            user = pwd.getpwuid(self.uid).pw_name
        except KeyError:
            user = str(self.uid)
        try:
            group = grp.getgrgid(self.gid).gr_name
        except KeyError:
            group = str(self.gid)
        return f"{user}:{group}"


def readable_by(path: Path, reader: Reader) -> bool:
    """Whether ``reader`` can open ``path`` for reading: asked of the kernel by a child process
    running as that user (modes, ACLs and every directory on the way count)."""
    if reader.uid == os.geteuid():
        return os.access(path, os.R_OK)
    try:
        done = subprocess.run(["dd", f"if={path}", "of=/dev/null", "bs=512", "count=1", "status=none"],
                              user=reader.uid, group=reader.gid, extra_groups=list(reader.groups),
                              capture_output=True, timeout=QEMU_IMG_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def _file_readable_by(st: os.stat_result, reader: Reader) -> bool:
    """Whether the file's own mode lets ``reader`` read it (ignoring the directories on its way)."""
    if st.st_uid == reader.uid:
        return bool(st.st_mode & 0o400)
    if st.st_gid == reader.gid or st.st_gid in reader.groups:
        return bool(st.st_mode & 0o040)
    return bool(st.st_mode & 0o004)


def _check_space(dest_dir: Path, needed: int, what: str) -> None:
    free = shutil.disk_usage(dest_dir).free
    if free < needed:
        raise UserImageError(f"no space for {what} in {dest_dir}: {free / 1024**2:.0f} MiB free, "
                             f"{needed / 1024**2:.0f} MiB needed; free space there or point TMPDIR at a "
                             "filesystem with room (the run directory lives in $TMPDIR, default /tmp)")


def backing_for(path: Path, fmt: str, dest_dir: Path, reader: Reader | None) -> tuple[Path, int]:
    """The path QEMU reads the image through, and the bytes a staged copy needs: the image itself
    when ``reader`` can read it; else a hard link in ``dest_dir`` (the file's own mode lets
    ``reader`` read it, only a directory on its way does not) or a copy (0 bytes unless a copy)."""
    if reader is None or readable_by(path, reader):
        return path, 0
    st = path.stat()
    if _file_readable_by(st, reader) and st.st_dev == dest_dir.stat().st_dev:
        return dest_dir / f"image.{fmt}", 0
    return dest_dir / f"image.{fmt}", st.st_blocks * 512


def check_space(path: Path, fmt: str, dest_dir: Path, reader: Reader | None) -> None:
    """UserImageError unless ``dest_dir`` has room for the overlay (and a staged copy, if QEMU's
    user cannot read the image): before any guest starts, and again when the overlay is made."""
    _, copy_bytes = backing_for(path, fmt, dest_dir, reader)
    _check_space(dest_dir, OVERLAY_RESERVE_BYTES + copy_bytes,
                 "the guest's overlay" + (f" and a copy of {path} (QEMU's user cannot read it)" if copy_bytes else ""))


def _copy(src: Path, dest: Path) -> None:
    """A sparse copy (a raw image's holes stay holes; a copy-on-write filesystem shares the blocks)."""
    done = subprocess.run(["cp", "--sparse=always", "--reflink=auto", str(src), str(dest)], capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        dest.unlink(missing_ok=True)
        raise UserImageError(f"cannot copy {src} into {dest.parent}: {' '.join(done.stderr.split())}")


def create_overlay(info: DiskImageInfo, dest_dir: Path, reader: Reader | None = None) -> Path:
    """``dest_dir/overlay.qcow2`` on top of the image; raises UserImageError (no space, qemu-img failed).

    ``reader``: the user QEMU runs as. Where it cannot read the image, the image is staged in
    ``dest_dir`` read-only first (hard link if that suffices, else a copy, logged with how to avoid it).
    Everything is written into ``dest_dir`` only; whoever made ``dest_dir`` removes it."""
    check_space(info.path, info.format, dest_dir, reader)
    backing, copy_bytes = backing_for(info.path, info.format, dest_dir, reader)
    if backing != info.path:
        who = reader.describe() if reader else "QEMU"
        backing.unlink(missing_ok=True)  # staged by an earlier attempt of this run
        if copy_bytes:
            log.warning("QEMU (%s) cannot read %s: copying it (%.0f MiB) into the run directory; to avoid the "
                        "copy make the file and its directories readable by %s", who, info.path,
                        copy_bytes / 1024**2, who)
            _copy(info.path, backing)
        else:
            log.info("QEMU (%s) cannot reach %s through its directories: using a hard link in the run directory",
                     who, info.path)
            os.link(info.path, backing)
        if copy_bytes:
            os.chmod(backing, 0o444)
            if reader is not None:
                os.chown(backing, reader.uid, reader.gid)
    overlay = dest_dir / "overlay.qcow2"
    try:
        _qemu_img("create", "-q", "-f", "qcow2", "-F", info.format, "-b", str(backing), str(overlay))
    except UserImageError as e:
        raise UserImageError(f"cannot create the overlay {overlay} on {info.path}: {e}") from None
    if reader is not None:
        os.chown(overlay, reader.uid, reader.gid)
        overlay.chmod(0o600)
    return overlay
