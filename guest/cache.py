"""Where vioconform keeps files between runs: ``$XDG_CACHE_HOME/vioconform`` (``~/.cache/vioconform``).

The guest images (``images/``) and the KVM probe's answers (``accel-probe.json``) live there.
A read-only HOME gets an error that names the way out (``XDG_CACHE_HOME``), not a bare EROFS.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


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


def replace_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path`` and rename it over ``path``: a process
    reading it meanwhile (another xdist worker, another run) sees the old file or the new one,
    never half of one, and a failed write leaves no temporary file. (reports/results.py's
    ``write_atomic`` does the same for results, with their private mode and fsync; reports may
    import model only, so it cannot be this one.)"""
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def replace_text(path: Path, text: str) -> None:
    """``replace_bytes`` for text (UTF-8)."""
    replace_bytes(path, text.encode())


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


#: What apt's answers depend on: the package lists (``apt-get update`` rewrites them and the
#: binary cache) and the installed packages. A change to any of them is a new apt state.
APT_STATE_FILES = (Path("/var/lib/apt/lists"), Path("/var/cache/apt/pkgcache.bin"), Path("/var/lib/dpkg/status"),
                   Path("/etc/apt/preferences.d"), Path("/etc/apt/sources.list.d"))


def _apt_state() -> list[list[int]]:
    state = []
    for p in APT_STATE_FILES:
        try:
            st = p.stat()
            state.append([st.st_mtime_ns, st.st_size, st.st_ino])
        except OSError:
            state.append([])
    return state


def apt_answer(question: str, ask: Callable[[], Any]) -> Any:
    """``ask()``'s answer (JSON), remembered in the cache (``apt-answers.json``) while apt's state
    (APT_STATE_FILES) stays as it was. Every run names its image by apt's candidates (the kernel
    package, fio's source version): asking ``apt-cache`` took 1.7 s of each run's set-up here, the
    remembered answer a millisecond. Without a writable cache, apt is asked every time."""
    path = cache_dir() / "apt-answers.json"
    state = _apt_state()
    try:
        memo = json.loads(path.read_text())
        if memo.get("state") == state and question in memo.get("answers", {}):
            return memo["answers"][question]
    except (OSError, ValueError, AttributeError):
        memo = {}
    answer = ask()
    answers = memo.get("answers", {}) if memo.get("state") == state else {}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_text(path, json.dumps({"state": state, "answers": {**answers, question: answer}}))
    except OSError:
        pass
    return answer
