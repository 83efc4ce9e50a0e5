"""A store that cannot be written: read-only (a read-only file system, where root cannot write
either), full, locked by another writer past the busy timeout, a table or column missing.

- Before any guest, the preflight writes a probe run and rolls it back: a usage error (exit 4).
- At the end of a run (the store broke meanwhile): the verdicts, the JUnit file and the report stay,
  ``NOT STORED`` says why, exit 11. It was an SQLAlchemy traceback, no verdict section and exit 1,
  the code of a FAILED rule.
- ``reports.store import`` and ``reports.compare`` (which imports directories): one line, exit 2, never 1.

The read-only and full cases mount a small tmpfs of their own (tests/tinyfs.py: root only).
"""

from __future__ import annotations

import sqlite3
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from reports import store as store_module
from reports.store import Store, compare, connection
from tests.runs.test_gate_plugin import _cases, _kind, _run
from tests.tinyfs import fill, read_only, tiny_fs
from tests.unit.test_store import healthy, write_run

#: A plugin for the gate's run (tests/runs/test_gate_plugin.py): the store breaks as STORE_BREAKS
#: says, when the run ends (before fixtures/finish.py stores it) or, for ``lock-at-start``, before
#: the preflight. A lock is another writer's open transaction, held by a connection of this process
#: and waited for 0.5 s, not 10.
BREAK_STORE = textwrap.dedent('''
    import os
    import sqlite3
    import subprocess

    import pytest

    from reports.store import connection

    HELD = []

    def _lock(db):
        connection.STORE_BUSY_TIMEOUT_S = 0.5
        conn = sqlite3.connect(db, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")  # another writer's transaction: readers go on, writers wait
        HELD.append(conn)

    def pytest_configure(config):
        how, _, where = os.environ["STORE_BREAKS"].partition(":")
        if how == "lock-at-start":
            _lock(where)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(session):
        how, _, where = os.environ["STORE_BREAKS"].partition(":")
        if how == "read-only":
            subprocess.run(["mount", "-o", "remount,ro", where], check=True)
        elif how == "full":
            from tests.tinyfs import fill
            from pathlib import Path
            fill(Path(where))
        elif how == "lock":
            _lock(where)
        elif how == "drop-samples":
            with sqlite3.connect(where) as conn:
                conn.execute("DROP TABLE samples")
        elif how == "drop-column":
            with sqlite3.connect(where) as conn:
                conn.execute("ALTER TABLE samples DROP COLUMN text")
''')


def _gate(tmp_path: Path, url: str, breaks: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "break_store.py").write_text(BREAK_STORE)
    return _run(tmp_path, "--results-dir", str(tmp_path / "out"), "--store", url, "-k", "passes or verdict",
                "-p", "break_store", env={"STORE_BREAKS": breaks})


def _stored_nothing_at_the_end(tmp_path: Path, proc: subprocess.CompletedProcess[str], url: str, why: str) -> None:
    """Exit 11, the verdicts in the terminal and the JUnit file, the report kept, NOT STORED with why."""
    out = proc.stdout + proc.stderr
    assert proc.returncode == 11, out  # not 1: the FAILED rule is there, but the record is missing
    assert "Traceback" not in out and "INTERNALERROR" not in out, out
    table = out.split("vioconform verdicts")[1]
    assert "FAILED   verdict" in table and "PASSED   passes" in table, out
    assert f"NOT STORED: store {url}" in table and why in table, out
    assert "; the JUnit file and the report are the record of this run" in table, out
    assert "exit code: 11 (results not written or not stored)" in table
    cases = _cases(tmp_path / "out" / "junit.xml")
    assert (_kind(cases["passes"]), _kind(cases["verdict"])) == ("passed", "failure")
    assert (tmp_path / "out" / "report.html").is_file()


READ_ONLY = "the store cannot be written: its file or its file system is read-only"
FULL = "the disk that holds the store is full"
LOCKED = "another process held the store's lock for longer than the 0.5 s it is waited for"
DAMAGED = "a table or column vioconform writes is missing: the store is damaged"


@pytest.fixture
def fs(tmp_path: Path) -> Iterator[Path]:
    with tiny_fs(tmp_path / "fs") as where:
        yield where


def test_a_store_made_read_only_during_the_run_keeps_the_verdicts_and_exits_11(tmp_path: Path, fs: Path) -> None:
    url = f"sqlite:///{fs / 's.db'}"
    proc = _gate(tmp_path, url, f"read-only:{fs}")
    _stored_nothing_at_the_end(tmp_path, proc, url, f"(attempt to write a readonly database); {READ_ONLY}")


def test_a_store_whose_disk_fills_during_the_run_keeps_the_verdicts_and_exits_11(tmp_path: Path, fs: Path) -> None:
    url = f"sqlite:///{fs / 's.db'}"
    proc = _gate(tmp_path, url, f"full:{fs}")
    _stored_nothing_at_the_end(tmp_path, proc, url, FULL)


def test_a_store_locked_past_the_busy_timeout_at_the_end_keeps_the_verdicts_and_exits_11(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    proc = _gate(tmp_path, f"sqlite:///{db}", f"lock:{db}")
    _stored_nothing_at_the_end(tmp_path, proc, f"sqlite:///{db}", f"(database is locked); {LOCKED}")


@pytest.mark.parametrize(("damage", "why"), [
    ("drop-samples", "is damaged: it has vioconform's meta table (schema version 4) but no samples table"),
    ("drop-column", (f"the run could not be stored, and nothing of it was written (table samples has no column "
                     f"named text); {DAMAGED}"))])
def test_a_store_that_lost_a_table_or_column_during_the_run_keeps_the_verdicts_and_exits_11(
        tmp_path: Path, damage: str, why: str) -> None:
    db = tmp_path / "s.db"
    proc = _gate(tmp_path, f"sqlite:///{db}", f"{damage}:{db}")
    _stored_nothing_at_the_end(tmp_path, proc, f"sqlite:///{db}", why)


def _refused_before_any_rule(tmp_path: Path, proc: subprocess.CompletedProcess[str], url: str, why: str) -> None:
    out = proc.stdout + proc.stderr
    assert proc.returncode == 4, out
    assert f"ERROR: --store: store {url}: a run could not be stored in it (" in proc.stderr and why in proc.stderr, out
    assert "PASSED" not in out and "Traceback" not in out, out
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_read_only_store_is_a_usage_error_before_any_rule(tmp_path: Path, fs: Path) -> None:
    url = f"sqlite:///{fs / 's.db'}"
    Store(url).close()
    read_only(fs)
    proc = _run(tmp_path, "--results-dir", str(tmp_path / "out"), "--store", url, "-k", "passes")
    _refused_before_any_rule(tmp_path, proc, url, READ_ONLY)


def test_a_locked_store_is_a_usage_error_before_any_rule(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    Store(f"sqlite:///{db}").close()
    proc = _gate(tmp_path, f"sqlite:///{db}", f"lock-at-start:{db}")
    _refused_before_any_rule(tmp_path, proc, f"sqlite:///{db}", LOCKED)


def test_a_store_missing_a_column_is_a_usage_error_before_any_rule(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    Store(f"sqlite:///{db}").close()
    with sqlite3.connect(db) as conn:
        conn.execute("ALTER TABLE runs DROP COLUMN host")
    proc = _run(tmp_path, "--results-dir", str(tmp_path / "out"), "--store", f"sqlite:///{db}", "-k", "passes")
    _refused_before_any_rule(tmp_path, proc, f"sqlite:///{db}", f"(table runs has no column named host); {DAMAGED}")


def _tools_exit_2(tmp_path: Path, url: str, why: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``reports.store import`` and ``reports.compare DIR DIR`` on the store: one line each, exit 2."""
    a, b = write_run(tmp_path, "20261120-020000", healthy()), write_run(tmp_path, "20261121-020000", healthy())
    assert store_module.main(["--store", url, "import", str(a)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: store {url}: ") and why in err and err.count("\n") == 1, err
    assert compare.main(["--store", url, str(a), str(b)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: store {url}: ") and why in err and err.count("\n") == 1, err


def test_the_tools_on_a_locked_store_say_so_and_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "s.db"
    Store(f"sqlite:///{db}").close()
    monkeypatch.setattr(connection, "STORE_BUSY_TIMEOUT_S", 0.5)
    holder = sqlite3.connect(db, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        _tools_exit_2(tmp_path, f"sqlite:///{db}", LOCKED, capsys)
    finally:
        holder.close()


def test_the_tools_on_a_store_missing_a_column_say_so_and_exit_2(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """(A missing table: tests/unit/test_store_damage.py.)"""
    db = tmp_path / "s.db"
    Store(f"sqlite:///{db}").close()
    with sqlite3.connect(db) as conn:
        conn.execute("ALTER TABLE samples DROP COLUMN text")
    _tools_exit_2(tmp_path, f"sqlite:///{db}", f"(table samples has no column named text); {DAMAGED}", capsys)


def test_the_tools_on_a_read_only_store_say_so_and_exit_2(tmp_path: Path, fs: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{fs / 's.db'}"
    Store(url).close()
    read_only(fs)
    _tools_exit_2(tmp_path, url, READ_ONLY, capsys)


def test_a_new_store_on_a_full_disk_is_refused_and_leaves_nothing(tmp_path: Path, fs: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """The refusal left an empty store file behind (made with the results' mode before SQLite wrote)."""
    fill(fs)
    url = f"sqlite:///{fs / 's.db'}"
    assert store_module.main(["--store", url, "import", str(write_run(tmp_path, "20261120-020000", healthy()))]) == 2
    assert sorted(p.name for p in fs.iterdir()) == ["filler"]  # no empty s.db, no journal
    err = capsys.readouterr().err
    assert err.startswith(f"error: store {url} cannot be opened: database or disk is full; {FULL}"), err
    proc = _run(tmp_path, "--results-dir", str(tmp_path / "out"), "--store", url, "-k", "passes")
    assert proc.returncode == 4 and f"--store: store {url} cannot be opened: database or disk is full" in proc.stderr, \
        proc.stdout + proc.stderr
    assert sorted(p.name for p in fs.iterdir()) == ["filler"] and not (tmp_path / "out").exists()


@pytest.mark.parametrize(("said", "remedy"), [
    ("permission denied for table runs", READ_ONLY),
    ("cannot execute INSERT in a read-only transaction", READ_ONLY),
    ('could not extend file "base/16384/16390": No space left on device', FULL),
    ("canceling statement due to statement timeout", "another process held the store's lock for longer than"),
    ('relation "runs" does not exist', DAMAGED),
    ('column "host" of relation "runs" does not exist', DAMAGED),
    ('database "nightly" does not exist', "check the URL, that the database is reachable"),  # not a damaged store
    ('role "ci" does not exist', "check the URL, that the database is reachable"),
])
def test_what_postgresql_says_gets_its_remedy(said: str, remedy: str) -> None:
    assert remedy in connection.connect_remedy(sa.engine.make_url("postgresql://ci@db/nightly"), said)
