"""Builds and caches a static fio, for guests whose image has none (it is pushed into them over SSH).

The binary is built from Debian's own fio source package, the version apt offers for the binary
package ``fio``, with no network access in the guest and no change to this host's apt
configuration: the host's ``deb`` entries (from /etc/apt, read at run time, so the build uses
whatever mirror the host already trusts) are copied as ``deb-src`` entries into a private apt
state in the build directory, and only there does ``apt-get update`` run. Then ``apt-get source
--download-only``, ``dpkg-source -x``, ``./configure --build-static`` and ``make fio``.

The result is cached under ``$XDG_CACHE_HOME/vioconform/fio/<recipe hash>/fio`` (see images.cache);
the recipe is the source version, the configure flags and this file. A build runs in a temporary
directory beside the cache entry and is renamed into place whole: a killed build leaves no entry.

Measured on this project's 2-core Debian 12 host (fio 3.33-3, loaded by other jobs): the build
takes 40-111 s with ``make -j2`` (6 builds at load averages of 6-11; 30-33 s of CPU, apt's download
included); the static binary is 6.5 MB with its symbols, 2.8 MB stripped (``strip``), which is what
the cache keeps. Two builds are not bit-identical: the record names the binary by its SHA-256.

Run it by hand to pre-build: ``python -m images.fio_static`` prints the binary's path and version.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from images.build_error import ImageBuildError
from images.cache import apt_answer, cache_dir, cached_or_built

#: The Debian binary package whose source is built.
PACKAGE = "fio"
#: ``--build-static`` links everything in (glibc, libaio, zlib); ``--disable-native`` keeps
#: ``-march=native`` out, so the binary runs on any x86-64 guest CPU (QEMU's TCG CPU has no AVX).
#: Every optional engine that needs a library is switched off, so the build does not depend on
#: what else this host has installed; the suite's jobs use libaio and psync only.
CONFIGURE_FLAGS = (
    "--build-static", "--disable-native", "--disable-numa", "--disable-rdma", "--disable-rados",
    "--disable-rbd", "--disable-http", "--disable-gfapi", "--disable-pmem", "--disable-xnvme",
    "--disable-libzbc", "--disable-tcmalloc", "--disable-dfs", "--disable-libnfs", "--disable-lex",
)
#: At most two compilers at once: the host runs guests (and other work) meanwhile.
MAKE_JOBS = 2
#: Where apt's configuration lives on this host.
APT_ETC = Path("/etc/apt")
#: The build's Debian packages (scripts/setup-host.sh installs them): without libaio-dev's
#: static libaio.a, fio's configure quietly leaves out the libaio engine every rule uses.
BUILD_PACKAGES = ("build-essential", "dpkg-dev", "libaio-dev", "zlib1g-dev")


@dataclass(frozen=True)
class StaticFio:
    """A static fio on this host, ready to be pushed into a guest."""

    path: Path
    version: str  # what ``fio --version`` prints: "fio-3.33"
    sha256: str
    build_seconds: float  # 0.0 when it came from the cache


def cache_root() -> Path:
    return cache_dir() / "fio"


def _one_line(text: str) -> str:
    """The line of a tool's output that says what went wrong: the first ``error``, else the last line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if re.search(r"\berror\b|^E:", line, re.IGNORECASE)]
    return (errors[0] if errors else lines[-1] if lines else "no message")[:400]


def _run(cmd: list[str], cwd: Path | None = None, what: str = "", env: Mapping[str, str] | None = None) -> str:
    try:
        res = subprocess.run(cmd, check=False, cwd=cwd, capture_output=True, text=True, errors="replace",
                             env=dict(env) if env is not None else None)
    except FileNotFoundError:
        raise ImageBuildError(f"{cmd[0]} is not installed (needed to build a static fio): run "
                              "scripts/setup-host.sh") from None
    if res.returncode != 0:
        said = _one_line(res.stderr + "\n" + res.stdout)
        raise ImageBuildError(f"{what or '`' + ' '.join(cmd[:3]) + '`'} failed (exit {res.returncode}): {said}")
    return res.stdout


# --- the source package, through a private apt state ------------------------------------------

def _deb822_stanzas(text: str) -> list[list[str]]:
    """The stanzas of a deb822 file, each a list of its field lines (continuation lines kept
    with their field, comment lines dropped)."""
    stanzas: list[list[str]] = []
    current: list[str] = []
    for raw in text.splitlines():
        line = raw.rstrip()
        if line.startswith("#"):
            continue
        if not line:
            if current:
                stanzas.append(current)
            current = []
        elif line[0] in " \t" and current:
            current[-1] += "\n" + line
        else:
            current.append(line)
    if current:
        stanzas.append(current)
    return stanzas


def _field(stanza: list[str], name: str) -> str | None:
    for line in stanza:
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() == name.lower():
            return value.strip()
    return None


def deb_src_sources(files: Mapping[str, str]) -> tuple[str, str]:
    """The host's apt ``deb`` entries as ``deb-src`` entries: (a deb822 ``.sources`` text, a
    one-line ``.list`` text). ``files`` maps each apt source file's name (``sources.list``,
    ``x.list``, ``y.sources``) to its text. Every option is kept (``Signed-By``, even an inline
    key, and ``[signed-by=...]``), so the private state trusts exactly what the host trusts;
    entries switched off (``Enabled: no``) are left out."""
    stanzas: list[str] = []
    lines: list[str] = []
    for name, text in files.items():
        if name.endswith(".sources"):
            for stanza in _deb822_stanzas(text):
                types = (_field(stanza, "Types") or "").split()
                if "deb" not in types or (_field(stanza, "Enabled") or "yes").lower() == "no":
                    continue
                body = [line for line in stanza if line.partition(":")[0].strip().lower() != "types"]
                stanzas.append("\n".join(["Types: deb-src", *body]))
        elif name.endswith(".list"):
            for raw in text.splitlines():
                line = raw.split("#", 1)[0].strip()
                m = re.fullmatch(r"deb(\s+.*)", line)
                if m:
                    lines.append("deb-src" + m.group(1))
    return "\n\n".join(stanzas) + ("\n" if stanzas else ""), "\n".join(lines) + ("\n" if lines else "")


def host_apt_sources(etc: Path = APT_ETC) -> dict[str, str]:
    """The files apt reads its sources from: ``sources.list`` and ``sources.list.d/*.list|*.sources``."""
    found = [etc / "sources.list", *sorted(Path(p) for p in glob.glob(str(etc / "sources.list.d" / "*")))]
    return {p.name: p.read_text(errors="replace") for p in found
            if p.name.endswith((".list", ".sources")) and p.is_file()}


def source_version(package: str = PACKAGE) -> str:
    """The version of the source package apt's candidate of ``package`` was built from (local
    apt data only, no network: a cached binary needs no mirror)."""
    policy = _run(["apt-cache", "policy", package])
    m = re.search(r"Candidate:\s*(\S+)", policy)
    if not m or m.group(1) == "(none)":
        raise ImageBuildError(f"apt knows no {package} package to build a static fio from: run `apt-get update`")
    candidate = m.group(1)
    show = _run(["apt-cache", "show", f"{package}={candidate}"])
    src = re.search(r"^Source:\s*\S+\s*\((\S+)\)", show, re.MULTILINE)
    return src.group(1) if src else candidate


class PrivateApt:
    """apt with its own source list and package lists in ``root``: the host's apt state is
    neither read for sources nor written (nor its package caches rebuilt)."""

    def __init__(self, root: Path, files: Mapping[str, str]) -> None:
        self.root = root
        deb822, one_line = deb_src_sources(files)
        if not deb822 and not one_line:
            raise ImageBuildError(f"no `deb` entry in {APT_ETC}/sources.list or {APT_ETC}/sources.list.d: apt "
                                  "has no mirror to take fio's source package from")
        parts = root / "sources.list.d"
        (root / "lists" / "partial").mkdir(parents=True)
        parts.mkdir()
        (parts / "vioconform-src.sources").write_text(deb822)
        (parts / "vioconform-src.list").write_text(one_line)
        self.options = [
            "-o", "Dir::Etc::SourceList=/dev/null", "-o", f"Dir::Etc::SourceParts={parts}",
            "-o", f"Dir::State::Lists={root / 'lists'}",
            "-o", "Dir::Cache::pkgcache=", "-o", "Dir::Cache::srcpkgcache=",
        ]
        if os.geteuid() == 0:  # apt would hand downloads to its _apt user, who cannot write here
            self.options += ["-o", "APT::Sandbox::User=root"]

    def download_source(self, package: str, version: str, into: Path) -> Path:
        """Download the source package of ``package`` ``version`` into ``into``; its .dsc."""
        # One entry without sources (a third-party repository) fails the update but not the others.
        update = subprocess.run(["apt-get", "-q", *self.options, "update"], check=False, capture_output=True, text=True,
                                errors="replace")
        try:
            _run(["apt-get", "-q", *self.options, "source", "--download-only", f"{package}={version}"], cwd=into,
                 what=f"downloading fio's source package {version}")
        except ImageBuildError as e:
            said = f" (apt-get update said: {_one_line(update.stderr)})" if update.returncode else ""
            raise ImageBuildError(f"{e}{said}; check that this host reaches its Debian mirror") from None
        dsc = sorted(into.glob("*.dsc"))
        if not dsc:
            raise ImageBuildError(f"apt-get source downloaded no .dsc for {package} {version}")
        return dsc[0]


# --- the build ----------------------------------------------------------------------------------

def recipe() -> dict[str, object]:
    """Everything the binary depends on; its hash names the cache entry."""
    return {
        "source": [PACKAGE, apt_answer(f"source_version {PACKAGE}", source_version)],
        "configure": list(CONFIGURE_FLAGS),
        "builder_sha256": hashlib.sha256(Path(__file__).read_bytes()).hexdigest(),
    }


def recipe_hash(r: dict[str, object]) -> str:
    return hashlib.sha256(json.dumps(r, sort_keys=True).encode()).hexdigest()[:16]


def is_static_elf(path: Path) -> bool:
    """Whether ``path`` is an ELF executable without a program interpreter (PT_INTERP): a static
    binary, which needs no library in the guest. (``file`` says "statically linked" for the same.)"""
    data = path.read_bytes()[:65536]
    if data[:4] != b"\x7fELF" or data[4] != 2:  # ELF, 64-bit
        return False
    order: Literal["little", "big"] = "little" if data[5] == 1 else "big"
    phoff = int.from_bytes(data[32:40], order)
    phentsize = int.from_bytes(data[54:56], order)
    phnum = int.from_bytes(data[56:58], order)
    for i in range(phnum):
        at = phoff + i * phentsize
        if int.from_bytes(data[at:at + 4], order) == 3:  # PT_INTERP
            return False
    return phnum > 0


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _build(work: Path, version: str, out: Path) -> str:
    """Build the static fio of source ``version`` in ``work``; the stripped binary goes to ``out``.
    Returns what ``fio --version`` printed."""
    download = work / "download"
    download.mkdir()
    apt = PrivateApt(work / "apt", host_apt_sources())
    dsc = apt.download_source(PACKAGE, version, download)
    src = work / "src"
    _run(["dpkg-source", "-x", str(dsc), str(src)], what=f"unpacking {dsc.name}")
    # The compiler flags are configure's: a CFLAGS of the caller's environment would change the binary.
    env = {k: v for k, v in os.environ.items() if k not in ("CFLAGS", "LDFLAGS", "CPPFLAGS", "CC", "MAKEFLAGS")}
    _run(["./configure", *CONFIGURE_FLAGS], cwd=src, what="fio's ./configure", env=env)
    config = (src / "config-host.mak").read_text(errors="replace")
    if "CONFIG_LIBAIO=y" not in config:
        raise ImageBuildError("fio's configure found no static libaio (libaio.a), and the suite's jobs use the "
                              "libaio engine: install libaio-dev (scripts/setup-host.sh)")
    _run(["make", f"-j{MAKE_JOBS}", "fio"], cwd=src, what="`make fio`", env=env)
    built = src / "fio"
    if not is_static_elf(built):
        raise ImageBuildError(f"{built} is not a static executable after ./configure --build-static")
    _run(["strip", str(built)], what="strip")
    said = _run([str(built), "--version"], what="the new fio's --version").strip()
    engines = _run([str(built), "--enghelp"], what="the new fio's --enghelp")
    if not re.search(r"^\s*libaio\s*$", engines, re.MULTILINE):
        raise ImageBuildError("the static fio was built without its libaio engine: install libaio-dev "
                              "(scripts/setup-host.sh)")
    shutil.copy2(built, out)
    return said


def ensure_static_fio(log: Callable[[str], None] | None = None) -> StaticFio:
    """The cached static fio for the current recipe, built first if needed (ImageBuildError or
    images.cache.CacheNotWritable with a one-line cause if it cannot be)."""
    say = log or (lambda _m: None)
    r = recipe()
    dest = cache_root() / recipe_hash(r)
    version: str = r["source"][1]  # type: ignore[index]

    def build(staging: Path, work: Path) -> dict[str, object]:
        say(f"building a static fio from Debian's source package {PACKAGE} {version}; cached afterwards in {dest}")
        t0 = time.monotonic()
        staging.mkdir()
        fio_version = _build(work, version, staging / "fio")
        took = time.monotonic() - t0
        return {**r, "fio_version": fio_version, "sha256": sha256_of(staging / "fio"), "build_seconds": round(took, 1)}

    entry = cached_or_built(dest, "static fio cache", build, say)
    if entry.build_seconds:
        say(f"static fio built in {entry.build_seconds:.1f} s ({(dest / 'fio').stat().st_size / 1e6:.1f} MB)")
    return StaticFio(dest / "fio", entry.recipe["fio_version"], entry.recipe["sha256"], entry.build_seconds)


def main(argv: list[str] | None = None) -> int:
    """``python -m images.fio_static``: build (or find) the cached static fio, print its path and version."""
    import argparse

    from images.cache import CacheNotWritable

    ap = argparse.ArgumentParser(prog="python -m images.fio_static", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.parse_args(argv)
    try:
        fio = ensure_static_fio(print)
    except (ImageBuildError, CacheNotWritable) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(fio.path)
    print(fio.version)
    return 0


if __name__ == "__main__":
    sys.exit(main())
