"""The exit-code table (reports/exitcodes.py), a CI contract: 1 only for a rule that FAILED,
10 for harness errors where none failed, 11 for results not written or stored, 12 for a run that judged
nothing (or not a rule --require names); pytest's own codes
(2 interrupted, 4 usage, 5 nothing collected, 6 too many warnings) stand. Before, an errors-only run exited 1 like a
failure and a store that failed exited 3, pytest's internal error."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from reports.exitcodes import Exit, run_exit_code
from reports.store import Store
from reports.store.compare import main as compare
from tests.runs.test_gate_plugin import _cases, _kind, _run

OK, FAILED = pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED


@pytest.mark.parametrize(("pytest_status", "outcomes", "complete", "not_recorded", "code"), [
    (OK, ["passed", "skipped"], True, False, 0),
    (FAILED, ["passed", "failed", "error"], True, False, 1),
    (FAILED, ["passed", "error"], True, False, 10),
    (FAILED, ["error"], False, False, 10),  # no rule reached a verdict: incomplete
    (FAILED, ["failed", "not run"], False, False, 1),  # -x after a failure
    (FAILED, ["error", "not run"], False, False, 10),  # -x after an error
    (FAILED, ["passed"], True, False, 10),  # pytest saw a failure that is no rule's verdict: never a pass
    (OK, ["passed"], True, True, 11),
    (FAILED, ["failed"], True, True, 11),  # the record CI reads is missing: that first
    (pytest.ExitCode.INTERRUPTED, ["passed", "error", "not run"], False, True, 2),
    (pytest.ExitCode.USAGE_ERROR, [], True, False, 4),
    (pytest.ExitCode.NO_TESTS_COLLECTED, [], True, False, 5),
    (6, ["passed"], True, False, 6),  # pytest 9's MAX_WARNINGS_ERROR
    (OK, ["skipped", "skipped"], True, False, 12),  # judged nothing: no pass
    (OK, ["skipped"], True, True, 11),
], ids=["passed", "failed", "errors", "no-verdict", "x-after-failure", "x-after-error", "pytest-failure",
        "not-written", "failed-not-written", "interrupted", "usage", "nothing", "max-warnings", "skips-alone", "skips-not-written"])
def test_the_table(pytest_status: int, outcomes: list[str], complete: bool, not_recorded: bool, code: int) -> None:
    assert run_exit_code(pytest_status, outcomes, complete, not_recorded) == code


@pytest.mark.parametrize(("pytest_status", "outcomes", "code"), [
    (OK, ["passed", "skipped"], 12),
    (FAILED, ["failed", "skipped"], 1),
    (FAILED, ["error", "skipped"], 10),
], ids=["passed", "failed", "error"])
def test_a_required_rule_without_a_verdict(pytest_status: int, outcomes: list[str], code: int) -> None:
    """``--require`` (its rule SKIPPED, NOT RUN or not selected): 12, after a verdict (1) and a harness error (10)."""
    assert run_exit_code(pytest_status, outcomes, True, False, ["queue-depth: SKIPPED on default"]) == code
    assert run_exit_code(pytest_status, outcomes, True, False) == (0 if code == 12 else code)


def test_pytest_never_returns_the_suites_own_codes() -> None:
    assert {Exit.HARNESS_ERROR, Exit.NOT_RECORDED, Exit.NO_VERDICT}.isdisjoint({c.value for c in pytest.ExitCode})
    assert {c.value for c in pytest.ExitCode} <= {e.value for e in Exit}  # each of pytest's is in the table


def test_the_table_spells_pytests_codes_with_pytests_numbers() -> None:
    """reports/ imports no pytest: the table writes pytest's codes out itself, with pytest's numbers."""
    pytests = {Exit.PASSED: "OK", Exit.RULE_FAILED: "TESTS_FAILED", Exit.INTERRUPTED: "INTERRUPTED",
               Exit.INTERNAL_ERROR: "INTERNAL_ERROR", Exit.USAGE_ERROR: "USAGE_ERROR",
               Exit.NO_TESTS: "NO_TESTS_COLLECTED"}
    for mine, name in pytests.items():
        assert mine.value == pytest.ExitCode[name].value, name


def test_a_run_says_its_exit_code_and_errors_alone_are_not_a_failure(tmp_path: Path) -> None:
    proc = _run(tmp_path, "--results-dir", str(tmp_path / "out"), "-k", "fio_error or harness_assert or passes")
    assert proc.returncode == 10, proc.stdout + proc.stderr
    assert "exit code: 10 (harness error (a rule reached no verdict), no rule failed)" in proc.stdout
    proc = _run(tmp_path, "--results-dir", str(tmp_path / "out2"), "-k", "fio_error or verdict")
    assert proc.returncode == 1 and "exit code: 1 (a rule FAILED)" in proc.stdout, proc.stdout + proc.stderr
    table = proc.stdout.split("vioconform verdicts")[1]
    assert "FAILED   verdict                default  [blame: unknown] verdict failed on default" in table, table


def test_the_results_directory_keeps_its_own_junit_when_junit_xml_is_elsewhere(tmp_path: Path,
                                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Before, --junit-xml took the run's only JUnit file away from its results directory, and
    ``compare DIR DIR`` found "no junit.xml in it"."""
    for name in ("a", "b"):
        proc = _run(tmp_path, "--results-dir", str(tmp_path / name), "--junit-xml", str(tmp_path / f"ci-{name}.xml"),
                    "--store", "none", "-k", "passes or verdict")
        assert proc.returncode == 1, proc.stdout + proc.stderr
        own, ci = tmp_path / name / "junit.xml", tmp_path / f"ci-{name}.xml"
        assert own.read_text() == ci.read_text()
        assert _kind(_cases(own)["verdict"]) == "failure"
        out = ET.parse(own).getroot().find(".//testcase[@name='verdict[default]']/system-out")
        assert out is not None and out.text == (f"report section: {tmp_path / name / 'report.html'}#verdict--default\n"
                                                f"raw data: {tmp_path / name / 'raw' / 'default'}")
        assert 'id="verdict--default"' in (tmp_path / name / "report.html").read_text()
    url = f"sqlite:///{tmp_path / 'c.db'}"
    Store(url).close()
    assert compare(["--store", url, str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    assert "Regressions (passed -> failed): 0" in capsys.readouterr().out


def test_compare_with_a_run_of_errors_only_is_no_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before, ``compare A B`` where every rule of B was an ERROR exited 0 ("Regressions: 0"): nothing
    had been compared, and a script read it as "as good as A"."""
    a = _run(tmp_path, "--results-dir", str(tmp_path / "a"), "--store", "none", "-k", "passes")
    b = _run(tmp_path, "--results-dir", str(tmp_path / "b"), "--store", "none", "-k", "fio_error")
    assert (a.returncode, b.returncode) == (0, 10), a.stdout + b.stdout
    url = f"sqlite:///{tmp_path / 'c.db'}"
    Store(url).close()
    assert compare(["--store", url, str(tmp_path / "a"), str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert "run 2 reached no verdict (each rule an error, a skip or not run): there is nothing to compare" in err, err
    assert compare(["--store", url, "2", "1"]) == 2  # as a baseline it is incomplete: refused as before
