"""``python -m reports.compare``: every argument is read or refused. An option the chosen mode would
ignore, a run reference that names no run, or a run id ``int()`` cannot read is a usage error (exit 2,
argparse's, before any store is opened), with a sentence that says what to do."""

from __future__ import annotations

from pathlib import Path

import pytest

from reports.store import RUN_ID_KEY, parse_run_id
from reports.store.compare import main
from tests.unit.test_store import SUITE, healthy, write_run


def _usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2, err
    return err.splitlines()[-1]


@pytest.fixture
def junit(tmp_path: Path) -> Path:
    return write_run(tmp_path, "20261120-020000", healthy()) / "junit.xml"


def test_last_and_series_with_a_junit_file(junit: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """``compare --last 2 --series S FILE`` printed "(the runs do not differ)" and exited 0: the file
    made it the side-by-side printer, which read neither option."""
    monkeypatch.chdir(tmp_path)
    err = _usage_error(["--last", "2", "--series", "qemu_nightly", str(junit)], capsys)
    assert ("--last, --series are for a comparison of stored runs, and " f"{junit} is a file; a comparison reads "
            f"stored runs: give its results directory ({junit.parent}) or its run id") in err
    assert "--last is for a comparison of stored runs" in _usage_error(["--last", "2", str(junit)], capsys)
    assert not (tmp_path / "results").exists()  # no store opened, none created


@pytest.mark.parametrize("option", [["--last", "2"], ["--series", "qemu_nightly"], ["--store", "sqlite:///x.db"],
                                    ["--min-effect", "0.2"], ["--alpha", "0.01"], ["--junit", "c.xml"]])
def test_tested_reads_no_comparison_option(option: list[str], junit: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = _usage_error(["--tested", str(junit), str(junit), *option], capsys)
    assert (f"--tested prints JUnit files side by side and compares no stored runs, so {option[0]} would be "
            "ignored: leave it out, or drop --tested") in err
    err = _usage_error([str(junit), str(junit), *option], capsys)  # files alone: the same printer
    assert f"{option[0]} is for a comparison of stored runs, and {junit} is a file" in err


def test_one_junit_file_is_not_a_side_by_side(junit: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One file "did not differ" from nothing."""
    assert "give at least two" in _usage_error([str(junit)], capsys)
    assert "give at least two" in _usage_error(["--tested", str(junit)], capsys)
    assert main([str(junit), str(junit)]) == 0  # two: the printer


def test_all_is_only_for_tested(junit: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = _usage_error(["1", "2", "--all"], capsys)
    assert "--all prints the equal rows of --tested (JUnit files side by side) too" in err
    assert "leave --all out, or give --tested and junit.xml files" in err


def test_a_file_among_runs(junit: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = _usage_error([str(junit.parent), str(junit)], capsys)
    assert f"{junit} is a file; a comparison reads stored runs: give its results directory ({junit.parent})" in err


@pytest.mark.parametrize("ref", ["²", "١٢", "1²"])
def test_a_run_id_int_cannot_read(ref: str, capsys: pytest.CaptureFixture[str]) -> None:
    """'²'.isdigit() is true and int('²') raises: it was a traceback."""
    assert parse_run_id(ref) is None
    err = _usage_error(["1", ref], capsys)
    assert f"{ref}: neither a run id in the store (a run id is written in the digits 0-9) nor a results " \
           "directory" in err
    assert "a run id is written" in _usage_error(["--last", "2", ref], capsys)


def test_no_runs_and_too_many(capsys: pytest.CaptureFixture[str]) -> None:
    assert "give two runs" in _usage_error([], capsys)
    assert "give two runs" in _usage_error(["1", "2", "3"], capsys)
    assert "at most one run" in _usage_error(["--last", "2", "1", "2"], capsys)
    assert "give it with --last and no RUN" in _usage_error(["--last", "2", "--series", "s", "1"], capsys)


def test_one_run_twice(tmp_path: Path, store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A copy of a stored results directory is the same run (its run id): compared with itself, it
    printed "No regression." whatever the copy's numbers said."""
    a = write_run(tmp_path, "20261120-020000", healthy(), suite={**SUITE, RUN_ID_KEY: "1c0ffee0-run-one"})
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "junit.xml").write_bytes((a / "junit.xml").read_bytes())
    assert main(["--store", store_url, str(a), str(copy)]) == 2
    assert "both arguments name run 1 (" in capsys.readouterr().err
    assert main(["--store", store_url, "1", "1"]) == 2
    assert "there is nothing to compare; give two different runs" in capsys.readouterr().err
