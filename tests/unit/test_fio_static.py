"""The static fio's build, the parts that need no mirror and no compiler: the host's apt sources
turned into deb-src entries, the source version, the static-binary check. The build itself runs
for real in tests/e2e/test_fio_push.py (cached after the first time)."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import pytest

from images import fio_static
from images.build_error import ImageBuildError
from images.fio_static import deb_src_sources, host_apt_sources, is_static_elf, source_version

#: Debian 12's default /etc/apt/sources.list.d/debian.sources, the mirror's name replaced.
DEBIAN_SOURCES = """\
Types: deb
# a comment the copy drops
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""


def test_deb822_entries_become_deb_src_with_every_option_kept() -> None:
    deb822, one_line = deb_src_sources({"debian.sources": DEBIAN_SOURCES})
    assert one_line == ""
    assert deb822 == (
        "Types: deb-src\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\nComponents: main\n"
        "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n"
        "Types: deb-src\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\nComponents: main\n"
        "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n")


def test_switched_off_and_source_only_entries_are_left_out_and_inline_keys_kept() -> None:
    text = ("Types: deb-src\nURIs: http://a.example/debian\nSuites: bookworm\nComponents: main\n\n"
            "Types: deb\nEnabled: no\nURIs: http://b.example/debian\nSuites: bookworm\nComponents: main\n\n"
            "Types: deb deb-src\nURIs: http://c.example/debian\nSuites: bookworm\nComponents: main contrib\n"
            "Signed-By:\n -----BEGIN PGP PUBLIC KEY BLOCK-----\n .\n mQINBGP...\n -----END PGP PUBLIC KEY BLOCK-----\n")
    deb822, _ = deb_src_sources({"x.sources": text})
    assert deb822 == ("Types: deb-src\nURIs: http://c.example/debian\nSuites: bookworm\nComponents: main contrib\n"
                      "Signed-By:\n -----BEGIN PGP PUBLIC KEY BLOCK-----\n .\n mQINBGP...\n"
                      " -----END PGP PUBLIC KEY BLOCK-----\n")


def test_one_line_entries_become_deb_src() -> None:
    text = ("# deb http://commented.example/debian bookworm main\n"
            "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://a.example/debian bookworm main "
            "# trailing comment\n"
            "deb-src http://a.example/debian bookworm main\n"
            "\tdeb http://b.example/debian-security bookworm-security main contrib\n"
            "debian-is-not-deb http://x.example/ bookworm main\n")
    deb822, one_line = deb_src_sources({"sources.list": text})
    assert deb822 == ""
    assert one_line == ("deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://a.example/debian "
                        "bookworm main\n"
                        "deb-src http://b.example/debian-security bookworm-security main contrib\n")


def test_host_sources_are_the_files_apt_reads(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(DEBIAN_SOURCES)
    (tmp_path / "sources.list.d" / "other.list").write_text("deb http://o.example/ stable main\n")
    (tmp_path / "sources.list.d" / "off.list.disabled").write_text("deb http://off.example/ stable main\n")
    found = host_apt_sources(tmp_path)  # no sources.list at all: fine
    assert sorted(found) == ["debian.sources", "other.list"]
    deb822, one_line = deb_src_sources(found)
    assert deb822.count("Types: deb-src") == 2 and one_line == "deb-src http://o.example/ stable main\n"


def test_no_deb_entry_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ImageBuildError, match=r"^no `deb` entry in /etc/apt/sources.list or "
                                              r"/etc/apt/sources.list.d: apt has no mirror"):
        fio_static.PrivateApt(tmp_path / "apt", {"sources.list": "# nothing\n"})


def fake_apt(monkeypatch: pytest.MonkeyPatch, policy: str, show: str) -> None:
    def run(cmd: list[str], **_: object) -> str:
        return policy if cmd[1] == "policy" else show

    monkeypatch.setattr(fio_static, "_run", run)


def test_the_source_version_is_the_candidates_source(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_apt(monkeypatch, "fio:\n  Installed: 3.33-3\n  Candidate: 3.33-3\n", "Package: fio\nVersion: 3.33-3\n")
    assert source_version() == "3.33-3"
    # a binary-only rebuild (binNMU) names its source's version
    fake_apt(monkeypatch, "fio:\n  Candidate: 3.33-3+b1\n", "Package: fio\nSource: fio (3.33-3)\nVersion: 3.33-3+b1\n")
    assert source_version() == "3.33-3"
    fake_apt(monkeypatch, "fio:\n  Installed: (none)\n  Candidate: (none)\n", "")
    with pytest.raises(ImageBuildError, match=r"apt knows no fio package to build a static fio from: run "
                                              r"`apt-get update`"):
        source_version()


def elf(*segment_types: int) -> bytes:
    """A 64-bit little-endian ELF header with program headers of these types."""
    header = bytearray(64)
    header[:6] = b"\x7fELF\x02\x01"
    header[32:40] = struct.pack("<Q", 64)  # e_phoff
    header[54:58] = struct.pack("<HH", 56, len(segment_types))  # e_phentsize, e_phnum
    return bytes(header) + b"".join(struct.pack("<I", t) + bytes(52) for t in segment_types)


def test_a_static_binary_has_no_program_interpreter(tmp_path: Path) -> None:
    static, dynamic, text = tmp_path / "static", tmp_path / "dynamic", tmp_path / "text"
    static.write_bytes(elf(6, 1, 1, 4))  # PHDR, LOAD, LOAD, NOTE
    dynamic.write_bytes(elf(6, 3, 1, 1, 2))  # PHDR, INTERP, LOAD, LOAD, DYNAMIC
    text.write_text("#!/bin/sh\n")
    assert is_static_elf(static)
    assert not is_static_elf(dynamic) and not is_static_elf(text)
    assert not is_static_elf(Path(sys.executable).resolve())  # this Python: dynamically linked
