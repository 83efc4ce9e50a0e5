"""A damaged store and a run id that is none: a clear error, never a traceback. A ``meta.schema_version``
that is no version (``abc``, ``''``, ``3.0``, ``-1``), or a ``meta`` table without the runs table,
gave a ValueError or an SQL error's traceback in ``list``, ``compare`` and ``trend`` (exit 1) and an
INTERNALERROR in the suite; ``--baseline ²`` (``str.isdigit`` is true, ``int()`` fails) an INTERNALERROR."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from reports import store
from reports.store import SCHEMA_VERSION, Store, StoreError, compare, parse_run_id, trend
from reports.store.baseline import resolve_baseline
from tests.runs.test_gate_plugin import _run
from tests.unit.test_store import SERIES, healthy, write_run

DAMAGED_VERSIONS = ("abc", "", "3.0", "-1")


def _store_with_version(db: Path, version: str) -> str:
    url = f"sqlite:///{db}"
    Store(url).close()
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (version,))
    return url


def _meta_without_runs(db: Path) -> str:
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE meta (key VARCHAR(64) PRIMARY KEY, value VARCHAR(256) NOT NULL)")
        conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
    return f"sqlite:///{db}"


def _tools_say(url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """What list, compare and trend print on the store at ``url``, each asserted to exit 2."""
    said = []
    for name, tool, args in (("list", store.main, ["list"]), ("import", store.main, ["import", str(tmp_path / "r")]),
                             ("compare", compare.main, ["1", "2"]), ("compare --last", compare.main, ["--last", "2"]),
                             ("trend", trend.main, ["-o", str(tmp_path / "t.html")])):
        assert tool(["--store", url, *args]) == 2, name
        err = capsys.readouterr().err
        assert err.startswith("error: store ") and err.count("\n") == 1, (name, err)
        said.append(err)
    return said


@pytest.mark.parametrize("version", DAMAGED_VERSIONS, ids=repr)
def test_a_damaged_schema_version_is_named_by_every_tool(tmp_path: Path, version: str,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    write_run(tmp_path, "r", healthy())
    db = tmp_path / "s.db"
    url = _store_with_version(db, version)
    before = db.read_bytes()
    for err in _tools_say(url, tmp_path, capsys):
        assert (f"error: store {url} is damaged: its meta table's schema_version is {version!r}, not a schema "
                f"version (a whole number from 1; this vioconform writes {SCHEMA_VERSION}). Nothing in it was "
                "changed; restore it from a backup, or give another store") in err, err
    assert db.read_bytes() == before
    assert not (tmp_path / "t.html").exists()


def test_a_meta_table_without_the_runs_table_is_named_by_every_tool(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    write_run(tmp_path, "r", healthy())
    db = tmp_path / "s.db"
    url = _meta_without_runs(db)
    before = db.read_bytes()
    for err in _tools_say(url, tmp_path, capsys):
        assert (f"error: store {url} is damaged: it has vioconform's meta table (schema version {SCHEMA_VERSION}) "
                "but no runs, verdicts, metrics, samples tables. Nothing in it was changed") in err, err
    assert db.read_bytes() == before


@pytest.mark.parametrize("damage", ["abc", "no runs table"])
def test_a_damaged_store_is_a_usage_error_of_the_suite(tmp_path: Path, damage: str) -> None:
    db = tmp_path / "s.db"
    url = _meta_without_runs(db) if damage == "no runs table" else _store_with_version(db, damage)
    proc = _run(tmp_path, "--results-dir", str(tmp_path / "out"), "--store", url, "-k", "passes")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 4, out
    assert f"ERROR: --store: store {url} is damaged: " in proc.stderr and "INTERNALERROR" not in out, out
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_only_ascii_digits_are_a_run_id() -> None:
    assert [parse_run_id(t) for t in ("12", "0012", "²", "٣", "1²", "-1", "+1", " 1", "", "1.0")] == [
        12, 12, None, None, None, None, None, None, None, None]


def test_a_run_id_of_other_digits_names_no_run(store_url: str) -> None:
    """'²' is a digit to str.isdigit and no number to int(); '٣' is 3 to int(), but no id list printed."""
    for ref in ("²", "٣"):
        with pytest.raises(StoreError, match=rf"^--baseline {ref}: neither a stored run id, a results directory, "
                                             r"'last', nor a baseline file"):
            resolve_baseline(ref, store_url, SERIES)


def test_baseline_of_a_superscript_digit_is_a_usage_error_with_a_sentence(tmp_path: Path) -> None:
    proc = _run(tmp_path, "--results-dir", str(tmp_path / "out"), "--store", f"sqlite:///{tmp_path / 's.db'}",
                "--baseline", "²", "-k", "passes")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 4, out
    assert "ERROR: --baseline ²: neither a stored run id, a results directory, 'last', nor a baseline file" in \
        proc.stderr and "INTERNALERROR" not in out, out
