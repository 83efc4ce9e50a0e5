"""Where vioconform keeps files between runs: ``$XDG_CACHE_HOME/vioconform`` (``~/.cache/vioconform``).

The guest images (``images/``) and the KVM probe's answers (``accel-probe.json``) live there.
A read-only HOME gets an error that names the way out (``XDG_CACHE_HOME``), not a bare EROFS.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class CacheNotWritable(RuntimeError):
    """The cache directory cannot take a file; the message names the directory and the remedy."""


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/vioconform``, or ``~/.cache/vioconform`` when the variable is unset or empty."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "vioconform"


def writable_dir(path: Path, what: str) -> Path:
    """Create ``path`` if needed and prove it takes a file (root ignores permission bits, a
    read-only mount does not, so only a real write tells). Returns ``path``."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".write-test-"):
            pass
    except OSError as e:
        reason = os.strerror(e.errno).lower() if e.errno else str(e)
        raise CacheNotWritable(f"cannot write the {what} at {path} ({reason}); "
                               "set XDG_CACHE_HOME to a writable directory") from e
    return path


@contextmanager
def build_lock(dest: Path) -> Iterator[None]:
    """Held while the cache entry ``dest`` is built (``.<name>.lock`` beside it, flock): a second
    process that needs the same entry (an xdist worker, another run on the host) waits for the
    first one's build and then finds the entry, instead of building it a second time beside it.
    The lock goes with the process, so a killed build never leaves it held."""
    with open(dest.parent / f".{dest.name}.lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
