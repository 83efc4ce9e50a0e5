"""Old cache entries go: an entry no run has used for 30 days is removed when another entry of
its kind is used; the one in use, a fresh one, a build in progress and a locked entry stay."""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from images.cache import STALE_AFTER_S, USED_STAMP, last_used, prune_stale, use_entry

DAY = 86400.0


def entry(root: Path, name: str, built_days_ago: float, used_days_ago: float | None = None) -> Path:
    """A cache entry as the builders leave it (a recipe.json), stamped as used if asked."""
    d = root / name
    d.mkdir(parents=True)
    (d / "recipe.json").write_text("{}")
    (d / "vmlinuz").write_bytes(b"k" * 100)
    t = 1_800_000_000.0 - built_days_ago * DAY
    os.utime(d / "recipe.json", (t, t))
    if used_days_ago is not None:
        (d / USED_STAMP).touch()
        u = 1_800_000_000.0 - used_days_ago * DAY
        os.utime(d / USED_STAMP, (u, u))
    return d


NOW = 1_800_000_000.0


def test_entries_unused_for_30_days_go_and_the_rest_stay(tmp_path: Path) -> None:
    current = entry(tmp_path, "cur", built_days_ago=90)  # old, but the one being used
    old = entry(tmp_path, "old", built_days_ago=45)  # built before the stamps, never used since
    old_used = entry(tmp_path, "oldused", built_days_ago=200, used_days_ago=31)
    recent = entry(tmp_path, "recent", built_days_ago=200, used_days_ago=29)  # the stamp counts, not the build
    young = entry(tmp_path, "young", built_days_ago=2)
    building = tmp_path / ".build-x1y2"
    building.mkdir()
    assert prune_stale(tmp_path, keep=current, now=NOW) == [old, old_used]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".build-x1y2", "cur", "recent", "young"]
    assert last_used(recent) == NOW - 29 * DAY and STALE_AFTER_S == 30 * DAY
    assert young.exists() and building.exists()


def test_an_entry_being_built_or_used_under_its_lock_stays(tmp_path: Path) -> None:
    current = entry(tmp_path, "cur", built_days_ago=1)
    locked = entry(tmp_path, "locked", built_days_ago=60)
    with open(tmp_path / ".locked.lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)  # another process's build_lock
        assert prune_stale(tmp_path, keep=current, now=NOW) == []
    assert locked.exists()
    assert prune_stale(tmp_path, keep=current, now=NOW) == [locked]
    assert not (tmp_path / ".locked.lock").exists()


def test_a_symlinked_entry_and_plain_files_are_left_alone(tmp_path: Path) -> None:
    elsewhere = entry(tmp_path / "elsewhere", "img", built_days_ago=60)
    root = tmp_path / "cache"
    current = entry(root, "cur", built_days_ago=1)
    (root / "link").symlink_to(elsewhere)
    (root / "notes.txt").write_text("x")
    os.utime(root / "notes.txt", (0, 0))
    assert prune_stale(root, keep=current, now=NOW) == []
    assert elsewhere.exists() and (root / "notes.txt").exists()


def test_use_entry_stamps_it_and_says_what_it_removed(tmp_path: Path) -> None:
    current = entry(tmp_path, "cur", built_days_ago=100)
    entry(tmp_path, "gone1", built_days_ago=400)
    entry(tmp_path, "gone2", built_days_ago=400)
    said: list[str] = []
    use_entry(current, said.append)  # the real clock: the stamp is now, the others are years old
    assert abs(last_used(current) - time.time()) < 60
    assert said == [f"removed 2 cache entries no run used for 30 days from {tmp_path}: gone1, gone2"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cur"]
    said.clear()
    use_entry(current, said.append)
    assert said == []


def test_a_cache_that_cannot_be_listed_is_no_error(tmp_path: Path) -> None:
    assert prune_stale(tmp_path / "missing", keep=tmp_path / "missing" / "cur", now=NOW) == []
