"""The results directory: one per run, private, refused up front when it cannot serve."""

from __future__ import annotations

import stat
import threading
import time
from pathlib import Path

import pytest

from reports.results import ResultsDir, ResultsDirError, open_results, parse_mode, unique_dir

FROZEN = time.strptime("20261122-113017", "%Y%m%d-%H%M%S")


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_runs_started_in_the_same_second_get_their_own_directories(tmp_path: Path) -> None:
    first = open_results(None, None, now=FROZEN, parent=tmp_path / "results")
    second = open_results(None, None, now=FROZEN, parent=tmp_path / "results")
    assert first.path.name == "20261122-113017" and second.path.name == "20261122-113017-2"
    assert first.junit_path == first.path / "junit.xml" and second.junit_path == second.path / "junit.xml"
    assert _mode(first.path) == _mode(second.path) == 0o700


def test_concurrent_runs_never_share_a_directory(tmp_path: Path) -> None:
    got: list[Path] = []
    lock = threading.Lock()

    def one() -> None:
        path, _ = unique_dir(tmp_path, "20261122-113017")
        with lock:
            got.append(path)

    threads = [threading.Thread(target=one) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(got)) == 16 and all(p.is_dir() for p in got)


def test_explicit_directory_must_be_new_or_empty(tmp_path: Path) -> None:
    new = open_results(tmp_path / "a" / "b", None)
    assert new.path.is_dir() and _mode(new.path) == 0o700 and new.created == [tmp_path / "a", tmp_path / "a" / "b"]
    (new.path / "junit.xml").write_text("<earlier run/>")
    with pytest.raises(ResultsDirError, match=r"is not empty \(it holds junit.xml\).*never writes over earlier"):
        open_results(new.path, None)
    empty = tmp_path / "empty"
    empty.mkdir(mode=0o755)
    taken = open_results(empty, None)
    assert taken.created == [] and _mode(empty) == 0o700  # made private like a new one


@pytest.mark.parametrize("where", ["a-file", "/proc/nope"])
def test_unusable_directory_is_refused_with_how_to_fix(tmp_path: Path, where: str) -> None:
    path = tmp_path / where if where == "a-file" else Path(where)
    if where == "a-file":
        path.write_text("not a directory")
    with pytest.raises(ResultsDirError) as e:
        open_results(path, None)
    assert str(e.value).startswith(f"--results-dir {path}") and "e.g. --results-dir" in str(e.value)
    assert not Path("/proc/nope").exists()


def test_junit_path_elsewhere_creates_its_directories_and_refuses_a_directory(tmp_path: Path) -> None:
    r = open_results(tmp_path / "res", tmp_path / "ci" / "out" / "j.xml")
    assert r.junit_path == tmp_path / "ci" / "out" / "j.xml" and r.junit_path.parent.is_dir()
    with pytest.raises(ResultsDirError, match="is a directory; give a file name"):
        open_results(tmp_path / "res2", tmp_path / "ci")
    assert not (tmp_path / "res2").exists()  # a refused run leaves nothing behind


def test_unused_directories_are_removed_and_used_ones_kept(tmp_path: Path) -> None:
    unused = open_results(None, None, now=FROZEN, parent=tmp_path / "results")
    unused.remove_if_unused()
    assert not (tmp_path / "results").exists()
    used = open_results(None, None, now=FROZEN, parent=tmp_path / "results")
    (used.path / "junit.xml").write_text("x")
    used.remove_if_unused()
    assert (used.path / "junit.xml").exists()


def test_make_private_covers_what_rules_wrote(tmp_path: Path) -> None:
    r = ResultsDir(tmp_path, tmp_path / "junit.xml", 0o750)
    raw = tmp_path / "raw" / "libvirt_virtio-blk_latency5ms"
    raw.mkdir(parents=True, mode=0o777)
    (raw / "qd1.fio.json").write_text("{}")
    (raw / "qd1.fio.json").chmod(0o666)
    r.make_private()
    assert _mode(raw) == _mode(tmp_path / "raw") == 0o750 and _mode(raw / "qd1.fio.json") == 0o640


def test_results_mode_values() -> None:
    assert parse_mode("0755") == 0o755 and parse_mode("700") == 0o700
    for bad in ("rwx", "0644", "01777"):
        with pytest.raises(ValueError, match="--results-mode"):
            parse_mode(bad)
