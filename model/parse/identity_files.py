"""A disk's identity as the guest's kernel shows it: its sysfs files read as hex
(``guest/tools/identity.py``), and the SCSI VPD pages 0x80 (unit serial number) and 0x83 (device
identification) decoded (SPC-4, 7.8.6 and 7.8.15).

The guest tool prints one line per file it could read, the file under ``/sys/block/<disk>/`` and
its bytes as hex (``od -An -v -tx1``, spaces dropped)::

    size=323039373135320a
    device/vpd_pg80=0080000976696f632d64757430
    device/wwid=6e61612e35303030633530303135656137313030200a

Example::

    files = parse_identity_files(text, "sda identity")
    vpd_serial(files["device/vpd_pg80"])  # "vioc-dut0"
    vpd_naa(files["device/vpd_pg83"])     # "5000c50015ea7100"
"""

from __future__ import annotations

import re

_LINE = re.compile(r"([a-z0-9_/]+)=([0-9a-f]*)")
#: VPD page 0x83's designator type of an NAA name (the WWN), SPC-4 table 459.
NAA_TYPE = 3


class IdentityParseError(ValueError):
    """A line or page that is not what the guest tool prints; names the source and the line."""


def parse_identity_files(text: str, source: str) -> dict[str, bytes]:
    """The files the guest tool read, by their path under ``/sys/block/<disk>/``, as bytes."""
    out: dict[str, bytes] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        m = _LINE.fullmatch(line.strip())
        if m is None or len(m.group(2)) % 2:
            raise IdentityParseError(f"{source}, line {n}: {line!r} is not FILE=HEX")
        out[m.group(1)] = bytes.fromhex(m.group(2))
    return out


def text_of(raw: bytes) -> str:
    """A text sysfs file's value: its bytes less trailing newline, spaces and NULs."""
    return raw.decode("ascii", "replace").rstrip("\n\x00 ").strip()


def _page(raw: bytes, code: int, source: str) -> bytes:
    if len(raw) < 4 or raw[1] != code:
        raise IdentityParseError(f"{source}: not VPD page {code:#04x} (first bytes {raw[:4].hex() or 'none'})")
    length = int.from_bytes(raw[2:4], "big")
    return raw[4:4 + length]


def vpd_serial(raw: bytes, source: str = "vpd_pg80") -> str:
    """The product serial number of VPD page 0x80 (ASCII, its padding spaces dropped)."""
    return text_of(_page(raw, 0x80, source))


def vpd_naa(raw: bytes, source: str = "vpd_pg83") -> str | None:
    """The first NAA designator of VPD page 0x83 associated with the logical unit, as lower-case hex
    (the WWN: ``5000c50015ea7100``); None where the page has none."""
    body = _page(raw, 0x83, source)
    at = 0
    while at + 4 <= len(body):
        kind, association, length = body[at + 1] & 0x0F, (body[at + 1] >> 4) & 0x03, body[at + 3]
        if kind == NAA_TYPE and association == 0:
            return body[at + 4:at + 4 + length].hex()
        at += 4 + length
    return None


def wwid_naa(text: str) -> str | None:
    """The WWN in the kernel's ``device/wwid`` (``naa.5000c50015ea7100``), or None for another kind."""
    m = re.fullmatch(r"naa\.([0-9a-fA-F]+)", text.strip())
    return m.group(1).lower() if m else None
