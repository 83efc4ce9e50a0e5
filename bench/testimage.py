"""The project's own small cloud-init test image: a Debian 12 disk that boots by its own
bootloader, for testing the "bring your own image" path end to end without internet. It is no part
of the suite: the end-to-end tests and the benchmarks (``bench.time_to_verdict --test-image``) use it,
and a user who wants to try ``--image`` without an image of their own.

It is built from Debian packages only (debootstrap of ``bookworm`` minbase plus systemd,
openssh-server, cloud-init, sudo and Debian's ``linux-image-cloud-amd64`` kernel) and cached
under ``$XDG_CACHE_HOME/vioconform/test-images/<recipe hash>/disk.qcow2``. Callers never write
the cached file: they boot a qcow2 overlay on it. The apt mirror is the host's own, read at
build time from ``/etc/apt/sources.list.d/*.sources`` or ``/etc/apt/sources.list``. Building
needs root (debootstrap and the chroot that makes the initramfs); using a cached image does not.

The disk (raw, then converted to qcow2), made without loop devices or mounts:

- sector 0: GRUB's ``boot.img`` (its first 440 bytes) and an MBR partition table;
- sectors 1-2047: GRUB's i386-pc ``core.img`` (``boot.img`` loads it from sector 1);
- partition 1 (1 MiB, 16 MiB, type EF): the EFI system partition, a FAT file system made with
  ``mkfs.vfat`` on a file, GRUB's ``EFI/BOOT/BOOTX64.EFI`` copied in with ``mcopy``;
- partition 2 (to the end, type 83): the ext4 root, made in place by ``mke2fs -d ROOT -E offset=``.

Both GRUB images carry every module they need and a small built-in configuration that finds
the root file system by UUID; ``/boot/grub/grub.cfg`` on it boots ``/vmlinuz`` with
``root=PARTUUID=<disk signature>-02`` and the console on ``ttyS0`` at 115200 baud. So one disk
boots under SeaBIOS (libvirt's default) and under OVMF (Debian's ``ovmf`` package).

Inside: cloud-init reads only NoCloud, VMware or None (``datasource_list``), runs a trimmed
module list in its first two stages only, and its fallback network config (DHCP on the first
NIC) is rendered for systemd-networkd; a catch-all DHCP ``.network`` file does the same without
it. Units that only cost boot time under emulation are masked (networkd-wait-online,
apt/e2scrub/fstrim timers, logind, cloud-init's config and final stages; see MASKED_UNITS). There is no fio (the suite pushes its own) and no SSH host
key (cloud-init installs the one the suite chose).

The kernel (Debian ``cloud-amd64`` flavour, 6.1) has, of the storage drivers for the
controllers QEMU emulates: ``virtio_blk`` and ``virtio_scsi`` (modules), ``nvme`` (built in);
it lacks ``ahci``, ``sym53c8xx``, ``megaraid_sas`` and ``mptsas``. The suite uses that: a
controller whose driver the image lacks is a skip naming the module.

Its build takes minutes under TCG (debootstrap is most of it) and its boot to SSH tens of seconds
(cloud-init's first stage, mostly Python importing cloud-init, the largest part): the figures, and
where a boot's time goes, are on docs/benchmarks.md ("Your own image and the test image"). Under
libvirt with OVMF, Linux finds no device behind a seed CD-ROM on the IDE secondary channel (hdc),
though plain QEMU with OVMF and the same channel does; a seed on virtio-blk (read-only) works under
BIOS and UEFI alike.

Build by hand: ``python -m bench.testimage`` prints the image path, build time and size.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from images.build_error import ImageBuildError
from images.cache import CacheNotWritable, cache_dir, cached_or_built

#: The Debian release the image is made of.
SUITE = "bookworm"
#: Packages on top of debootstrap's minbase variant (which has no init system and no kernel).
PACKAGES = (
    "systemd-sysv", "udev", "kmod", "dbus", "iproute2",
    # debootstrap does not resolve virtual packages: python3-cryptography (cloud-init's) needs
    # python3-cffi-backend-api-min/max, which python3-cffi-backend provides.
    "python3-cffi-backend",
    "openssh-server", "cloud-init", "sudo",
    "e2fsprogs", "fdisk", "initramfs-tools", "linux-image-cloud-amd64",
)
#: Host packages whose programs shape the image (their versions are part of the recipe).
HOST_TOOLS = ("debootstrap", "grub-pc-bin", "grub-efi-amd64-bin", "e2fsprogs", "dosfstools",
              "mtools", "qemu-utils")

#: Disk geometry, in 512-byte sectors. Partition 1 starts at 1 MiB (core.img fills the gap).
SECTOR = 512
ESP_START = 2048
ESP_SECTORS = 16 * 2048  # 16 MiB: BOOTX64.EFI is 0.65 MB
ROOT_START = ESP_START + ESP_SECTORS
DISK_BYTES = 2 * 1024**3  # virtual size; qcow2 stores only what is written

#: Modules built into the GRUB images: no module is read from the disk.
GRUB_COMMON = ("part_msdos", "ext2", "fat", "linux", "normal", "configfile", "search",
               "search_fs_uuid", "echo", "test", "serial", "terminal", "gzio")
GRUB_BIOS = ("biosdisk", *GRUB_COMMON)
GRUB_EFI = ("efi_gop", *GRUB_COMMON)

#: Drivers in the initramfs: what finds the root disk and the cloud-init seed (virtio, SCSI,
#: NVMe, IDE CD-ROM). The rest load from the root file system.
INITRAMFS_MODULES = ("virtio_pci", "virtio_blk", "virtio_scsi", "sd_mod", "nvme", "ata_piix", "sr_mod", "ext4")

#: The storage drivers for the controllers QEMU emulates; the build records which the kernel has.
STORAGE_DRIVERS = ("virtio_blk", "virtio_scsi", "nvme", "ahci", "sym53c8xx", "megaraid_sas", "mptsas")

#: Kernel command line. console=ttyS0 is where the suite reads the boot. no_timer_check: no
#: IO-APIC timer check, whose few ticks came too late on a loaded TCG host (a panic; see
#: images/build.py's KERNEL_ARGS).
KERNEL_ARGS = "ro console=ttyS0,115200 net.ifnames=0 no_timer_check"

#: Units masked in the image: each only costs boot time in a test guest.
MASKED_UNITS = (
    "systemd-networkd-wait-online.service", "apt-daily.timer", "apt-daily-upgrade.timer",
    "e2scrub_all.timer", "e2scrub_reap.service", "fstrim.timer", "dpkg-db-backup.timer",
    "getty@tty1.service", "systemd-pstore.service", "systemd-logind.service",
    "systemd-update-utmp.service", "systemd-update-utmp-runlevel.service",
    # kernel file systems and modules no test uses
    "dev-hugepages.mount", "dev-mqueue.mount", "sys-kernel-debug.mount", "sys-kernel-tracing.mount",
    "sys-fs-fuse-connections.mount", "sys-kernel-config.mount", "proc-sys-fs-binfmt_misc.automount",
    "systemd-binfmt.service", "modprobe@drm.service", "modprobe@fuse.service", "modprobe@loop.service",
    "modprobe@dm_mod.service", "modprobe@configfs.service",
    # cloud-init's config and final stages: the suite's seed needs only the first two (the user, its
    # key, the host key). Each stage is mostly Python importing cloud-init: 3.3 s and 3.1 s of guest
    # CPU under TCG (systemd-analyze blame), spent beside the suite's first rule after SSH is up.
    "cloud-config.service", "cloud-final.service",
)
#: systemd generators with nothing to do here (no encrypted, verity or GPT-discovered volumes,
#: no hibernation, no SysV-only services). Each is a process start, about 0.3-0.5 s under TCG.
MASKED_GENERATORS = (
    "systemd-cryptsetup-generator", "systemd-integritysetup-generator", "systemd-veritysetup-generator",
    "systemd-hibernate-resume-generator", "systemd-gpt-auto-generator", "systemd-system-update-generator",
    "systemd-debug-generator", "systemd-rc-local-generator", "systemd-sysv-generator",
)
#: Modules udev would load for QEMU's default devices that a test guest has no use for.
BLACKLISTED_MODULES = ("kvm", "kvm_amd", "kvm_intel", "irqbypass", "pcspkr", "serio_raw", "evdev", "joydev",
                       "floppy", "powernow_k8", "qemu_fw_cfg", "psmouse", "bochs", "drm")

#: cloud-init settings written to /etc/cloud/cloud.cfg.d/. Only NoCloud (the suite's seed ISO)
#: and VMware (guestinfo on vSphere) are probed; the module list keeps what a test guest uses.
CLOUD_CFG = {
    "datasource_list": ["NoCloud", "VMware", "None"],
    # /etc/hosts names the guest (from meta-data's local-hostname): sudo resolves it on every call.
    "manage_etc_hosts": True,
    "cloud_init_modules": ["seed_random", "bootcmd", "write_files", "set_hostname", "update_hostname",
                           "update_etc_hosts", "users_groups", "ssh"],
    # Where no seed gives ssh_keys (the host-key test), cloud-init makes the host keys itself: one
    # type, not its default rsa, ecdsa and ed25519, whose RSA key takes seconds to generate under TCG.
    "ssh_genkeytypes": ["ed25519"],
}

#: cloud-init's generator runs ds-identify before udev has seen every disk. Under libvirt with
#: OVMF the seed CD-ROM may not be there yet: ds-identify then finds no datasource and turns
#: cloud-init off for that boot (no SSH, no cloud-init line on the console). With notfound=enabled
#: cloud-init still runs and its own NoCloud search, seconds later, finds the seed.
DS_IDENTIFY_CFG = "policy: search,found=all,maybe=all,notfound=enabled\n"

#: systemd-networkd: DHCP on any Ethernet NIC (QEMU user networking answers it).
DHCP_NETWORK = "[Match]\nName=eth* en*\n\n[Network]\nDHCP=ipv4\nLinkLocalAddressing=no\n"


@dataclass(frozen=True)
class TestImage:
    """A cached test image. ``path`` is a qcow2 file to put an overlay on, never to write."""

    __test__ = False  # not a pytest test class despite the name

    path: Path
    kernel_version: str
    recipe_hash: str
    build_seconds: float  # 0.0 when it came from the cache
    #: (driver, "module" | "builtin" | "absent") for each of STORAGE_DRIVERS, read from the
    #: image's kernel (modules.dep, modules.builtin) when it was built
    storage_drivers: tuple[tuple[str, str], ...] = ()

    def driver(self, name: str) -> str:
        """How the image's kernel has storage driver ``name``: module, builtin or absent."""
        return dict(self.storage_drivers).get(name, "unknown")


def cache_root() -> Path:
    return cache_dir() / "test-images"


# -- apt mirror -----------------------------------------------------------------------------------

def _deb822_stanzas(text: str) -> Iterable[dict[str, str]]:
    fields: dict[str, str] = {}
    key = ""
    for line in [*text.splitlines(), ""]:
        if line.startswith("#"):
            continue
        if not line.strip():
            if fields:
                yield fields
            fields, key = {}, ""
        elif line[0] in " \t" and key:
            fields[key] += " " + line.strip()
        elif ":" in line:
            key, _, value = line.partition(":")
            key = key.strip().lower()
            fields[key] = value.strip()


def _mirror_in(text: str, deb822: bool, suite: str) -> str | None:
    if deb822:
        for f in _deb822_stanzas(text):
            if f.get("enabled", "yes").lower() == "no":
                continue
            if ("deb" in f.get("types", "").split() and suite in f.get("suites", "").split()
                    and "main" in f.get("components", "").split() and f.get("uris")):
                return f["uris"].split()[0]
        return None
    for line in text.splitlines():
        words = re.sub(r"\[[^]]*\]", " ", line.split("#", 1)[0]).split()
        if len(words) >= 4 and words[0] == "deb" and words[2] == suite and "main" in words[3:]:
            return words[1]
    return None


def apt_mirror(suite: str = SUITE, etc_apt: Path = Path("/etc/apt")) -> str:
    """The URI of the host's apt source for ``suite`` main (the first one), from
    ``sources.list.d/*.sources`` (deb822), ``sources.list.d/*.list`` or ``sources.list``."""
    candidates: list[tuple[Path, bool]] = []
    d = etc_apt / "sources.list.d"
    if d.is_dir():
        candidates += [(p, True) for p in sorted(d.glob("*.sources"))]
        candidates += [(p, False) for p in sorted(d.glob("*.list"))]
    candidates.append((etc_apt / "sources.list", False))
    for path, deb822 in candidates:
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        uri = _mirror_in(text, deb822, suite)
        if uri:
            return uri.rstrip("/")
    raise ImageBuildError(f"no apt source for Debian {suite} main in {etc_apt}/sources.list(.d); "
                          f"add one (Types: deb, Suites: {suite}, Components: main)")


# -- recipe ---------------------------------------------------------------------------------------

def _run(cmd: list[str], cwd: Path | None = None) -> str:
    try:
        res = subprocess.run(cmd, cwd=cwd, check=True, capture_output=True)
    except FileNotFoundError as e:
        raise ImageBuildError(f"{cmd[0]} is not installed; run scripts/setup-host.sh --tests") from e
    except subprocess.CalledProcessError as e:
        said = (e.stderr or e.stdout).decode(errors="replace").strip()[-800:]
        raise ImageBuildError(f"`{' '.join(cmd)}` failed ({e.returncode}): {said}") from e
    return res.stdout.decode(errors="replace")


def _host_versions() -> dict[str, str]:
    out = {}
    for pkg in HOST_TOOLS:
        try:
            out[pkg] = _run(["dpkg-query", "-W", "-f=${Version}", pkg]).strip()
        except ImageBuildError:
            raise ImageBuildError(f"Debian package {pkg} is missing; run scripts/setup-host.sh --tests") from None
    return out


def builder_digest(source: str) -> str:
    """SHA-256 of this builder's code: its syntax tree without the module docstring, so comments
    and the measured numbers written in the docstring do not rebuild the image."""
    tree = ast.parse(source)
    first = tree.body[0] if tree.body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        tree.body = tree.body[1:]
    return hashlib.sha256(ast.dump(tree).encode()).hexdigest()


def recipe(host_versions: dict[str, str] | None = None) -> dict[str, object]:
    """Everything the image depends on that is known without a network: its hash names the
    cache entry. The mirror's package versions are not in it (a point release does not
    rebuild the image: remove the cache entry to take one)."""
    return {
        "suite": SUITE,
        "packages": sorted(PACKAGES),
        "host_tools": host_versions if host_versions is not None else _host_versions(),
        "builder_sha256": builder_digest(Path(__file__).read_text()),
    }


def recipe_hash(r: dict[str, object]) -> str:
    return hashlib.sha256(json.dumps(r, sort_keys=True).encode()).hexdigest()[:16]


# -- disk layout ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Partition:
    start: int  # first sector
    sectors: int
    type_id: int  # MBR partition type: 0xEF EFI system, 0x83 Linux
    bootable: bool = False


def mbr(boot_code: bytes, disk_signature: int, partitions: list[Partition]) -> bytes:
    """Sector 0 of a disk: the first 440 bytes of ``boot_code`` (GRUB's boot.img), the disk
    signature, up to four primary partitions and the 55 AA mark. Partitions are addressed by
    LBA only; their CHS fields hold the "beyond CHS" value FE FF FF."""
    if len(boot_code) < 440:
        raise ValueError(f"boot code is {len(boot_code)} bytes, need at least 440")
    if len(partitions) > 4:
        raise ValueError("an MBR holds at most 4 primary partitions")
    table = b""
    for p in partitions:
        if p.start <= 0 or p.sectors <= 0 or p.start + p.sectors > 2**32:
            raise ValueError(f"partition {p} does not fit an MBR (LBA 1 .. 2^32)")
        chs = b"\xfe\xff\xff"
        table += struct.pack("<B3sB3sII", 0x80 if p.bootable else 0, chs, p.type_id, chs, p.start, p.sectors)
    table = table.ljust(64, b"\0")
    return boot_code[:440] + struct.pack("<IH", disk_signature, 0) + table + b"\x55\xaa"


def _write_at(path: Path, offset: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def _copy_into(path: Path, offset: int, src: Path) -> None:
    with open(src, "rb") as s, open(path, "r+b") as f:
        f.seek(offset)
        shutil.copyfileobj(s, f, 1 << 20)


# -- build ----------------------------------------------------------------------------------------

def mounts_under(path: Path, mountinfo: str | None = None) -> list[Path]:
    """Mount points strictly inside ``path``, deepest first (from /proc/self/mountinfo)."""
    text = mountinfo if mountinfo is not None else Path("/proc/self/mountinfo").read_text()
    prefix = str(path.resolve()).rstrip("/") + "/"
    found = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) > 4:
            point = re.sub(r"\\(\d{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
            if point.startswith(prefix):
                found.append(Path(point))
    return sorted(found, key=lambda p: len(p.parts), reverse=True)


def unmount_under(path: Path) -> None:
    """Detach what a killed debootstrap left mounted in the build tree (its /proc, /sys or
    /dev binds), so deleting the tree cannot reach the host's files."""
    for point in mounts_under(path):
        subprocess.run(["umount", "-l", str(point)], check=False, capture_output=True)


def _chroot(root: Path, *cmd: str) -> str:
    return _run(["chroot", str(root), *cmd])


def _configure_root(root: Path, root_uuid: str, partuuid: str) -> str:
    """Everything after debootstrap, on the unpacked tree. Returns the kernel version."""
    kvers = sorted(p.name for p in (root / "lib/modules").iterdir())
    if len(kvers) != 1:
        raise ImageBuildError(f"expected one kernel in the image, found {kvers or 'none'}")
    kver = kvers[0]
    # initramfs: only what finds the root disk (smaller is faster to load and unpack under TCG).
    (root / "etc/initramfs-tools/conf.d/vioconform").write_text("MODULES=list\nCOMPRESS=gzip\n")
    # The CD-ROM drivers too: cloud-init's generator looks for the NoCloud seed (an ISO labelled
    # cidata) before udev loads the rest, so a seed on an IDE CD-ROM must be visible from here.
    (root / "etc/initramfs-tools/modules").write_text("\n".join(INITRAMFS_MODULES) + "\n")
    _chroot(root, "update-initramfs", "-u", "-k", kver)

    (root / "etc/fstab").write_text(f"UUID={root_uuid} / ext4 defaults,noatime,errors=remount-ro 0 0\n")
    (root / "etc/hostname").write_text("localhost\n")
    (root / "etc/hosts").write_text("127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n")
    (root / "etc/machine-id").write_text("")  # each guest makes its own on first boot
    (root / "var/lib/dbus/machine-id").unlink(missing_ok=True)
    for key in (root / "etc/ssh").glob("ssh_host_*"):
        key.unlink()  # cloud-init installs the host key the suite chose
    (root / "etc/cloud/cloud.cfg.d/90_vioconform.cfg").write_text(json.dumps(CLOUD_CFG, indent=2) + "\n")
    (root / "etc/cloud/ds-identify.cfg").write_text(DS_IDENTIFY_CFG)
    (root / "etc/systemd/network/80-vioconform-dhcp.network").write_text(DHCP_NETWORK)
    wants = root / "etc/systemd/system/multi-user.target.wants"
    wants.mkdir(parents=True, exist_ok=True)
    link = wants / "systemd-networkd.service"
    if not link.is_symlink():
        link.symlink_to("/lib/systemd/system/systemd-networkd.service")
    (root / "etc/modprobe.d/vioconform.conf").write_text("".join(f"blacklist {m}\n" for m in BLACKLISTED_MODULES))
    journald = root / "etc/systemd/journald.conf.d"
    journald.mkdir(parents=True, exist_ok=True)
    (journald / "vioconform.conf").write_text("[Journal]\nStorage=volatile\n")  # no flush to disk at boot
    generators = root / "etc/systemd/system-generators"
    generators.mkdir(parents=True, exist_ok=True)
    for name in MASKED_GENERATORS:
        (generators / name).unlink(missing_ok=True)
        (generators / name).symlink_to("/dev/null")
    for unit in MASKED_UNITS:
        m = root / "etc/systemd/system" / unit
        m.unlink(missing_ok=True)
        m.symlink_to("/dev/null")
    grub = root / "boot/grub"
    grub.mkdir(parents=True, exist_ok=True)
    (grub / "grub.cfg").write_text(
        "# vioconform test image: boot straight away, console on the first serial port\n"
        f"echo 'vioconform test image: loading Linux {kver}'\n"
        f"linux /vmlinuz root=PARTUUID={partuuid} {KERNEL_ARGS}\n"
        "initrd /initrd.img\n"
        "boot\n")
    # No network inside the guest and nothing to install: drop apt's state, docs and caches.
    (root / "etc/apt/sources.list").write_text("")
    for pattern in ("var/lib/apt/lists/*", "var/cache/apt/*", "var/cache/debconf/*-old", "usr/share/doc/*",
                    "usr/share/man/*", "usr/share/info/*", "var/log/*.log", "var/log/apt/*",
                    "usr/share/locale/*", "var/cache/man/*", "usr/share/lintian/*", "tmp/*"):
        for p in root.glob(pattern):
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            else:
                p.unlink()
    # Python's byte code must be there: without it every cloud-init stage compiles its imports
    # first, 55 s of the first stage under TCG. Debian's packages compile
    # theirs at install; this makes sure nothing is missing (it skips what is up to date).
    _chroot(root, "python3", "-m", "compileall", "-q", "-j", "2", "/usr/lib/python3", "/usr/lib/python3.11")
    return kver


def kernel_drivers(modroot: Path, names: Iterable[str]) -> dict[str, str]:
    """For each module name: "module" (in modules.dep), "builtin" (in modules.builtin) or "absent"."""
    def listed(f: str) -> set[str]:
        p = modroot / f
        text = p.read_text() if p.exists() else ""
        return {Path(line.split(":", 1)[0]).name.split(".ko")[0].replace("-", "_")
                for line in text.splitlines() if line.strip()}
    mods, builtin = listed("modules.dep"), listed("modules.builtin")
    return {n: "module" if n in mods else "builtin" if n in builtin else "absent" for n in names}


def _grub_images(work: Path, root_uuid: str) -> tuple[Path, Path]:
    early = work / "early.cfg"
    early.write_text(
        "serial --unit=0 --speed=115200\nterminal_input serial console\nterminal_output serial console\n"
        f"search --no-floppy --fs-uuid --set=root {root_uuid}\nset prefix=($root)/boot/grub\n")
    core, efi = work / "core.img", work / "BOOTX64.EFI"
    _run(["grub-mkimage", "-O", "i386-pc", "-o", str(core), "-c", str(early), "-p", "/boot/grub", *GRUB_BIOS])
    _run(["grub-mkimage", "-O", "x86_64-efi", "-o", str(efi), "-c", str(early), "-p", "/boot/grub", *GRUB_EFI])
    if core.stat().st_size > (ESP_START - 1) * SECTOR:
        raise ImageBuildError(f"GRUB core.img is {core.stat().st_size} bytes, more than the "
                              f"{(ESP_START - 1) * SECTOR} before partition 1")
    return core, efi


def _esp(work: Path, efi: Path) -> Path:
    esp = work / "esp.img"
    _run(["mkfs.vfat", "-C", "-n", "ESP", str(esp), str(ESP_SECTORS * SECTOR // 1024)])
    _run(["mmd", "-i", str(esp), "::/EFI", "::/EFI/BOOT"])
    _run(["mcopy", "-i", str(esp), str(efi), "::/EFI/BOOT/BOOTX64.EFI"])
    return esp


def _build(dest: Path, work: Path, say: Callable[[str], None]) -> str:
    if os.geteuid() != 0:
        raise ImageBuildError("building the test image needs root (debootstrap, chroot); "
                              "run `python -m bench.testimage` as root once, then it is cached")
    mirror = apt_mirror()
    root = work / "root"
    say(f"debootstrap {SUITE} ({len(PACKAGES)} packages on minbase)")
    _run(["debootstrap", "--variant=minbase", "--components=main", f"--include={','.join(PACKAGES)}",
          SUITE, str(root), mirror])
    return _make_disk(root, dest, work, say)


def _make_disk(root: Path, dest: Path, work: Path, say: Callable[[str], None]) -> str:
    """Configure the debootstrapped tree ``root`` and make ``dest/disk.qcow2`` of it."""
    root_uuid = str(uuid.uuid4())
    signature = int.from_bytes(os.urandom(4), "little") or 1
    partuuid = f"{signature:08x}-02"
    say("configuring the root file system and the initramfs")
    kver = _configure_root(root, root_uuid, partuuid)
    drivers = kernel_drivers(root / "lib/modules" / kver, STORAGE_DRIVERS)
    say("kernel " + kver + ": " + ", ".join(f"{n} {how}" for n, how in drivers.items()))
    dest.mkdir(parents=True)
    (dest / "drivers.json").write_text(json.dumps(drivers, indent=2) + "\n")

    say("making the disk: GRUB (BIOS and UEFI), EFI system partition, ext4 root")
    core, efi = _grub_images(work, root_uuid)
    esp = _esp(work, efi)
    raw = work / "disk.raw"
    with open(raw, "wb") as f:
        f.truncate(DISK_BYTES)
    root_sectors = DISK_BYTES // SECTOR - ROOT_START
    boot_img = Path("/usr/lib/grub/i386-pc/boot.img").read_bytes()
    # boot.img loads core.img from the LBA at offset 0x5C; stock it is 1, where core.img goes.
    boot_img = boot_img[:0x5C] + struct.pack("<Q", 1) + boot_img[0x64:]
    _write_at(raw, 0, mbr(boot_img, signature, [
        Partition(ESP_START, ESP_SECTORS, 0xEF), Partition(ROOT_START, root_sectors, 0x83, bootable=True)]))
    _copy_into(raw, SECTOR, core)
    _copy_into(raw, ESP_START * SECTOR, esp)
    _run(["mke2fs", "-q", "-F", "-t", "ext4", "-L", "root", "-U", root_uuid, "-d", str(root),
          "-E", f"offset={ROOT_START * SECTOR}", str(raw), f"{root_sectors // 2}k"])
    # zstd-compressed clusters: a third of the size on disk for 2.4 s more build time, and no slower
    # boot (the file is only ever read, as an overlay's backing file).
    _run(["qemu-img", "convert", "-c", "-o", "compression_type=zstd", "-f", "raw", "-O", "qcow2",
          str(raw), str(dest / "disk.qcow2")])
    return kver


def ensure_test_image(log: Callable[[str], None] | None = None) -> TestImage:
    """Return the cached test image for the current recipe, building it first if needed."""
    say = log or (lambda _m: None)
    r = recipe()
    h = recipe_hash(r)
    dest = cache_root() / h

    def build(staging: Path, work: Path) -> dict[str, object]:
        say(f"building test image {h}; cached afterwards in {dest}")
        try:
            kver = _build(staging, work, say)
        finally:
            unmount_under(work)  # before the tree is deleted: never delete through a mount
        os.chmod(staging / "disk.qcow2", 0o444)
        drivers = json.loads((staging / "drivers.json").read_text())
        return {**r, "kernel_version": kver, "storage_drivers": drivers}

    entry = cached_or_built(dest, "test image cache", build, say)
    if entry.build_seconds:
        say(f"test image built in {entry.build_seconds:.1f} s")
    return TestImage(dest / "disk.qcow2", entry.recipe["kernel_version"], h, entry.build_seconds,
                     tuple(entry.recipe.get("storage_drivers", {}).items()))


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.testimage``: build (or find) the cached test image; its path is the last line."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m bench.testimage", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="Progress goes to stderr; stdout's last line is the image's path.")
    ap.parse_args(argv)
    try:
        img = ensure_test_image(lambda m: print(m, file=sys.stderr))
    except (ImageBuildError, CacheNotWritable) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    size = img.path.stat().st_size / 1e6
    print(f"{img.path}\nkernel {img.kernel_version}, built in {img.build_seconds:.1f} s, {size:.0f} MB on disk",
          file=sys.stderr)
    print(img.path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
