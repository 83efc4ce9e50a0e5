"""Outputs the store would lose or that would overwrite a stored run's record.

- An output on a SQLite store's journal (``STORE.db-journal``, ``-wal``, ``-shm``) was reported
  written, then deleted by SQLite's next write: refused, by the suite (every output option) and
  by the tools (``reports.compare --junit``, ``reports.trend -o``), before anything is written.
- ``reports.compare --junit`` and ``reports.trend -o`` inside any stored run's results directory
  replaced that run's junit.xml or report.html (compare refused only its two runs' directories), as
  could the suite's ``--junit-xml``: refused.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from reports.store import Store, compare, trend
from tests.runs.test_gate_plugin import _run
from tests.unit.test_store import healthy, write_run

SIDE = ("-journal", "-wal", "-shm")


@pytest.mark.parametrize(("option", "suffix"), [("--junit-xml", "-journal"), ("--save-baseline", "-wal"),
                                                ("--results-dir", "-shm"), ("--log-file", "-journal")])
def test_an_output_of_the_suite_on_the_stores_journal_is_a_usage_error(tmp_path: Path, option: str,
                                                                       suffix: str) -> None:
    db = tmp_path / "s.db"
    target = tmp_path / f"s.db{suffix}"
    args = ["--store", f"sqlite:///{db}", option, str(target), "-k", "passes"]
    proc = _run(tmp_path, *args, *([] if option == "--results-dir" else ["--results-dir", str(tmp_path / "out")]))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 4, out
    what = {"-journal": "rollback journal", "-wal": "write-ahead log", "-shm": "write-ahead log index"}[suffix]
    assert (f"ERROR: {option} {target} is the store's {what} (SQLite creates and deletes it beside s.db while it "
            f"writes): the output would be deleted or overwritten; give {option} a path of its own") in proc.stderr, out
    assert not target.exists() and not db.exists() and "PASSED" not in out


def test_the_default_stores_journal_is_refused_too(tmp_path: Path) -> None:
    target = tmp_path / "results" / "vioconform.db-journal"
    proc = _run(tmp_path, "--junit-xml", str(target), "--results-dir", str(tmp_path / "out"), "-k", "passes")
    assert proc.returncode == 4 and f"--junit-xml {target} is the store's rollback journal" in proc.stderr, \
        proc.stdout + proc.stderr


@pytest.mark.parametrize("suffix", SIDE)
def test_the_tools_refuse_an_output_on_the_stores_journal(tmp_path: Path, store_url: str, suffix: str,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / f"vioconform.db{suffix}"
    for tool, args in ((compare.main, ["1", "2", "--junit", str(target)]), (trend.main, ["-o", str(target)])):
        with pytest.raises(SystemExit) as e:  # argparse's usage error, before the store is opened
            tool(["--store", store_url, *args])
        err = capsys.readouterr().err
        assert e.value.code == 2 and f"{target} is the store's " in err and "give " in err, err
    assert not target.exists()


def _two_stored_runs_and_another(tmp_path: Path, store_url: str) -> tuple[Path, Path, Path]:
    """Runs 1 and 2 (compared), and run 3 (stored, not compared), each in its results directory."""
    dirs = [write_run(tmp_path, f"2026112{i}-020000", healthy()) for i in range(3)]
    store = Store(store_url)
    try:
        for d in (dirs[0], dirs[1], dirs[2]):
            store.import_dir(d)
    finally:
        store.close()
    return dirs[0], dirs[1], dirs[2]


def test_compare_and_trend_never_write_into_any_stored_runs_directory(tmp_path: Path, store_url: str,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    _, _, other = _two_stored_runs_and_another(tmp_path, store_url)
    kept = {p.name: p.read_bytes() for p in other.iterdir()}
    (other / "report.html").write_text("run 3's own report")
    kept["report.html"] = b"run 3's own report"
    for tool, args, target in ((compare.main, ["1", "2", "--junit"], other / "junit.xml"),
                               (trend.main, ["--run", "2", "-o"], other / "report.html"),
                               (trend.main, ["--run", "2", "-o"], other / "sub" / "trend.html")):
        assert tool(["--store", store_url, *args, str(target)]) == 2, args
        err = capsys.readouterr().err
        assert (f"error: {args[-1]} {target} is inside the results directory of run 3 ({other}), a stored run: "
                f"writing it there would replace that run's files (its record); give {args[-1]} a path outside every "
                "stored run's results directory") in err, err
    assert {p.name: p.read_bytes() for p in other.iterdir()} == kept
    assert compare.main(["--store", store_url, "1", "2", "--junit", str(tmp_path / "c.xml")]) == 0  # outside: written
    assert (tmp_path / "c.xml").is_file()


def test_the_suite_never_writes_into_a_stored_runs_directory(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    stored = write_run(tmp_path, "20261120-020000", healthy())
    store = Store(f"sqlite:///{db}")
    store.import_dir(stored)
    store.close()
    kept = (stored / "junit.xml").read_bytes()
    for args, option, target in ((["--junit-xml", str(stored / "junit.xml"), "--results-dir", str(tmp_path / "out")],
                                  "--junit-xml", stored / "junit.xml"),
                                 (["--results-dir", str(stored / "again")], "--results-dir", stored / "again")):
        proc = _run(tmp_path, "--store", f"sqlite:///{db}", "-k", "passes", *args)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 4, out
        assert f"ERROR: {option} {target} is inside the results directory of run 1 ({stored}), a stored run" in \
            proc.stderr, out
    assert (stored / "junit.xml").read_bytes() == kept and not (stored / "again").exists()
    assert not (tmp_path / "out").exists()


def _unstored_run(tmp_path: Path) -> Path:
    """A run's results directory no store holds (a copy, a run with --store none): junit.xml beside
    the run's own phases.json and raw/."""
    d = write_run(tmp_path, "20261121-020000", healthy())
    (d / "phases.json").write_text("{}")
    (d / "raw").mkdir()
    (d / "report.html").write_text("the run's own report")
    return d


def test_compare_and_trend_never_write_into_a_runs_directory_no_store_holds(
        tmp_path: Path, store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    _two_stored_runs_and_another(tmp_path / "stored", store_url)
    run = _unstored_run(tmp_path)
    kept = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    for tool, args, target in ((compare.main, ["1", "2", "--junit"], run / "junit.xml"),
                               (trend.main, ["--run", "2", "-o"], run / "report.html"),
                               (trend.main, ["--run", "2", "-o"], run / "raw" / "trend.html")):
        with pytest.raises(SystemExit) as e:  # argparse's usage error, before the store is opened
            tool(["--store", store_url, *args, str(target)])
        err = capsys.readouterr().err
        assert e.value.code == 2, err
        assert (f"{args[-1]} {target} is inside {run}, the results directory of a vioconform run: writing it there "
                f"would replace that run's files; give {args[-1]} a path outside it") in err, err
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == kept
    assert not (run / "raw" / "trend.html").exists()


def test_the_suite_never_writes_into_a_runs_directory_no_store_holds(tmp_path: Path) -> None:
    run = _unstored_run(tmp_path)
    kept = (run / "junit.xml").read_bytes()
    proc = _run(tmp_path, "--store", "none", "-k", "passes", "--junit-xml", str(run / "junit.xml"),
                "--results-dir", str(tmp_path / "out"))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 4, out
    assert f"--junit-xml {run / 'junit.xml'} is inside {run}, the results directory of a vioconform run" in out, out
    assert (run / "junit.xml").read_bytes() == kept and not (tmp_path / "out").exists()
