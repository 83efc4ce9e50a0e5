"""images.pvh on synthetic kernels: a bzImage wrapped around a small ELF, with and without
Xen's PVH entry note, in each compression the module undoes. (Every embedded guest of tests/e2e
boots Debian's real kernel through it.)"""

from __future__ import annotations

import bz2
import gzip
import lzma
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from images.pvh import (
    NONE_SUFFIX,
    PVH_NAME,
    XEN_ELFNOTE_PHYS32_ENTRY,
    NoPvhKernel,
    elf_from_bzimage,
    has_pvh_entry,
    pvh_kernel,
)


def pad(b: bytes) -> bytes:
    return b + b"\x00" * (-len(b) % 4)


def note(name: bytes, n_type: int, desc: bytes) -> bytes:
    return struct.pack("<III", len(name), len(desc), n_type) + pad(name) + pad(desc)


def elf(notes: bytes) -> bytes:
    """An ELF64 header, one PT_NOTE program header, then the notes."""
    header = bytearray(64)
    header[0:4] = b"\x7fELF"
    header[4], header[5], header[6] = 2, 1, 1
    struct.pack_into("<Q", header, 0x20, 64)          # e_phoff
    struct.pack_into("<HH", header, 0x36, 56, 1)      # e_phentsize, e_phnum
    phdr = struct.pack("<IIQQQQQQ", 4, 4, 64 + 56, 0, 0, len(notes), len(notes), 4)
    return bytes(header) + phdr + notes


PVH_ELF = elf(note(b"Xen\x00", 5, b"xen-3.0\x00") + note(b"Xen\x00", XEN_ELFNOTE_PHYS32_ENTRY, b"\x00\x00\x00\x01"))
PLAIN_ELF = elf(note(b"GNU\x00", 3, b"\x01" * 20) + note(b"Xen\x00", 5, b"xen-3.0\x00"))


def bzimage(payload: bytes, version: int = 0x20F) -> bytes:
    setup = bytearray(1024)  # setup_sects = 1: the protected-mode code starts at 1024
    setup[0x1F1] = 1
    setup[0x202:0x206] = b"HdrS"
    struct.pack_into("<H", setup, 0x206, version)
    struct.pack_into("<II", setup, 0x248, 16, len(payload))
    return bytes(setup) + b"\x90" * 16 + payload + b"\x00" * 4


COMPRESSORS: dict[str, Callable[[bytes], bytes]] = {
    "xz": lambda b: lzma.compress(b, format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC32),
    "gzip": gzip.compress,
    "bzip2": bz2.compress,
    "lzma": lambda b: lzma.compress(b, format=lzma.FORMAT_ALONE),
}


@pytest.mark.parametrize("how", COMPRESSORS)
def test_the_elf_comes_out_of_the_bzimage(how: str) -> None:
    assert elf_from_bzimage(bzimage(COMPRESSORS[how](PVH_ELF))) == PVH_ELF


def test_the_pvh_note_is_found_only_where_it_is() -> None:
    assert has_pvh_entry(PVH_ELF) and not has_pvh_entry(PLAIN_ELF)


@pytest.mark.parametrize(("data", "said"), [
    (b"MZ" + b"\x00" * 2000, "not a bzImage"),
    (bzimage(b"xyz", version=0x206), "boot protocol 2.6 has no payload fields"),
    (bzimage(b"\x00\x01\x02\x03 not compressed"), "unknown compression of the kernel payload (magic 00010203)"),
    (bzimage(gzip.compress(b"no elf here")), "not an ELF file"),
    (bzimage(b"\xfd7zXZ\x00 truncated"), "did not decompress"),
])
def test_what_is_no_kernel_says_why(data: bytes, said: str) -> None:
    with pytest.raises(NoPvhKernel, match=said.replace("(", r"\(").replace(")", r"\)")):
        elf_from_bzimage(data)


def test_made_once_beside_the_bzimage(tmp_path: Path) -> None:
    vmlinuz = tmp_path / "vmlinuz"
    vmlinuz.write_bytes(bzimage(COMPRESSORS["xz"](PVH_ELF)))
    said: list[str] = []
    got = pvh_kernel(vmlinuz, said.append)
    assert got == tmp_path / PVH_NAME and got.read_bytes() == PVH_ELF
    vmlinuz.write_bytes(b"changed")  # the cached ELF is used; the bzImage is not read again
    assert pvh_kernel(vmlinuz, said.append) == got and len(said) == 1


def test_a_kernel_without_pvh_boots_its_bzimage_and_it_is_remembered(tmp_path: Path) -> None:
    vmlinuz = tmp_path / "vmlinuz"
    vmlinuz.write_bytes(bzimage(COMPRESSORS["xz"](PLAIN_ELF)))
    said: list[str] = []
    assert pvh_kernel(vmlinuz, said.append) is None
    assert "no PVH entry point (built without CONFIG_PVH)" in said[0]
    assert (tmp_path / (PVH_NAME + NONE_SUFFIX)).is_file() and not (tmp_path / PVH_NAME).exists()
    assert pvh_kernel(vmlinuz, said.append) is None and len(said) == 1
