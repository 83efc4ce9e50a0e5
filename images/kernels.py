"""The Debian kernels the embedded guest can be built from, named as a user would (``--guest-kernel``).

A kernel is a ``linux-image-<abi>-<flavour>`` package apt knows (``linux-image-6.1.0-47-amd64``,
``linux-image-6.12.100+deb12-cloud-amd64``), at apt's candidate version. ``resolve`` takes:

- a package name, or a meta package's (``linux-image-amd64``, ``linux-image-6.12-cloud-amd64``: the
  package it depends on);
- a version, with ``-cloud`` or ``-rt`` for those flavours: the kernel's ABI name or a prefix of it
  (``6.1.0-47``, ``6.12.100``, ``6.12``, ``6.1``) or its package version (``6.1.192``, ``6.1.170-3``);
  a prefix names the newest kernel it matches (``6.12`` is the newest 6.12).

Anything else is ``KernelUnknown``, whose message lists what apt has. The package file is downloaded
once per package and version (``apt-get download``) into the cache (``$XDG_CACHE_HOME/vioconform/
kernel-debs/``, images.cache), beside the images built from it.

Example::

    k = resolve("6.12")       # AptKernel('linux-image-6.12.118+deb12-amd64', '6.12.118-1~deb12u1')
    deb = cached_deb(k, print)
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from images.build_error import ImageBuildError
from images.cache import apt_answer, cache_dir, cached_or_built

#: A kernel image package: ``linux-image-<abi>-<flavour>``; the ABI has three numbers (a meta package,
#: ``linux-image-6.12-amd64``, has two), and the debug and unsigned packages end otherwise.
_PACKAGE = re.compile(r"linux-image-(?P<abi>\d+\.\d+\.\d+\S*?)-(?P<flavour>cloud-amd64|rt-amd64|amd64)")
#: What a version the user gives may end with: its flavour (the default flavour is plain amd64).
_VERSION = re.compile(r"(?P<version>\d+\.\d+\S*?)(?:-(?P<flavour>cloud|rt))?(?:-amd64)?")


class KernelUnknown(ValueError):
    """No kernel apt knows matches what the user gave; the message lists what it has."""


@dataclass(frozen=True)
class AptKernel:
    """A Debian kernel image package at one version: ``AptKernel("linux-image-6.1.0-47-amd64", "6.1.170-3")``."""

    package: str
    version: str

    @property
    def abi(self) -> str:
        """The kernel's ABI name: "6.1.0-47", "6.12.100+deb12"."""
        m = _PACKAGE.fullmatch(self.package)
        return m.group("abi") if m else self.package

    @property
    def flavour(self) -> str:
        """"amd64", "cloud-amd64" or "rt-amd64"."""
        m = _PACKAGE.fullmatch(self.package)
        return m.group("flavour") if m else ""

    def __str__(self) -> str:
        return f"{self.package} {self.version}"


def _apt(args: list[str]) -> str:
    try:
        return subprocess.run(["apt-cache", *args], check=True, capture_output=True, text=True).stdout
    except FileNotFoundError:
        raise ImageBuildError("apt-cache is not installed: naming a kernel needs Debian's apt "
                              "(or give the package file itself with --guest-kernel-deb)") from None
    except subprocess.CalledProcessError as e:
        raise ImageBuildError(f"apt-cache {' '.join(args)} failed ({e.returncode}): {e.stderr.strip()[-300:]}") from None


def candidates(policy: str) -> dict[str, str]:
    """Each package's candidate version in ``apt-cache policy PKG...``'s output (``(none)`` left out)."""
    out: dict[str, str] = {}
    package = ""
    for line in policy.splitlines():
        if line and not line[0].isspace() and line.rstrip().endswith(":"):
            package = line.rstrip()[:-1]
        m = re.match(r"\s+Candidate:\s*(\S+)", line)
        if m and package and m.group(1) != "(none)":
            out[package] = m.group(1)
    return out


def _ask_available() -> list[list[str]]:
    names = sorted({n for n in _apt(["pkgnames", "linux-image-"]).split() if _PACKAGE.fullmatch(n)})
    found = candidates(_apt(["policy", *names])) if names else {}
    return [[n, found[n]] for n in names if n in found]


def available() -> list[AptKernel]:
    """Every kernel image package apt has a candidate of, oldest first (remembered while apt's state stays)."""
    kernels = [AptKernel(p, v) for p, v in apt_answer("kernel_packages", _ask_available)]
    return sorted(kernels, key=version_key)


def version_key(k: AptKernel) -> tuple[int, ...]:
    """Orders Debian's kernel versions: their numbers in turn (6.1.170-3 < 6.1.176-1 < 6.12.100-1~deb12u1)."""
    return tuple(int(n) for n in re.findall(r"\d+", k.version))


def _meta_target(meta: str) -> str | None:
    """The kernel image package a meta package depends on (``linux-image-amd64`` ->
    ``linux-image-6.1.0-57-amd64``), or None where apt knows no such package."""
    def ask() -> str:
        try:
            said = _apt(["depends", meta])
        except ImageBuildError:
            return ""
        return next((w for w in said.split() if _PACKAGE.fullmatch(w)), "")
    return apt_answer(f"depends {meta}", ask) or None


def _at_boundary(full: str, prefix: str) -> bool:
    """``prefix`` is ``full`` or a start of it that ends a number: "6.1" starts "6.1.0-47", not "6.12.100"."""
    return full == prefix or (full.startswith(prefix) and not full[len(prefix)].isdigit())


def resolve(text: str) -> AptKernel:
    """The kernel ``text`` names (see the module's docstring); KernelUnknown listing what apt has."""
    return choose(text, available(), _meta_target)


def choose(text: str, kernels: list[AptKernel], meta_target: Callable[[str], str | None]) -> AptKernel:
    """The kernel of ``kernels`` (apt's, oldest first) that ``text`` names; ``meta_target`` answers which
    package a meta package depends on. KernelUnknown, listing ``kernels``, where none matches."""
    name = text.strip()
    by_package = {k.package: k for k in kernels}
    if name in by_package:
        return by_package[name]
    flavour = "amd64"
    matches: list[AptKernel] = []
    if name.startswith("linux-image-"):
        target = meta_target(name)
        if target in by_package:
            return by_package[target]
    else:
        m = _VERSION.fullmatch(name)
        if m:
            flavour = f"{m.group('flavour')}-amd64" if m.group("flavour") else "amd64"
            matches = [k for k in kernels if k.flavour == flavour
                       and (_at_boundary(k.abi, m.group("version")) or _at_boundary(k.version, m.group("version")))]
    if matches:
        return max(matches, key=version_key)
    raise KernelUnknown(f"apt knows no kernel {name!r}. {listing(kernels, flavour)}")


def listing(kernels: list[AptKernel], flavour: str = "amd64") -> str:
    """What apt has, for an error: each kernel of ``flavour`` as "ABI (version)", and how to name the others."""
    mine = [k for k in kernels if k.flavour == flavour]
    if not kernels:
        return "apt has no linux-image package at all: run apt-get update"
    shown = ", ".join(f"{k.abi} ({k.version})" for k in mine) or "none"
    others = sorted({k.flavour for k in kernels} - {flavour})
    return (f"apt has these {flavour} kernels: {shown}. Give one by version (6.12, 6.1.0-47, 6.1.192) or package "
            f"name (linux-image-6.12-amd64, {mine[-1].package if mine else kernels[-1].package})"
            + (f"; other flavours: {', '.join(others)} (e.g. 6.12-cloud)" if others else "")
            + "; run apt-get update for newer ones")


def default_kernel() -> AptKernel:
    """The kernel Debian's ``linux-image-amd64`` points at now: the embedded guest's default."""
    return resolve("linux-image-amd64")


def deb_cache() -> Path:
    return cache_dir() / "kernel-debs"


def cached_deb(kernel: AptKernel, say: Callable[[str], None] = lambda _m: None) -> Path:
    """The package file of ``kernel``, downloaded once (``apt-get download PKG=VERSION``) into
    ``deb_cache()/<package>_<version>/``; ImageBuildError where apt cannot get it."""
    dest = deb_cache() / f"{kernel.package}_{kernel.version}"

    def download(staging: Path, work: Path) -> dict[str, object]:
        say(f"downloading {kernel}; cached afterwards in {dest}")
        work.chmod(0o755)  # apt downloads as the _apt user
        try:
            subprocess.run(["apt-get", "download", "-q", f"{kernel.package}={kernel.version}"], cwd=work, check=True,
                           capture_output=True, text=True)
        except FileNotFoundError:
            raise ImageBuildError("apt-get is not installed: naming a kernel needs Debian's apt") from None
        except subprocess.CalledProcessError as e:
            raise ImageBuildError(f"apt-get download {kernel.package}={kernel.version} failed ({e.returncode}): "
                                  f"{e.stderr.strip()[-400:]}; run apt-get update") from None
        deb = next(work.glob("linux-image-*.deb"))
        staging.mkdir()
        shutil.move(str(deb), staging / deb.name)
        return {"package": kernel.package, "version": kernel.version, "file": deb.name}

    entry = cached_or_built(dest, "kernel package cache", download, say)
    return entry.path / str(entry.recipe["file"])
