"""fio's verify blocks, as they lie on a disk, and fio's words about the ones that fail to verify.

With ``--verify=md5 --verify_interval=512`` every 512-byte sector fio writes starts with fio's
verify header (fio 3.33's ``struct verify_header``, verify.h, little-endian, 40 bytes), then the
MD5 of the rest of the sector (16 bytes), then the data: fio fills the write buffer with
``--verify_pattern`` and the headers overwrite the start of each sector. The header names the
sector: the byte ``offset`` fio wrote it at (on the device fio opened), the job (``thread``, fio's
job number from 1) and a CRC32C of the header itself.

    offset  size  field
    0       2     magic 0xacca
    2       2     verify type (2: md5)
    4       4     len: the verify interval, 512
    8       8     rand_seed (0 with a verify pattern)
    16      8     offset: where fio wrote this sector, in bytes
    24      4+4   time_sec, time_nsec: when the write was issued (fio's clock)
    32      2     thread: the job's number, 1 for the first job of the invocation
    34      2     numberio: the job's write count when it issued the write (16 bits)
    36      4     crc32: fio's CRC32C of bytes 0-35 (:func:`fio_crc32c`)
    40      16    MD5 of bytes 56-511
    56      456   the verify pattern, repeated

Later fio versions changed this header (3.38 has a version byte and a 64-bit numberio): the
layout here is checked against the static fio 3.33 the suite runs (tests/model/test_model_integrity.py
builds sectors with it).

Example::

    sector = parse_sector(image[0:512])
    sector.offset_bytes, sector.thread, sector.md5_ok  # (268435456, 2, True)
"""

from __future__ import annotations

import hashlib
import re
import struct
from dataclasses import dataclass

#: fio's FIO_HDR_MAGIC (verify.h)
FIO_HDR_MAGIC = 0xACCA
#: fio's VERIFY_MD5 (verify.h's enum: none, hdr-only, md5, ...)
VERIFY_MD5 = 2
SECTOR_BYTES = 512
_HEADER = struct.Struct("<HHIQQIIHHI")
HEADER_BYTES = _HEADER.size  # 40
MD5_BYTES = 16
#: Where the data (the verify pattern) starts in each sector: the header and the MD5 before it.
DATA_START = HEADER_BYTES + MD5_BYTES  # 56
_CRC_COVERS = HEADER_BYTES - 4  # the header up to its own crc32 field


def _crc32c_table() -> tuple[int, ...]:
    poly = 0x82F63B78  # Castagnoli, reflected
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        table.append(c)
    return tuple(table)


_CRC32C = _crc32c_table()


def fio_crc32c(data: bytes) -> int:
    """CRC32C (Castagnoli) as fio computes it (``crc32c_sw``, crc/crc32c.c, and its SSE4.2 twin): from
    ~0 and without the final inversion of the standard CRC32C, so ``fio_crc32c(b"123456789")`` is
    0x1CF96D7C, the standard check value 0xE3069283 inverted."""
    crc = 0xFFFFFFFF
    for b in data:
        crc = _CRC32C[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc


@dataclass(frozen=True)
class VerifySector:
    """One 512-byte sector read back, as fio's verify header and data say.

    ``magic``: the sector starts with fio's magic (else it is no fio sector: zeros, or other data);
    ``header_ok``: its header's CRC32C, type and length are whole; ``md5_ok``: its data matches the
    MD5 in its header. ``pattern``: its first 8 data bytes (the verify pattern fio repeated), and
    ``pattern_whole`` whether every data byte repeats them."""

    zeros: bool
    magic: bool
    header_ok: bool = False
    md5_ok: bool = False
    offset_bytes: int = 0
    thread: int = 0
    numberio: int = 0
    pattern: bytes = b""
    pattern_whole: bool = False

    @property
    def whole(self) -> bool:
        """A sector fio wrote, intact: header, MD5 and pattern all whole."""
        return self.header_ok and self.md5_ok and self.pattern_whole


def parse_sector(sector: bytes) -> VerifySector:
    """What one sector holds (``sector``: 512 bytes)."""
    if len(sector) != SECTOR_BYTES:
        raise ValueError(f"a sector is {SECTOR_BYTES} bytes, not {len(sector)}")
    if not any(sector):
        return VerifySector(zeros=True, magic=False)
    magic, vtype, length, _seed, offset, _s, _ns, thread, numberio, crc = _HEADER.unpack_from(sector)
    if magic != FIO_HDR_MAGIC:
        return VerifySector(zeros=False, magic=False)
    header_ok = crc == fio_crc32c(sector[:_CRC_COVERS]) and vtype == VERIFY_MD5 and length == SECTOR_BYTES
    md5_ok = hashlib.md5(sector[DATA_START:]).digest() == sector[HEADER_BYTES:DATA_START]
    pattern = sector[DATA_START:DATA_START + 8]
    whole = sector[DATA_START:] == pattern * ((SECTOR_BYTES - DATA_START) // 8)
    return VerifySector(False, True, header_ok, md5_ok, offset, thread, numberio, pattern, whole)


@dataclass(frozen=True)
class VerifyFailure:
    """One verify failure fio printed while reading back: where, and fio's own words."""

    offset_bytes: int
    what: str  # "bad magic header 0, wanted acca", "md5: verify failed", "bad header offset 9453568, wanted ..."
    file: str

    @property
    def kind(self) -> str:
        """What the failure says of the sector: "misplaced" (it names another offset), "missing"
        (no fio header: never written, or other data), "torn" (its header or data checksum is broken)."""
        if "bad header offset" in self.what:
            return "misplaced"
        if "bad magic header" in self.what:
            return "missing"
        return "torn"


#: fio 3.33's verify failures on stderr: "verify: bad magic header 0, wanted acca at file /dev/vdb offset
#: 9437184, length 512 (requested block: ...)" (verify_header) and "md5: verify failed at file /dev/vdb
#: offset 9445376, length 512 (requested block: ...)" (log_verify_failure).
_FAILURE = re.compile(r"^(?:verify: )?(?P<what>.+?) at file (?P<file>\S+) offset (?P<offset>\d+), length \d+")


def parse_verify_failures(stderr: str) -> tuple[VerifyFailure, ...]:
    """Every verify failure fio printed, in its order; the lines after each (the CRCs it expected
    and received) are not failures of their own."""
    out = []
    for line in stderr.splitlines():
        m = _FAILURE.match(line.strip())
        if m:
            out.append(VerifyFailure(int(m.group("offset")), m.group("what").strip(), m.group("file")))
    return tuple(out)
