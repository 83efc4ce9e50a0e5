"""The test image's pure parts: MBR bytes, the apt mirror read from /etc/apt, the recipe hash,
the mount guard. (Building it needs root and a mirror: ``python -m bench.testimage``.)"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from bench import testimage
from bench.testimage import Partition, apt_mirror, mbr, mounts_under, recipe, recipe_hash
from images.build_error import ImageBuildError


def test_mbr_layout_on_a_small_disk_file(tmp_path: Path) -> None:
    boot = bytes(range(256)) * 2  # 512 bytes, like boot.img: only the first 440 may be used
    sector = mbr(boot, 0x1234ABCD, [Partition(2048, 32768, 0xEF), Partition(34816, 100000, 0x83, bootable=True)])
    assert len(sector) == 512
    disk = tmp_path / "disk.raw"
    disk.write_bytes(b"\xff" * 4096)
    testimage._write_at(disk, 0, sector)
    data = disk.read_bytes()
    assert data[:440] == boot[:440]
    assert struct.unpack_from("<I", data, 440)[0] == 0x1234ABCD
    assert data[510:512] == b"\x55\xaa"
    status, _, ptype, _, start, count = struct.unpack_from("<B3sB3sII", data, 446)
    assert (status, ptype, start, count) == (0, 0xEF, 2048, 32768)
    status, _, ptype, _, start, count = struct.unpack_from("<B3sB3sII", data, 462)
    assert (status, ptype, start, count) == (0x80, 0x83, 34816, 100000)
    assert data[478:510] == b"\0" * 32  # entries 3 and 4 empty
    assert data[512:] == b"\xff" * (4096 - 512)  # nothing written past sector 0


def test_mbr_rejects_what_does_not_fit() -> None:
    with pytest.raises(ValueError, match="440"):
        mbr(b"\0" * 100, 1, [])
    with pytest.raises(ValueError, match="LBA"):
        mbr(b"\0" * 512, 1, [Partition(0, 10, 0x83)])
    with pytest.raises(ValueError, match="at most 4"):
        mbr(b"\0" * 512, 1, [Partition(1 + i, 1, 0x83) for i in range(5)])


DEB822 = """\
Types: deb
# a comment inside the stanza
URIs: http://mirror.example/debian/
Suites: bookworm bookworm-updates
Components: main contrib
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main
"""


def test_mirror_from_deb822_sources(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "a-disabled.sources").write_text(
        "Enabled: no\nTypes: deb\nURIs: http://off.example/debian\nSuites: bookworm\nComponents: main\n")
    (tmp_path / "sources.list.d" / "debian.sources").write_text(DEB822)
    assert apt_mirror("bookworm", tmp_path) == "http://mirror.example/debian"


def test_mirror_from_one_line_sources_list(tmp_path: Path) -> None:
    (tmp_path / "sources.list").write_text(
        "# deb http://commented.example/debian bookworm main\n"
        "deb-src http://src.example/debian bookworm main\n"
        "deb [arch=amd64 signed-by=/k.gpg] http://one.example/debian bookworm main non-free\n")
    assert apt_mirror("bookworm", tmp_path) == "http://one.example/debian"


def test_no_mirror_for_the_suite_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "sources.list").write_text("deb http://one.example/debian trixie main\n")
    with pytest.raises(ImageBuildError, match="no apt source for Debian bookworm main"):
        apt_mirror("bookworm", tmp_path)


def test_recipe_hash_follows_tool_versions_and_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    base = recipe({"debootstrap": "1.0.128"})
    assert recipe_hash(base) == recipe_hash(recipe({"debootstrap": "1.0.128"}))
    assert recipe_hash(base) != recipe_hash(recipe({"debootstrap": "1.0.129"}))
    monkeypatch.setattr(testimage, "PACKAGES", (*testimage.PACKAGES, "fio"))
    assert recipe_hash(base) != recipe_hash(recipe({"debootstrap": "1.0.128"}))


def test_mounts_under_finds_only_the_tree_deepest_first(tmp_path: Path) -> None:
    root = tmp_path / "build"
    info = "\n".join([
        f"36 25 0:5 / {tmp_path}/build-other/proc rw - proc proc rw",
        f"37 25 0:5 / {root}/root/proc rw - proc proc rw",
        f"38 37 0:6 / {root}/root/proc/sys/fs/binfmt_misc rw - binfmt binfmt rw",
        f"39 25 0:7 / {root}/root/dev\\040x rw - tmpfs tmpfs rw",
        f"40 25 0:8 / {root} rw - tmpfs tmpfs rw",
    ])
    assert mounts_under(root, info) == [root / "root/proc/sys/fs/binfmt_misc", root / "root/proc",
                                        root / "root/dev x"]


def test_kernel_drivers_from_the_module_lists(tmp_path: Path) -> None:
    (tmp_path / "modules.dep").write_text(
        "kernel/drivers/block/virtio_blk.ko: kernel/drivers/virtio/virtio.ko\n"
        "kernel/drivers/scsi/virtio_scsi.ko.xz:\n")
    (tmp_path / "modules.builtin").write_text("kernel/drivers/nvme/host/nvme.ko\n")
    assert testimage.kernel_drivers(tmp_path, ["virtio_blk", "virtio_scsi", "nvme", "mptsas"]) == {
        "virtio_blk": "module", "virtio_scsi": "module", "nvme": "builtin", "mptsas": "absent"}


def test_builder_digest_ignores_the_module_docstring_and_comments() -> None:
    code = 'x = 1  # a comment\n'
    assert testimage.builder_digest('"""Built in 100 s."""\n' + code) == testimage.builder_digest(
        '"""Built in 250 s."""\n' + code.replace("# a comment", "# another"))
    assert testimage.builder_digest(code) != testimage.builder_digest("x = 2\n")
