"""--guest-kernel: a kernel apt has, named as a user would, resolved against what apt had on a real
Debian 12 (tests/data/apt), and a name apt does not have refused at once with what it has."""

from __future__ import annotations

from pathlib import Path

import pytest

from images.kernels import AptKernel, KernelUnknown, candidates, choose
from tests.unit.suite_options import errors, run_suite_options

pytest_plugins = ["pytester"]

DATA = Path(__file__).resolve().parents[1] / "data" / "apt"
KERNELS = [AptKernel(*line.split()) for line in (DATA / "kernel-candidates.txt").read_text().splitlines()]
#: what `apt-cache depends` said of the meta packages on the same machine
METAS = {"linux-image-amd64": "linux-image-6.1.0-57-amd64", "linux-image-cloud-amd64": "linux-image-6.1.0-57-cloud-amd64",
         "linux-image-6.12-amd64": "linux-image-6.12.118+deb12-amd64",
         "linux-image-6.12-cloud-amd64": "linux-image-6.12.118+deb12-cloud-amd64"}


def test_apt_policy_gives_each_packages_candidate_and_none_for_an_unknown_one() -> None:
    assert candidates((DATA / "policy-kernels.txt").read_text()) == {
        "linux-image-6.1.0-47-amd64": "6.1.170-3", "linux-image-6.12.100+deb12-cloud-amd64": "6.12.100-1~deb12u1",
        "linux-image-6.1.0-47-amd64-unsigned": "6.1.170-3"}


@pytest.mark.parametrize(("text", "package"), [
    ("6.12", "linux-image-6.12.118+deb12-amd64"),  # a prefix: the newest it matches
    ("6.1", "linux-image-6.1.0-57-amd64"),  # not 6.12: "6.1" ends a number in 6.1.0-57 only
    ("6.1.0-47", "linux-image-6.1.0-47-amd64"),
    ("6.1.0-50", "linux-image-6.1.0-50-amd64"),
    ("6.1.192", "linux-image-6.1.0-57-amd64"),  # a package version (6.1.0-55, -56, -57 are 6.1.192-1, -2, -3)
    ("6.1.176", "linux-image-6.1.0-50-amd64"),
    ("6.12.100", "linux-image-6.12.100+deb12-amd64"),
    ("6.12-cloud", "linux-image-6.12.118+deb12-cloud-amd64"),
    ("6.1.0-47-cloud", "linux-image-6.1.0-47-cloud-amd64"),
    ("6.1.0-47-cloud-amd64", "linux-image-6.1.0-47-cloud-amd64"),
    ("6.12.100-rt", "linux-image-6.12.100+deb12-rt-amd64"),
    (" linux-image-6.12.100+deb12-amd64 ", "linux-image-6.12.100+deb12-amd64"),
    ("linux-image-amd64", "linux-image-6.1.0-57-amd64"),  # a meta package: what it depends on
    ("linux-image-6.12-cloud-amd64", "linux-image-6.12.118+deb12-cloud-amd64"),
])
def test_a_kernel_is_named_by_version_or_package(text: str, package: str) -> None:
    chosen = choose(text, KERNELS, METAS.get)
    assert chosen.package == package
    assert chosen == next(k for k in KERNELS if k.package == package)  # at apt's candidate version


@pytest.mark.parametrize("text", ["6.13", "6.1.0-4", "6", "linux-image-6.13-amd64", "linux-image-6.1.0-47-amd64-dbg",
                                  "latest", ""])
def test_a_name_apt_does_not_have_lists_what_it_has(text: str) -> None:
    with pytest.raises(KernelUnknown) as e:
        choose(text, KERNELS, METAS.get)
    said = str(e.value)
    assert said.startswith(f"apt knows no kernel {text!r}. apt has these amd64 kernels: 6.1.0-47 (6.1.170-3), "
                           "6.1.0-48 (6.1.172-1),"), said
    assert "6.12.118+deb12 (6.12.118-1~deb12u1). Give one by version (6.12, 6.1.0-47, 6.1.192)" in said
    assert "other flavours: cloud-amd64, rt-amd64 (e.g. 6.12-cloud)" in said


def test_an_unknown_flavours_listing_is_that_flavours() -> None:
    with pytest.raises(KernelUnknown, match=r"apt has these cloud-amd64 kernels: 6\.1\.0-47 \(6\.1\.170-3\),"):
        choose("7.0-cloud", KERNELS, METAS.get)
    with pytest.raises(KernelUnknown, match="apt has no linux-image package at all: run apt-get update"):
        choose("6.12", [], METAS.get)


def test_suite_refuses_an_unknown_kernel_and_a_second_kernel_choice(pytester: pytest.Pytester,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Usage errors (exit 4) before any guest: apt's answers go to this test's own cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(pytester.path / "cache"))
    result = run_suite_options(pytester, "--guest-kernel", "6.13")
    assert result.ret == 4, errors(result)
    assert "argument --guest-kernel: apt knows no kernel '6.13'. apt has these amd64 kernels: 6.1." in errors(result)
    deb = pytester.path / "k.deb"
    deb.write_bytes(b"x")
    for args, said in [(("--guest-kernel-deb", str(deb)), "--guest-kernel and --guest-kernel-deb both choose"),
                       (("--image", str(deb)), "--guest-kernel builds the embedded guest; --image boots your own"),
                       (("--hypervisor", "vsphere"), "--guest-kernel builds the embedded guest, which runs on libvirt")]:
        result = run_suite_options(pytester, "--guest-kernel", "6.1", *args)
        assert result.ret == 4 and said in errors(result), (args, errors(result))
