"""The --image digest: hashing a large image says how far it got, and an unchanged file (same path,
size, mtime, inode) is not hashed again by the next run (images/user.py)."""

from __future__ import annotations

import hashlib
import itertools
import os
from pathlib import Path

import pytest

from images import user

MIB = 1024**2


def _file(path: Path, mib: int, byte: bytes = b"\1") -> Path:
    path.write_bytes(byte * (mib * MIB))
    return path


def test_hashing_reports_bytes_rate_and_time_left(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    image = _file(tmp_path / "big.raw", 4)
    monkeypatch.setattr(user, "HASH_CHUNK_BYTES", MIB)
    ticks = itertools.count(0.0, 3.0)  # each 1 MiB read "takes" 3 s: a line every other read
    said: list[str] = []
    digest = user.sha256_of(image, said.append, clock=lambda: next(ticks))
    assert digest == hashlib.sha256(image.read_bytes()).hexdigest()
    assert said == [f"hashing {image}: 0.0 of 0.0 GiB (50%) at 0 MiB/s, about 6 s left",
                    f"hashing {image}: 0.0 of 0.0 GiB (100%) at 0 MiB/s, about 0 s left"]


def test_the_digest_is_kept_until_the_file_changes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache" / "image-digests"
    image = _file(tmp_path / "disk.raw", 2)
    hashed: list[Path] = []
    real = user.sha256_of

    def counting(path: Path, progress: object = None) -> str:
        hashed.append(path)
        return real(path)

    monkeypatch.setattr(user, "sha256_of", counting)
    said: list[str] = []
    first = user.cached_sha256(image, cache, said.append)
    assert first == hashlib.sha256(image.read_bytes()).hexdigest() and hashed == [image]
    assert user.cached_sha256(image, cache, said.append) == first and hashed == [image]  # the second run reads none
    assert said[-1] == f"sha256 of {image} from the cache ({next(cache.glob('*.json'))}): unchanged since it was hashed"
    # a write of the same size (a new mtime), a file put in its place (a new inode): hashed again
    stamp = image.stat()
    with open(image, "r+b") as f:
        f.write(b"\2")
    os.utime(image, ns=(stamp.st_atime_ns, stamp.st_mtime_ns + 1))
    second = user.cached_sha256(image, cache, said.append)
    assert second != first and len(hashed) == 2
    replacement = _file(tmp_path / "new.raw", 2, b"\3")
    os.utime(replacement, ns=(stamp.st_atime_ns, image.stat().st_mtime_ns))
    replacement.replace(image)
    assert user.cached_sha256(image, cache, said.append) == hashlib.sha256(b"\3" * 2 * MIB).hexdigest()
    assert len(hashed) == 3


def test_a_cache_that_cannot_be_written_only_costs_a_hash(tmp_path: Path) -> None:
    image = _file(tmp_path / "disk.raw", 1)
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    assert user.cached_sha256(image, blocker / "digests", lambda _: None) == hashlib.sha256(image.read_bytes()).hexdigest()
