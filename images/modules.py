"""The kernel modules the embedded guest's initramfs carries: the ones it wants and everything they
depend on, as each module names its dependencies itself (``depends=`` in its ``.modinfo`` section, the
field ``depmod`` builds ``modules.dep`` from).

Reading only the wanted modules and their dependencies (about 30 files) instead of a ``depmod`` of the
whole kernel (4,000-4,200 modules in Debian's 6.1 and 6.12 packages, 6.12's compressed with xz, which
busybox's depmod decompresses one by one) takes the image build's module step from seconds to a few
hundred milliseconds (docs/benchmarks.md, "Guest kernels"). The initramfs's own ``modules.dep`` is then
made by ``busybox depmod`` over the few modules copied.
"""

from __future__ import annotations

import gzip
import lzma
import re
import subprocess
from pathlib import Path

from images.build_error import ImageBuildError

_DEPENDS = re.compile(rb"(?:^|\0)depends=([^\0]*)\0")


def module_name(path: str | Path) -> str:
    """``kernel/drivers/scsi/sd_mod.ko`` (or ``.ko.xz``, ``.ko.zst``, ``.ko.gz``) -> ``sd_mod``."""
    return re.sub(r"\.ko(\.[a-z]+)?$", "", Path(path).name).replace("-", "_")


def module_bytes(path: Path) -> bytes:
    """A module file's ELF bytes, decompressed where the kernel package compressed it."""
    if path.suffix == ".xz":
        return lzma.decompress(path.read_bytes())
    if path.suffix == ".gz":
        return gzip.decompress(path.read_bytes())
    if path.suffix == ".zst":
        try:
            return subprocess.run(["zstd", "-dc", str(path)], check=True, capture_output=True).stdout
        except (OSError, subprocess.CalledProcessError) as e:
            raise ImageBuildError(f"cannot decompress {path.name} with zstd: {e}") from None
    return path.read_bytes()


def depends(path: Path) -> list[str]:
    """The modules ``path`` depends on, by name (its ``depends=`` field; none where it has none)."""
    m = _DEPENDS.search(module_bytes(path))
    return [module_name(d) for d in m.group(1).decode(errors="replace").split(",") if d] if m else []


def closure(modroot: Path, wanted: tuple[str, ...], required: tuple[str, ...]) -> list[str]:
    """Paths (relative to ``modroot``, ``/lib/modules/<version>``) of the wanted modules and everything
    they depend on. A module built in (modules.builtin) needs no file; one the kernel lacks entirely is
    left out, unless it is ``required`` (ImageBuildError)."""
    by_name = {module_name(p): p.relative_to(modroot).as_posix()
               for p in (modroot / "kernel").rglob("*.ko*") if re.search(r"\.ko(\.[a-z]+)?$", p.name)}
    builtin = modroot / "modules.builtin"
    built_in = {module_name(t) for t in builtin.read_text().split()} if builtin.exists() else set()
    out: set[str] = set()
    stack = []
    for name in wanted:
        if name in built_in:
            continue
        if name not in by_name:
            if name in required:
                raise ImageBuildError(f"kernel has no module {name} (the guest needs it to be reached over SSH)")
            continue
        stack.append(name)
    while stack:
        name = stack.pop()
        rel = by_name.get(name)
        if rel is None or rel in out:  # built in, or already taken
            continue
        out.add(rel)
        stack.extend(depends(modroot / rel))
    return sorted(out)
