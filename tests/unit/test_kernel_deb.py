"""--guest-kernel-deb is checked before any guest starts: real dpkg-deb on packages built here."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from images.build import check_kernel_deb
from images.build_error import ImageBuildError


def make_deb(tmp_path: Path, package: str, files: dict[str, str]) -> Path:
    """A real .deb (dpkg-deb --build) holding ``files`` (path -> content)."""
    root = tmp_path / package
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text(f"Package: {package}\nVersion: 1.0\nArchitecture: amd64\n"
                                             "Maintainer: nobody <nobody@invalid>\nDescription: test\n")
    for rel, content in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(content)
    deb = tmp_path / f"{package}_1.0_amd64.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", str(root), str(deb)], check=True,
                   capture_output=True)
    return deb


def test_a_kernel_package_passes(tmp_path: Path) -> None:
    deb = make_deb(tmp_path, "linux-image-9.9.9-test", {"boot/vmlinuz-9.9.9-test": "kernel",
                                                      "lib/modules/9.9.9-test/modules.dep": ""})
    assert check_kernel_deb(deb) == "linux-image-9.9.9-test"


@pytest.mark.parametrize(("package", "files", "said"), [
    ("busybox-static", {"bin/busybox": "x"}, "is the package 'busybox-static', not a kernel image (linux-image-*)"),
    ("linux-image-amd64", {"usr/share/doc/linux-image-amd64/README": "x"},
     "(linux-image-amd64) holds no /boot/vmlinuz-*; a meta package? give the linux-image-<version> package it depends on"),
])
def test_packages_that_are_no_kernel(tmp_path: Path, package: str, files: dict[str, str], said: str) -> None:
    deb = make_deb(tmp_path, package, files)
    with pytest.raises(ImageBuildError) as e:
        check_kernel_deb(deb)
    assert str(e.value) == f"{deb} {said}"


def test_files_that_are_no_package(tmp_path: Path) -> None:
    junk = tmp_path / "bad.deb"
    junk.write_text("junk\n")
    with pytest.raises(ImageBuildError) as e:
        check_kernel_deb(junk)
    assert str(e.value) == f"{junk} is not a Debian package (not a Debian format archive)"
    with pytest.raises(ImageBuildError, match="does not exist"):
        check_kernel_deb(tmp_path / "missing.deb")
