"""The guest kernel as an ELF with a PVH entry point, so QEMU starts it without its decompressor.

A bzImage (what ``/boot/vmlinuz-*`` is) carries the kernel compressed (Debian: xz) behind a small
decompressor that runs inside the guest. Under TCG every instruction of it is emulated: with
Debian 12's 6.1 kernel that is most of the 2.6 s between QEMU's start and the kernel's first line.
The ELF inside the bzImage (``vmlinux``, stripped) carries a ``XEN_ELFNOTE_PHYS32_ENTRY`` note
when the kernel was built with ``CONFIG_PVH`` (Debian's are); QEMU (since 4.0) loads such an ELF
given as ``-kernel`` straight into guest memory and enters it in 32-bit mode. The host
decompresses it once, here, and the cache keeps it beside the bzImage.

Measured on this project's 2-core TCG machine, the embedded guest's kernel (6.1.0-56, xz), 3 boots
each, QEMU started by hand (``-kernel``, ``-initrd``, 2 vCPUs): QEMU start to the kernel's first line
2.56-2.62 s with the bzImage, 0.30-0.51 s with the PVH ELF; to ``Run /init`` 4.08-4.20 s against
1.71-2.08 s. KVM boots the same ELF the same way (the decompressor costs little there).

A kernel without the note, or compressed in a way this module cannot undo, boots from its bzImage:
the reason is logged and remembered beside it (``vmlinux.pvh.none``).
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import shutil
import struct
import subprocess
from collections.abc import Callable
from pathlib import Path

from images.cache import build_lock, replace_bytes

PVH_NAME = "vmlinux.pvh"
NONE_SUFFIX = ".none"

#: Xen's ELF note type for the 32-bit PVH entry point (xen/include/public/elfnote.h).
XEN_ELFNOTE_PHYS32_ENTRY = 18
ELF_MAGIC = b"\x7fELF"
PT_NOTE = 4


class NoPvhKernel(ValueError):
    """Why a bzImage gives no PVH ELF (one line)."""


def _decompress(payload: bytes) -> bytes:
    """The payload of a bzImage, decompressed by its magic bytes."""
    if payload.startswith(b"\xfd7zXZ\x00"):
        return lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(payload)
    if payload.startswith(b"\x1f\x8b"):
        return gzip.decompress(payload)
    if payload.startswith(b"BZh"):
        return bz2.decompress(payload)
    if payload.startswith(b"\x5d\x00\x00"):
        return lzma.LZMADecompressor(format=lzma.FORMAT_ALONE).decompress(payload)
    if payload.startswith(b"\x28\xb5\x2f\xfd"):
        if shutil.which("zstd") is None:
            raise NoPvhKernel("the kernel is zstd-compressed and the host has no zstd command")
        return subprocess.run(["zstd", "-dc"], input=payload, capture_output=True, check=True).stdout
    raise NoPvhKernel(f"unknown compression of the kernel payload (magic {payload[:4].hex()})")


def elf_from_bzimage(bzimage: bytes) -> bytes:
    """The ELF kernel inside a bzImage (boot protocol 2.08+: ``payload_offset`` and
    ``payload_length`` at 0x248 of the setup header, counted from the protected-mode code)."""
    if len(bzimage) < 0x250 or bzimage[0x202:0x206] != b"HdrS":
        raise NoPvhKernel("not a bzImage (no HdrS setup header)")
    (version,) = struct.unpack_from("<H", bzimage, 0x206)
    if version < 0x208:
        raise NoPvhKernel(f"boot protocol {version >> 8}.{version & 0xff} has no payload fields")
    setup_sects = bzimage[0x1F1] or 4
    offset, length = struct.unpack_from("<II", bzimage, 0x248)
    start = (setup_sects + 1) * 512 + offset
    payload = bzimage[start:start + length]
    if len(payload) != length or length == 0:
        raise NoPvhKernel("the bzImage's payload lies outside the file")
    try:
        elf = _decompress(payload)
    except (lzma.LZMAError, OSError, EOFError, subprocess.CalledProcessError) as e:
        raise NoPvhKernel(f"the kernel payload did not decompress: {e}") from None
    if not elf.startswith(ELF_MAGIC):
        raise NoPvhKernel("the kernel payload is not an ELF file")
    return elf


def has_pvh_entry(elf: bytes) -> bool:
    """Whether a 64-bit little-endian ELF carries Xen's PHYS32_ENTRY note in a PT_NOTE segment."""
    if elf[4] != 2 or elf[5] != 1:  # ELFCLASS64, ELFDATA2LSB
        return False
    phoff, = struct.unpack_from("<Q", elf, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", elf, 0x36)
    for i in range(phnum):
        p_type, _, p_offset, _, _, p_filesz = struct.unpack_from("<IIQQQQ", elf, phoff + i * phentsize)
        if p_type != PT_NOTE:
            continue
        pos, end = p_offset, p_offset + p_filesz
        while pos + 12 <= end:
            namesz, descsz, n_type = struct.unpack_from("<III", elf, pos)
            name = elf[pos + 12:pos + 12 + namesz].rstrip(b"\x00")
            if name == b"Xen" and n_type == XEN_ELFNOTE_PHYS32_ENTRY:
                return True
            pos += 12 + (namesz + 3) // 4 * 4 + (descsz + 3) // 4 * 4
    return False


def pvh_kernel(bzimage: Path, say: Callable[[str], None]) -> Path | None:
    """The PVH ELF of ``bzimage``, made once beside it; None where the bzImage must boot itself."""
    dest = bzimage.parent / PVH_NAME
    none = bzimage.parent / (PVH_NAME + NONE_SUFFIX)
    if dest.is_file():
        return dest
    if none.is_file():
        return None
    try:
        with build_lock(dest):
            if dest.is_file():
                return dest
            try:
                elf = elf_from_bzimage(bzimage.read_bytes())
                if not has_pvh_entry(elf):
                    raise NoPvhKernel("the kernel has no PVH entry point (built without CONFIG_PVH)")
            except NoPvhKernel as e:
                say(f"guest kernel {bzimage}: booting the bzImage itself: {e}")
                none.write_text(f"{e}\n")
                return None
            replace_bytes(dest, elf)
            say(f"guest kernel: its PVH ELF ({len(elf) // 2**20} MiB) made beside {bzimage}")
            return dest
    except OSError as e:  # a cache this process cannot write: boot the bzImage
        say(f"guest kernel {bzimage}: booting the bzImage itself (cannot write beside it: {e})")
        return None
