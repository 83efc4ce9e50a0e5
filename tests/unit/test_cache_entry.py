"""The one cache lookup of every builder (images.cache.cached_or_built): found, built once under its
lock, never left half made."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from images.cache import USED_STAMP, Entry, cached_or_built


def _builder(calls: list[Path], recorded: dict[str, object]) -> Callable[[Path, Path], dict[str, object]]:
    def build(staging: Path, work: Path) -> dict[str, object]:
        assert staging.parent == work and work.parent == staging.parent.parent
        calls.append(staging)
        staging.mkdir()
        (staging / "payload").write_text("built")
        return recorded
    return build


def test_an_entry_is_built_once_then_found(tmp_path: Path) -> None:
    dest = tmp_path / "cache" / "images" / "abc123"
    calls: list[Path] = []
    built = cached_or_built(dest, "image cache", _builder(calls, {"kernel_version": "6.1.0"}), lambda _m: None)
    assert len(calls) == 1 and built.build_seconds > 0
    assert built.path == dest and built.recipe == {"kernel_version": "6.1.0"}
    assert (dest / "payload").read_text() == "built" and (dest / USED_STAMP).exists()
    assert [p.name for p in dest.parent.iterdir() if p.name.startswith(".build-")] == []

    found = cached_or_built(dest, "image cache", _builder(calls, {}), lambda _m: None)
    assert len(calls) == 1  # not built again
    assert found.build_seconds == 0.0 and found.recipe == {"kernel_version": "6.1.0"}


def test_a_failed_build_leaves_no_entry(tmp_path: Path) -> None:
    dest = tmp_path / "fio" / "abc123"

    def fail(staging: Path, work: Path) -> dict[str, object]:
        staging.mkdir()
        (staging / "half").write_text("half a build")
        raise RuntimeError("the build broke")

    with pytest.raises(RuntimeError, match="the build broke"):
        cached_or_built(dest, "static fio cache", fail, lambda _m: None)
    assert not dest.exists()
    assert [p.name for p in dest.parent.iterdir() if not p.name.endswith(".lock")] == []


def test_a_second_process_waits_for_the_first_build_and_finds_it(tmp_path: Path) -> None:
    """Two lookups of one missing entry at once (two xdist workers): one builds, the other waits on
    the build lock and then finds the entry instead of building it a second time."""
    dest = tmp_path / "test-images" / "abc123"
    calls: list[Path] = []
    started, release = threading.Event(), threading.Event()

    def slow(staging: Path, work: Path) -> dict[str, object]:
        started.set()
        assert release.wait(30)
        return _builder(calls, {"kernel_version": "6.1.0"})(staging, work)

    first = threading.Thread(target=cached_or_built, args=(dest, "test image cache", slow, lambda _m: None))
    first.start()
    assert started.wait(30)
    second: list[Entry] = []
    waiter = threading.Thread(target=lambda: second.append(
        cached_or_built(dest, "test image cache", _builder(calls, {}), lambda _m: None)))
    waiter.start()
    waiter.join(0.3)
    assert waiter.is_alive()  # waits on the lock while the first build runs
    release.set()
    first.join(30)
    waiter.join(30)
    assert len(calls) == 1
    (entry,) = second
    assert entry.recipe == {"kernel_version": "6.1.0"} and entry.build_seconds == 0.0
