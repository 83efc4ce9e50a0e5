"""The guard that the project's tests leave a user's results/ alone (tests/conftest.py): it sees a
store rewritten in place, a file added or removed, a directory made; and it fails the session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import changes, snapshot

pytest_plugins = ["pytester"]


def a_users_results(top: Path) -> Path:
    results = top / "results"
    (results / "20261120-020000").mkdir(parents=True)
    (results / "20261120-020000" / "junit.xml").write_text("<testsuites/>")
    (results / "vioconform.db").write_bytes(b"SQLite format 3\0" + bytes(4080))
    return results


def test_an_untouched_results_directory_has_no_changes(tmp_path: Path) -> None:
    results = a_users_results(tmp_path)
    assert changes(snapshot(results), snapshot(results)) == []
    assert changes(snapshot(tmp_path / "none"), snapshot(tmp_path / "none")) == []


def test_a_store_rewritten_in_place_is_seen_by_its_content(tmp_path: Path) -> None:
    results = a_users_results(tmp_path)
    db = results / "vioconform.db"
    before = snapshot(results)
    st = db.stat()
    with db.open("r+b") as f:  # a page rewritten: same size; the mtime set back as a coarse clock would show it
        f.seek(100)
        f.write(b"run from /tmp/pytest-of-root")
    os.utime(db, ns=(st.st_atime_ns, st.st_mtime_ns))
    found = changes(before, snapshot(results))
    assert len(found) == 1 and found[0].startswith("vioconform.db changed:") and "sha256" in found[0], found


def test_files_added_removed_and_the_directory_made_are_seen(tmp_path: Path) -> None:
    assert changes(snapshot(tmp_path / "results"), snapshot(a_users_results(tmp_path))) == [". created"]
    results = tmp_path / "results"
    before = snapshot(results)
    (results / "20261120-020000" / "junit.xml").unlink()
    (results / "20261126-114519").mkdir()
    found = changes(before, snapshot(results))
    assert any(line.startswith("20261120-020000/junit.xml removed:") for line in found), found
    assert any(line.startswith("20261126-114519 added: dir") for line in found), found


INNER_CONFTEST = "from tests.conftest import results_untouched  # noqa: F401\n"

INNER_TESTS = """
from pathlib import Path

def test_a_run_with_the_default_store():
    # what `python -m pytest suites` without --store does in its working directory
    Path("results").mkdir(exist_ok=True)
    Path("results", "vioconform.db").write_bytes(b"SQLite format 3\\0")

def test_a_run_in_its_own_directory(tmp_path):
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "vioconform.db").write_bytes(b"SQLite format 3\\0")
"""


def test_the_session_fails_when_a_test_writes_into_results(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(INNER_CONFTEST)
    pytester.makepyfile(test_inner=INNER_TESTS)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines([f"*{pytester.path / 'results'}: . created*"])
    assert "a test wrote into a user's results directory" in result.stdout.str()


def test_a_session_that_writes_only_its_own_directories_passes(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(INNER_CONFTEST)
    pytester.makepyfile(test_inner=INNER_TESTS)
    a_users_results(pytester.path)
    result = pytester.runpytest("-p", "no:cacheprovider", "-k", "own_directory")
    result.assert_outcomes(passed=1, deselected=1)
