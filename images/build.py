"""Builds and caches the embedded vioconform guest: a Debian kernel plus a busybox initramfs.

Everything comes from Debian packages: the kernel package (downloaded, not installed, and cached:
images/kernels.py; Debian's current ``linux-image-amd64``, another kernel apt has, or a file),
busybox-static, dropbear-bin, dmsetup, and a few programs of e2fsprogs and util-linux (copied from
the host with their shared libraries), and fio built static from Debian's fio source
(images/fio_static.py, cached).
The result is cached under ``$XDG_CACHE_HOME/vioconform/images/<recipe hash>/`` (see images.cache);
a change to the recipe (package versions, the init script, this file) gives a new hash.

Run it by hand to pre-build: ``python -m images.build`` prints the image directory.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from images import fio_static
from images.build_error import ImageBuildError
from images.cache import CacheNotWritable, cache_dir, cached_or_built, writable_dir
from images.kernels import AptKernel, KernelUnknown, cached_deb, default_kernel, resolve
from images.modules import closure

HERE = Path(__file__).resolve().parent

#: Drivers loaded at boot, in this order. Storage drivers for every controller
#: QEMU emulates (the controller table in docs/user-guide.md), and virtio_net for the SSH port forward.
#: Only REQUIRED_MODULES must exist: a kernel without one of the others (a controller's driver,
#: e.g. Debian's cloud flavour has no mptsas) gives a guest without it, in which that controller's
#: rules skip and name the module (measure/disk.py). A module built into the kernel
#: (modules.builtin) needs no file.
MODULES = (
    "virtio_pci", "virtio_net", "virtio_blk", "virtio_scsi", "sd_mod",
    "mptsas", "sym53c8xx", "megaraid_sas", "nvme", "ahci", "ata_piix",
    # ext4 (which also mounts ext2): the alignment rule puts a filesystem on the scratch disk.
    # ext4 asks the crypto API for "crc32c" at every mount, a dependency modules.dep does not list.
    "crc32c_generic", "ext4",
    # The host's entropy (the domain's virtio-rng): init loads it before it makes the SSH host key.
    "virtio_rng",
    # device-mapper, for the data-integrity rule's lba-shift fault (a linear target offset by a few
    # sectors, made with dmsetup): shipped, loaded by the rule when it needs it (modprobe), never at boot.
    "dm_mod",
)
#: Modules copied into the image but loaded by no boot: a rule loads them when it needs them. The
#: swallow-errors fault (error-propagation) mirrors the scratch disk with device-mapper's mirror
#: target (dm_mirror, and dm_log, dm_region_hash with it) onto a RAM disk (brd).
ON_DEMAND_MODULES = ("dm_mirror", "brd")
#: Host binaries copied into the guest with their shared-library closure. dmsetup (Debian's dmsetup
#: package, 0.2 MB and 1.3 MB of libraries) drives device-mapper: busybox has no applet for it.
#: e2fsprogs' ``mkfs.ext4`` (mke2fs, which makes ext4 when called by that name; its built-in profile
#: stands in for /etc/mke2fs.conf) and ``resize2fs`` (discard's fstrim and resize's online grow):
#: busybox's mke2fs makes ext2 only and it has no resize2fs. util-linux's ``blkdiscard``, for its
#: ``-z`` (BLKZEROOUT: discard's write-zeroes), which busybox's lacks: the guest's SSH sessions look
#: in /usr/sbin before /bin (dropbear's root PATH), so it stands in for busybox's applet there.
#: 1.1 MB with their libraries (libext2fs, libe2p, libcom_err, libblkid, libuuid).
BINARIES = ("/usr/sbin/dropbear", "/usr/bin/dropbearkey", "/usr/sbin/dmsetup", "/usr/sbin/mkfs.ext4",
            "/usr/sbin/resize2fs", "/usr/sbin/blkdiscard")
#: fio is the suite's static build of Debian's fio source (images/fio_static.py), not Debian's
#: binary: Debian's links ceph, rdma, gnutls, ICU and more, 71 MB of libraries that would make the
#: initramfs 93 MB (33.6 MB zstd), all decompressed into guest RAM at every boot, slowly under TCG.
#: The static fio is 2.8 MB, and the initramfs about 5 MB zstd (docs/benchmarks.md).
GUEST_FIO = "/usr/bin/fio"
REQUIRED_MODULES = ("virtio_pci", "virtio_net")
#: The kernel command line of every boot of the embedded guest (the host adds the run's
#: ``vioconform.key=`` and ``vioconform.drivers=``, see images/init). The kernel's crypto
#: self-tests are skipped: ``cryptomgr.notests`` (the tests of every registered algorithm at
#: boot) and the SP800-108 KDF's own test (an initcall that only tests): measured with
#: ``initcall_debug`` under TCG, they cost 174 ms and 221 ms of every boot. The guest's storage
#: path uses no kernel crypto but the CRC checksums (crc32c, crc-t10dif), which are not self-tested
#: this way.
#: ``no_timer_check``: the kernel's check that the timer interrupt arrives through the IO-APIC
#: waits a few ticks; on a loaded TCG host they can come too late, and the kernel panics ("IO-APIC
#: + timer doesn't work!") before init. Virtual machines skip that check (RHEL's cloud images boot
#: with it too).
KERNEL_ARGS = "console=ttyS0 quiet no_timer_check cryptomgr.notests initcall_blacklist=crypto_kdf108_init"
HOST_PACKAGES = ("busybox-static", "dropbear-bin", "dmsetup", "e2fsprogs", "util-linux", "libc6")


@dataclass(frozen=True)
class GuestImage:
    """A bootable direct-kernel guest: kernel, initramfs and the kernel command line it needs."""

    kernel_path: Path
    initrd_path: Path
    kernel_version: str
    recipe_hash: str
    build_seconds: float  # 0.0 when it came from the cache

    @property
    def directory(self) -> Path:
        return self.kernel_path.parent


def cache_root() -> Path:
    return cache_dir() / "images"


def _run_bytes(cmd: list[str], cwd: Path | None = None, data: bytes | None = None) -> bytes:
    try:
        res = subprocess.run(cmd, cwd=cwd, check=True, capture_output=True, input=data)
    except FileNotFoundError as e:
        raise ImageBuildError(f"{cmd[0]} is not installed; run scripts/setup-host.sh") from e
    except subprocess.CalledProcessError as e:
        said = e.stderr.decode(errors="replace").strip()[-800:]
        raise ImageBuildError(f"`{' '.join(cmd)}` failed ({e.returncode}): {said}") from e
    return res.stdout


def _run(cmd: list[str], cwd: Path | None = None) -> str:
    return _run_bytes(cmd, cwd).decode(errors="replace")


def _installed_version(pkg: str) -> str:
    try:
        return _run(["dpkg-query", "-W", "-f=${Version}", pkg]).strip()
    except ImageBuildError as e:
        raise ImageBuildError(f"Debian package {pkg} is missing; run scripts/setup-host.sh ({e})") from e


def check_kernel_deb(deb: Path) -> str:
    """The package name of a kernel .deb of the user's, or ImageBuildError saying in one line why
    it cannot be one: not a file, not a Debian package, not a linux-image package, or one without
    a kernel (a meta package such as linux-image-amd64). Reads the package's header and the start
    of its file list only (a kernel package lists /boot first): milliseconds, not a build."""
    if not deb.is_file():
        raise ImageBuildError(f"kernel package {deb} does not exist (give a linux-image-*.deb file)")
    try:
        pkg = _run(["dpkg-deb", "--field", str(deb), "Package"]).strip()
    except ImageBuildError as e:
        raise ImageBuildError(f"{deb} is not a Debian package ({_dpkg_said(str(e), deb)})") from None
    if not pkg.startswith("linux-image-"):
        raise ImageBuildError(f"{deb} is the package {pkg!r}, not a kernel image (linux-image-*)")
    with subprocess.Popen(["dpkg-deb", "--contents", str(deb)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as listing:
        assert listing.stdout is not None and listing.stderr is not None
        has_kernel = any(re.search(r" \./boot/vmlinuz-\S+$", line.rstrip("\n")) for line in listing.stdout)
        if has_kernel:
            listing.kill()  # stops the listing at the kernel: the rest is modules
        elif listing.wait() != 0:
            raise ImageBuildError(f"{deb} is damaged ({_dpkg_said(listing.stderr.read(), deb)})")
    if not has_kernel:
        raise ImageBuildError(f"{deb} ({pkg}) holds no /boot/vmlinuz-*; a meta package? "
                              "give the linux-image-<version> package it depends on")
    return pkg


def _dpkg_said(stderr: str, deb: Path) -> str:
    """dpkg-deb's last error, without its prefix and the path the caller names already."""
    last = stderr.strip().splitlines()[-1] if stderr.strip() else "no message"
    return last.rpartition("dpkg-deb: error: ")[2].replace(f"'{deb}' is ", "").replace(f" in {deb}", "")


def _kernel_deb_id(deb: Path) -> list[str]:
    """A kernel package file of the user's: named by its content, so a rebuilt .deb is a new image."""
    check_kernel_deb(deb)
    return ["file", deb.name, hashlib.sha256(deb.read_bytes()).hexdigest()]


def _apt_kernel_id(kernel: AptKernel | None) -> list[str]:
    """A kernel apt has (``--guest-kernel``; None: Debian's current ``linux-image-amd64``): its package and version."""
    k = kernel or default_kernel()
    return [k.package, k.version]


def recipe(kernel_deb: Path | None = None, kernel: AptKernel | None = None) -> dict[str, object]:
    """Everything the image depends on; its hash names the cache entry.

    ``kernel_deb``: a linux-image .deb of your own (a vendor kernel, a patched driver); ``kernel``: a
    kernel apt has (images/kernels.py); neither: Debian's current ``linux-image-amd64``. The same
    kernel named either way by apt (``6.1``, ``linux-image-amd64``) is the same image."""
    return {
        "kernel": _kernel_deb_id(kernel_deb) if kernel_deb else _apt_kernel_id(kernel),
        "packages": {p: _installed_version(p) for p in HOST_PACKAGES},
        "modules": list(MODULES),
        "on_demand_modules": list(ON_DEMAND_MODULES),
        "fio": _static_fio_recipe(),
        "init_sha256": hashlib.sha256((HERE / "init").read_bytes()).hexdigest(),
        "builder_sha256": hashlib.sha256(Path(__file__).read_bytes()).hexdigest(),
    }


def _static_fio_recipe() -> str:
    """The static fio's recipe hash (its source version and flags): a new fio is a new image."""
    return fio_static.recipe_hash(fio_static.recipe())


def recipe_hash(r: dict[str, object]) -> str:
    return hashlib.sha256(json.dumps(r, sort_keys=True).encode()).hexdigest()[:16]


def _lib_closure(binaries: tuple[str, ...]) -> set[str]:
    libs: set[str] = set()
    for b in binaries:
        for line in _run(["ldd", b]).splitlines():
            m = re.search(r"(/\S+)\s+\(0x", line)
            if m:
                libs.add(m.group(1))
    return libs


def _copy(src: str | Path, root: Path) -> None:
    dst = root / str(src).lstrip("/")
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(os.path.realpath(src), dst)


def _build(dest: Path, r: dict[str, object], work: Path, kernel_deb: Path | None,
           say: Callable[[str], None] = lambda _m: None) -> str:
    kernel: list[str] = r["kernel"]  # type: ignore[assignment]
    deb = kernel_deb if kernel_deb is not None else cached_deb(AptKernel(kernel[0], kernel[1]), say)
    kroot = work / "kernel"
    _run(["dpkg-deb", "-x", str(deb), str(kroot)])
    try:
        kver = next((kroot / "lib/modules").iterdir()).name
        next((kroot / "boot").glob("vmlinuz-*"))
    except (StopIteration, FileNotFoundError):
        raise ImageBuildError(f"{deb.name} holds no /boot/vmlinuz-* and /lib/modules/<version>: "
                              "is it a linux-image package?") from None
    modroot = kroot / "lib/modules" / kver

    root = work / "root"
    for d in ("bin", "sbin", "etc", "proc", "sys", "dev", "tmp", "root", "run", "lib64", "usr/bin"):
        (root / d).mkdir(parents=True, exist_ok=True)
    shutil.copy2("/bin/busybox", root / "bin/busybox")
    shutil.copy2(HERE / "init", root / "init")
    os.chmod(root / "init", 0o755)
    for rel in closure(modroot, MODULES + ON_DEMAND_MODULES, REQUIRED_MODULES):
        dst = root / "lib/modules" / kver / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(modroot / rel, dst)
    for extra in ("modules.order", "modules.builtin", "modules.builtin.modinfo"):
        if (modroot / extra).exists():
            shutil.copy2(modroot / extra, root / "lib/modules" / kver / extra)
    _run(["busybox", "depmod", "-b", str(root), kver])
    (root / "etc/vioconform-modules").write_text("\n".join(MODULES) + "\n")
    # What the guest says it is (guest/tools/facts.py reads it): there is no /etc/os-release here.
    (root / "etc/vioconform-image").write_text(f"RECIPE={recipe_hash(r)}\nKERNEL={kver}\n")
    for b in BINARIES:
        _copy(b, root)
    for lib in _lib_closure(BINARIES):
        _copy(lib, root)
    # built once, cached (40-110 s here)
    shutil.copy2(fio_static.ensure_static_fio(say).path, root / GUEST_FIO.lstrip("/"))
    (root / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    (root / "etc/group").write_text("root:x:0:\n")
    (root / "etc/shells").write_text("/bin/sh\n")

    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy2(next((kroot / "boot").glob("vmlinuz-*")), dest / "vmlinuz")
    files = _run_bytes(["find", ".", "-print0"], cwd=root)
    cpio = _run_bytes(["cpio", "--quiet", "-o", "-H", "newc", "-R", "0:0", "--null"], cwd=root, data=files)
    # zstd decompresses fastest of the kernel's formats, which matters under TCG.
    comp = _run_bytes(["zstd", "-q", "-6", "-c"], data=cpio)
    (dest / "initrd.img").write_bytes(comp)
    return kver


def check_image_cache(kernel_deb: Path | None = None, kernel: AptKernel | None = None) -> None:
    """Raise CacheNotWritable now, before any guest starts, if ensure_image would need to build
    an image and could not store it. An image already cached needs no write (a read-only cache
    that holds it is fine), but finding that out costs the recipe's apt queries: only asked
    when the cache is not writable."""
    try:
        writable_dir(cache_root(), "image cache")
    except CacheNotWritable:
        if not image_cached(kernel_deb, kernel):
            raise


def image_cached(kernel_deb: Path | None = None, kernel: AptKernel | None = None) -> bool:
    """Whether :func:`ensure_image` finds its image in the cache, with no build (this costs the
    recipe's apt queries when the cache does not remember them yet)."""
    return (cache_root() / recipe_hash(recipe(kernel_deb, kernel)) / "recipe.json").exists()


def ensure_image(log: Callable[[str], None] | None = None, kernel_deb: Path | None = None,
                 kernel: AptKernel | None = None) -> GuestImage:
    """Return the cached image for the current recipe (``recipe``'s kernel choice), building it first if needed."""
    say = log or (lambda _m: None)
    r = recipe(kernel_deb, kernel)
    h = recipe_hash(r)
    dest = cache_root() / h

    def build(staging: Path, work: Path) -> dict[str, object]:
        say(f"building guest image {h} (kernel {r['kernel'][1]}); cached afterwards in {dest}")  # type: ignore[index]
        return {**r, "kernel_version": _build(staging, r, work, kernel_deb, say)}

    entry = cached_or_built(dest, "image cache", build, say)
    if entry.build_seconds:
        say(f"guest image built in {entry.build_seconds:.1f} s")
    return GuestImage(dest / "vmlinuz", dest / "initrd.img", entry.recipe["kernel_version"], h, entry.build_seconds)


def main(argv: list[str] | None = None) -> int:
    """``python -m images.build [KERNEL_DEB] [--guest-kernel K]``: build (or find) the cached image,
    print its directory."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m images.build", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kernel_deb", nargs="?", type=Path, metavar="KERNEL_DEB",
                    help="a linux-image-*.deb to build the guest from (default: Debian's linux-image-amd64), "
                         "as --guest-kernel-deb does")
    ap.add_argument("--guest-kernel", metavar="PACKAGE-OR-VERSION",
                    help="a kernel apt has (6.12, 6.1.0-47, 6.12-cloud, linux-image-6.12.100+deb12-amd64), as the "
                         "suite's --guest-kernel does")
    args = ap.parse_args(argv)
    if args.kernel_deb and args.guest_kernel:
        ap.error("give KERNEL_DEB or --guest-kernel, not both")
    try:
        kernel = resolve(args.guest_kernel) if args.guest_kernel else None
        img = ensure_image(print, args.kernel_deb, kernel)
    except KernelUnknown as e:
        print(f"error: --guest-kernel: {e}", file=sys.stderr)
        return 2
    except (ImageBuildError, CacheNotWritable) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(img.directory)
    return 0


if __name__ == "__main__":
    sys.exit(main())
