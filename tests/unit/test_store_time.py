"""When a run started, whatever the machine's time zone: a run writes its start (UTC) and its
machine into its JUnit file (the suite's ``timestamp`` and ``hostname``), the store keeps both and
orders the runs by that start (``compare --last``, ``trend``, ``--baseline last``). A JUnit file
without a timestamp still reads: its results directory's name as local time, else the file's
time less the run's duration, and ``import`` says which."""

from __future__ import annotations

import datetime as dt
import os
import socket
import sqlite3
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from reports import store as store_module
from reports.junit import write_junit
from reports.records import RunStatus
from reports.store import Store, compare, read_results_dir
from tests.runs.test_gate_plugin import _run
from tests.unit.test_store import SUITE, healthy

#: Two zones on either side of UTC: a results directory's name is local time, 9 h ahead or 5 h behind.
TOKYO, NEW_YORK = "Asia/Tokyo", "America/New_York"


@pytest.fixture
def set_zone(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], None]]:
    """Set this process's time zone (``set_zone(NAME)``); the test's own again afterwards."""

    def set_to(name: str) -> None:
        monkeypatch.setenv("TZ", name)
        time.tzset()

    yield set_to
    monkeypatch.undo()
    time.tzset()


def _suite(junit: Path) -> ET.Element:
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    return suite


def test_runs_in_two_time_zones_are_ordered_by_when_they_started(tmp_path: Path) -> None:
    """A run in Tokyo, then one in New York, into one store, each in its default results/<local time>:
    the second is the newest (read as UTC, the directories' names put Tokyo's 14 h later)."""
    db = tmp_path / "store.db"
    dirs: list[Path] = []
    for zone_name in (TOKYO, NEW_YORK):
        before = dt.datetime.now(dt.UTC).replace(microsecond=0)
        proc = _run(tmp_path, "-k", "passes", "--store", f"sqlite:///{db}", env={"TZ": zone_name})
        after = dt.datetime.now(dt.UTC)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        (made,) = set((tmp_path / "results").glob("2*")) - set(dirs)
        dirs.append(made)
        suite = _suite(made / "junit.xml")
        stamp = dt.datetime.fromisoformat(suite.get("timestamp", ""))
        assert stamp.utcoffset() == dt.timedelta(0) and before <= stamp <= after, (suite.get("timestamp"), before)
        assert suite.get("hostname") == socket.gethostname()
    store = Store(f"sqlite:///{db}", create=False)
    try:
        runs = store.runs()
        assert [r.source for r in runs] == [str(d) for d in dirs]  # Tokyo's first: it started first
        assert all(r.started_from == "timestamp" and r.host == socket.gethostname() for r in runs)
        assert runs[0].started is not None and runs[1].started is not None and runs[0].started <= runs[1].started
        (newest,) = store.last_runs(runs[0], 1)
    finally:
        store.close()
    assert newest.source == str(dirs[1])
    assert compare.main(["--store", f"sqlite:///{db}", "--last", "2"]) == 0  # the newest, New York's, against Tokyo's


def _without_timestamp(directory: Path, duration_s: float = 0.0) -> Path:
    """A results directory whose junit.xml has no timestamp (written before runs recorded it)."""
    directory.mkdir(parents=True)
    records = healthy()
    for r in records:
        r.duration_s = duration_s / len(records)
    write_junit(records, directory / "junit.xml", suite_properties=SUITE, status=RunStatus())
    assert _suite(directory / "junit.xml").get("timestamp") is None
    return directory


@pytest.mark.parametrize(("zone_name", "utc"), [(TOKYO, "2026-11-22 17:00:00"), (NEW_YORK, "2026-11-23 07:00:00")])
def test_a_junit_file_without_a_timestamp_reads_its_directory_name_as_local_time(
        tmp_path: Path, set_zone: Callable[[str], None], zone_name: str, utc: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    set_zone(zone_name)
    run_dir = _without_timestamp(tmp_path / "20261123-020000")
    run = read_results_dir(run_dir)
    assert (str(run.started), run.started_from, run.host) == (utc, "directory name", None)
    assert store_module.main(["--store", f"sqlite:///{tmp_path / 's.db'}", "import", str(run_dir)]) == 0
    said = capsys.readouterr().out
    assert (f"; started {utc} UTC, from the results directory's name, read as local time ({zone_name}): the "
            "JUnit file has no timestamp") in said, said
    assert store_module.main(["--store", f"sqlite:///{tmp_path / 's.db'}", "list"]) == 0
    assert capsys.readouterr().out.rstrip("\n").split("\t")[1::6] == [utc, "directory name"]


def test_without_a_timestamp_or_a_dated_directory_the_start_is_the_files_time_less_the_duration(
        tmp_path: Path, set_zone: Callable[[str], None]) -> None:
    set_zone(TOKYO)
    run_dir = _without_timestamp(tmp_path / "nightly-run", duration_s=600.0)
    end = dt.datetime(2026, 11, 23, 2, 10, tzinfo=dt.UTC).timestamp()
    os.utime(run_dir / "junit.xml", (end, end))
    run = read_results_dir(run_dir)
    assert (str(run.started), str(run.finished), run.started_from) == (
        "2026-11-23 02:00:00", "2026-11-23 02:10:00", "file time")


def test_a_timestamp_with_another_offset_is_stored_in_utc(tmp_path: Path) -> None:
    """The old reader dropped the offset: 11:00+09:00 was stored as 11:00, nine hours late."""
    run_dir = _without_timestamp(tmp_path / "20261123-110000")
    junit = run_dir / "junit.xml"
    junit.write_text(junit.read_text().replace('<testsuite ', '<testsuite timestamp="2026-11-23T11:00:00+09:00" ', 1))
    run = read_results_dir(run_dir)
    assert (str(run.started), run.started_from) == ("2026-11-23 02:00:00", "timestamp")


def test_runs_stored_before_schema_4_read_without_a_host_or_the_start_s_source(tmp_path: Path) -> None:
    db = tmp_path / "v3.db"
    url = f"sqlite:///{db}"
    Store(url).close()
    with sqlite3.connect(db) as conn:
        conn.execute("ALTER TABLE runs DROP COLUMN host")
        conn.execute("ALTER TABLE runs DROP COLUMN started_from")
        conn.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
        conn.execute("INSERT INTO runs (id, series, started, fingerprint, options, revision, complete) VALUES "
                     "(1, 's', '2026-11-20 02:00:00.000000', '{}', '{}', '', 1)")
    before = db.read_bytes()
    store = Store(url, create=False)
    try:
        (run,) = store.runs()
        assert (str(run.started), run.host, run.started_from) == ("2026-11-20 02:00:00", None, None)
    finally:
        store.close()
    assert db.read_bytes() == before  # read as it is
    Store(url).close()  # a command that writes brings it up to date
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT host, started_from FROM runs").fetchall() == [(None, None)]
        assert conn.execute("SELECT value FROM meta").fetchone() == (str(store_module.SCHEMA_VERSION),)
