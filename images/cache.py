"""Where vioconform keeps files between runs: ``$XDG_CACHE_HOME/vioconform`` (``~/.cache/vioconform``).

The guest images (``images/``) and the KVM probe's answers (``accel-probe.json``) live there.
A read-only HOME gets an error that names the way out (``XDG_CACHE_HOME``), not a bare EROFS.

Every change of a recipe (a new kernel in apt, a new vioconform, another ``--guest-kernel-deb``)
makes a new entry beside the old ones: 14-76 MB for a guest image here, 123 MB for the test image.
``cached_or_built`` finds an entry or builds it, once per host, under its lock.
``use_entry`` stamps the entry a run uses and removes the entries of its kind that no run has
used for ``STALE_AFTER_S``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
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


#: An entry no run has used for this long goes when another entry of its kind is used. Long
#: enough that no run is still using it (a run stamps its entry when it starts), and that a
#: kernel package or version one goes back to within a month is still there.
STALE_AFTER_S = 30 * 86400.0
#: The file in an entry whose mtime says when a run last used it.
USED_STAMP = ".used"


def last_used(entry: Path) -> float:
    """When a run last used ``entry``: its stamp, or for an entry made before stamps (or never
    used since its build), its recipe file's mtime, which is when it was built."""
    for name in (USED_STAMP, "recipe.json"):
        try:
            return (entry / name).stat().st_mtime
        except OSError:
            continue
    return entry.stat().st_mtime


def prune_stale(root: Path, keep: Path, now: float | None = None) -> list[Path]:
    """Remove the entries under ``root`` (not ``keep``) unused for ``STALE_AFTER_S``; returns
    them. Skipped: hidden names (builds in progress, ``.build-*``, and the locks), symlinks, and
    an entry whose ``build_lock`` another process holds. Nothing here raises: a cache that cannot
    be cleaned is still a cache."""
    now = time.time() if now is None else now
    removed: list[Path] = []
    try:
        entries = sorted(root.iterdir())
    except OSError:
        return removed
    for entry in entries:
        if entry.name.startswith(".") or entry == keep or entry.is_symlink() or not entry.is_dir():
            continue
        try:
            if now - last_used(entry) < STALE_AFTER_S:
                continue
            lock = root / f".{entry.name}.lock"
            with open(lock, "a") as f:
                try:
                    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # being built
                if now - last_used(entry) < STALE_AFTER_S:
                    continue  # used while this looked
                shutil.rmtree(entry)
                lock.unlink(missing_ok=True)
                removed.append(entry)
        except OSError:
            continue
    return removed


def use_entry(entry: Path, log: Callable[[str], None]) -> None:
    """Stamp ``entry`` as used now, and remove its kind's stale entries (``prune_stale``)."""
    with contextlib.suppress(OSError):  # a read-only cache: nothing is removed from it either
        (entry / USED_STAMP).touch()
    removed = prune_stale(entry.parent, entry)
    if removed:
        log(f"removed {len(removed)} cache entr{'y' if len(removed) == 1 else 'ies'} no run used for "
            f"{STALE_AFTER_S / 86400:.0f} days from {entry.parent}: {', '.join(p.name for p in removed)}")


#: The file that makes a directory a complete cache entry: its recipe and what the build recorded,
#: written last, before the entry is renamed into place.
RECIPE_FILE = "recipe.json"


@dataclass(frozen=True)
class Entry:
    """A complete cache entry: its directory and its ``recipe.json``."""

    path: Path
    recipe: dict[str, Any]
    build_seconds: float  # 0.0 when it came from the cache


def cached_or_built(dest: Path, what: str, build: Callable[[Path, Path], Mapping[str, Any]],
                    log: Callable[[str], None]) -> Entry:
    """The cache entry ``dest``, built first if it is not there: the one lookup of every builder
    (the embedded guest image, the static fio, the test image).

    An entry is complete once its ``recipe.json`` exists. A build runs under ``build_lock(dest)``:
    a second process that needs the same entry waits and then finds it. ``build(staging, work)``
    makes the directory ``staging`` inside the temporary directory ``work``, which lies beside the
    entry, and returns what ``recipe.json`` records; the staging directory is renamed to ``dest``
    whole, so a killed build leaves no entry. ``what`` names the cache in CacheNotWritable's
    message ("image cache"). The entry is stamped as used (``use_entry``) either way."""
    meta = dest / RECIPE_FILE
    took = 0.0
    if not meta.exists():
        writable_dir(dest.parent, what)
        with build_lock(dest):
            if not meta.exists():  # else another process built it while this one waited
                t0 = time.monotonic()
                with tempfile.TemporaryDirectory(prefix=".build-", dir=dest.parent) as tmp:
                    staging = Path(tmp) / "out"
                    recorded = build(staging, Path(tmp))
                    (staging / RECIPE_FILE).write_text(json.dumps(dict(recorded), indent=2))
                    try:
                        staging.rename(dest)
                    except OSError:
                        if not meta.exists():  # not another run's build that finished first
                            raise
                took = time.monotonic() - t0
    use_entry(dest, log)
    return Entry(dest, json.loads(meta.read_text()), took)


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
    package, fio's source version): asking ``apt-cache`` costs 1.7 s of each run's set-up here, the
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
