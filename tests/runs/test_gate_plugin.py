"""The real vioconform plugin in a pytest run of small rule tests (no guest): what each kind
of ending becomes in the verdict table, the JUnit file and the exit code."""

from __future__ import annotations

import stat
import subprocess
import sys
import textwrap
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from bench.suite_run import FOREGROUND

ROOT = Path(__file__).resolve().parents[2]

CONFTEST = textwrap.dedent('''
    import errno
    import os

    import pytest

    from fixtures import PLUGIN_MODULES

    pytest_plugins = ["fixtures.options", *PLUGIN_MODULES]

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish():
        """GATE_FULL_DISK=NAME: the disk is full for any file whose name contains NAME.
        GATE_BREAK_STORE=PATH: the store's file is replaced by one that is no database."""
        broken = os.environ.get("GATE_BREAK_STORE")
        if broken:
            with open(broken, "wb") as f:
                f.write(b"not a database " * 100)
        full = os.environ.get("GATE_FULL_DISK")
        if not full:
            return
        real_write = os.write

        def write(fd, data):
            if full in os.readlink(f"/proc/self/fd/{fd}"):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return real_write(fd, data)

        os.write = write
''')
#: Harness code outside the rules' directory: its failures are not verdicts.
HARNESS = textwrap.dedent('''
    def measure():
        result = None
        assert result is not None  # a harness bug, not a rule's verdict
''')
RULES = textwrap.dedent('''
    import os
    import signal
    from pathlib import Path

    import pytest

    import harness
    from fixtures.run_properties import run_properties
    from fixtures.setup_errors import setup_step
    from model.errors import GuestDied, GuestDiedEarlier
    from suites.assertions import fail_unless

    @pytest.mark.rule("verdict")
    def test_verdict(record):
        record.add(qd32_host_depth=0.8)
        fail_unless(False, "verdict", "default", "host saw 0.8", Path("raw"))

    @pytest.mark.rule("own-assert")
    def test_own_assert(record):
        assert 1 == 2

    @pytest.mark.rule("fio-error")
    def test_fio_error(record):
        raise RuntimeError("fio exited 1: no space left in guest")

    @pytest.mark.rule("harness-assert")
    def test_harness_assert(record):
        harness.measure()

    @pytest.mark.rule("passes")
    def test_passes(record, request):
        record.add(qd1_iops=150)
        # what a session fixture learns about the run (which fio ran); never replaces the run's own
        run_properties(request.config).update(fio_version="fio-3.33", fio_origin="image", hypervisor="not-this")

    @pytest.mark.rule("stopped")
    def test_stopped(record):
        if os.environ.get("GATE_SIGNAL"):
            os.kill(os.getpid(), getattr(signal, os.environ["GATE_SIGNAL"]))
        if os.environ.get("GATE_GUEST_DIES"):
            raise GuestDied("the guest died 3.0 s into the command 'fio': its kernel panicked", "Kernel panic")

    @pytest.mark.rule("after")
    def test_after(record):
        if os.environ.get("GATE_GUEST_DIES"):
            raise GuestDiedEarlier("the guest died earlier: its kernel panicked", "Kernel panic")

    @pytest.fixture
    def guest_of_a_set_up():
        with setup_step():
            if os.environ.get("GATE_GUEST_DIES"):
                raise GuestDiedEarlier("the guest died earlier: its kernel panicked")

    @pytest.mark.rule("after-setup")
    def test_after_setup(record, guest_of_a_set_up):
        pass
''')


def _run(tmp_path: Path, *args: str, env: dict[str, str] | None = None,
         rules: str = RULES, foreground: bool = False) -> subprocess.CompletedProcess[str]:
    """The plugin in a pytest run of ``rules`` (a test module; by default the kinds of ending above).
    ``foreground``: SIGINT as a terminal's foreground job has it (a test process may have it ignored,
    and a child inherits that: Python then never raises KeyboardInterrupt)."""
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "harness.py").write_text(HARNESS)
    (tmp_path / "rules").mkdir(exist_ok=True)
    (tmp_path / "rules" / "test_rules.py").write_text(rules)
    python = (sys.executable, "-c", FOREGROUND, sys.executable) if foreground else (sys.executable,)
    return subprocess.run([*python, "-m", "pytest", "rules", "-p", "no:cacheprovider", "--rootdir",
                           str(tmp_path), "-o", "pythonpath=.", *args],
                          check=False, cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": f"{ROOT}:{tmp_path}", "PATH": "/usr/bin:/bin", **(env or {})})


def _cases(junit: Path) -> dict[str, ET.Element]:
    return {c.get("name", "").split("[")[0]: c for c in ET.parse(junit).getroot().iter("testcase")}


def _message(case: ET.Element, kind: str) -> str:
    """The message of a test case's <failure>, <error> or <skipped> element."""
    elem = case.find(kind)
    assert elem is not None, f"{case.get('name')} has no <{kind}>"
    return elem.get("message", "")


def _body(case: ET.Element, kind: str) -> str:
    """The text of a test case's <failure> or <error>: the whole explanation."""
    elem = case.find(kind)
    assert elem is not None, f"{case.get('name')} has no <{kind}>"
    return elem.text or ""


def _kind(case: ET.Element) -> str:
    return next((k for k in ("failure", "error", "skipped") if case.find(k) is not None), "passed")


def test_verdict_failures_fail_and_everything_else_is_an_error(tmp_path: Path) -> None:
    proc = _run(tmp_path, "--results-dir", str(tmp_path / "out"))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    cases = _cases(tmp_path / "out" / "junit.xml")
    assert {n: _kind(c) for n, c in cases.items()} == {
        "verdict": "failure", "own-assert": "failure", "fio-error": "error", "harness-assert": "error",
        "passes": "passed", "stopped": "passed", "after": "passed", "after-setup": "passed"}
    assert _message(cases["fio-error"], "error") == "RuntimeError: fio exited 1: no space left in guest"
    assert _message(cases["verdict"], "failure") == "verdict failed on default"  # one line: it has no FAIL: line
    assert "host saw 0.8" in _body(cases["verdict"], "failure")
    table = out.split("vioconform verdicts")[1]
    assert "ERROR    fio-error" in table and "ERROR    harness-assert" in table and "FAILED   verdict" in table
    props = {p.get("name"): p.get("value", "") for p in ET.parse(tmp_path / "out" / "junit.xml").iter("property")}
    assert props["complete"] == "true" and "interrupted_by" not in props
    assert (props["fio_version"], props["fio_origin"], props["hypervisor"]) == ("fio-3.33", "image", "libvirt")
    tested = (tmp_path / "out" / "report.html").read_text().split('<section id="tested">')[1].split("</section>")[0]
    assert "<td>fio_version</td><td>fio-3.33</td>" in tested and "<td>fio_origin</td><td>image</td>" in tested
    assert stat.S_IMODE((tmp_path / "out").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "out" / "junit.xml").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "out" / "report.html").stat().st_mode) == 0o600


def test_sigterm_mid_rule_is_an_error_an_incomplete_run_and_a_non_zero_exit(tmp_path: Path) -> None:
    proc = _run(tmp_path, "--results-dir", str(tmp_path / "out"), "--results-mode", "0750",
                env={"GATE_SIGNAL": "SIGTERM"})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out  # pytest's "interrupted"
    cases = _cases(tmp_path / "out" / "junit.xml")
    assert _message(cases["stopped"], "error") == "interrupted by SIGTERM: did not finish"
    assert _message(cases["after"], "skipped").startswith("not run")
    assert _kind(cases["run"]) == "error" and _kind(cases["passes"]) == "passed"
    props = {p.get("name"): p.get("value", "") for p in ET.parse(tmp_path / "out" / "junit.xml").iter("property")}
    assert props["complete"] == "false" and props["interrupted_by"] == "SIGTERM"
    table = out.split("vioconform verdicts")[1]
    assert "RUN INCOMPLETE: interrupted by SIGTERM; 1 rule test did not finish; 2 rule tests not run" in table
    assert "ERROR    stopped" in table and "NOT RUN  after" in table and "PASSED   stopped" not in table
    assert "RUN INCOMPLETE" in (tmp_path / "out" / "report.html").read_text()
    assert stat.S_IMODE((tmp_path / "out" / "report.html").stat().st_mode) == 0o640


def test_rules_after_the_guest_died_are_not_run_with_its_cause(tmp_path: Path) -> None:
    """The rule the guest died under is the ERROR; the later ones on that guest never ran: NOT RUN
    with the death's cause (from the test itself or from a set-up step), and the run is incomplete."""
    proc = _run(tmp_path, "--results-dir", str(tmp_path / "out"), env={"GATE_GUEST_DIES": "1"})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out  # test_verdict still failed its verdict
    cases = _cases(tmp_path / "out" / "junit.xml")
    assert _message(cases["stopped"], "error").startswith("GuestDied: the guest died 3.0 s into the command")
    for name in ("after", "after-setup"):
        assert _message(cases[name], "skipped") == "not run: the guest died earlier: its kernel panicked", name
    props = {p.get("name"): p.get("value", "") for p in ET.parse(tmp_path / "out" / "junit.xml").iter("property")}
    assert props["complete"] == "false"
    table = out.split("vioconform verdicts")[1]
    assert "RUN INCOMPLETE: 2 rule tests not run" in table
    assert "NOT RUN  after " in table and "not run: the guest died earlier: its kernel panicked" in table


def test_maxfail_leaves_rules_not_run_and_says_what_stopped_it(tmp_path: Path) -> None:
    proc = _run(tmp_path, "--results-dir", str(tmp_path / "out"), "-x")
    assert proc.returncode == 1, proc.stdout
    props = {p.get("name"): p.get("value", "") for p in ET.parse(tmp_path / "out" / "junit.xml").iter("property")}
    assert props["complete"] == "false" and "stopping after 1 failures" in props["interrupted_by"]
    assert _kind(_cases(tmp_path / "out" / "junit.xml")["after"]) == "skipped"


def test_bad_results_directory_is_a_usage_error_before_any_test(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("mine")
    (tmp_path / "earlier").mkdir()
    (tmp_path / "earlier" / "junit.xml").write_text("<earlier run/>")
    for where, said in ((tmp_path / "a-file", "exists and is not a directory"),
                        (Path("/proc/nope"), "cannot use it as the results directory"),
                        (tmp_path / "earlier", "is not empty (it holds junit.xml)")):
        t0 = time.monotonic()
        proc = _run(tmp_path, "--results-dir", str(where))
        assert proc.returncode == 4, proc.stdout + proc.stderr
        assert said in proc.stderr and "collected" not in proc.stdout, proc.stdout + proc.stderr
        assert time.monotonic() - t0 < 60
    assert (tmp_path / "a-file").read_text() == "mine"
    assert (tmp_path / "earlier" / "junit.xml").read_text() == "<earlier run/>"


def test_a_run_without_rules_leaves_no_results_directory(tmp_path: Path) -> None:
    proc = _run(tmp_path, "-k", "nothing-matches")
    assert proc.returncode == 5, proc.stdout + proc.stderr  # no tests selected
    assert not (tmp_path / "results").exists()


def test_disk_full_at_the_end_keeps_what_was_written_and_says_what_is_missing(tmp_path: Path) -> None:
    proc = _run(tmp_path, "--results-dir", str(tmp_path / "out"), "-k", "passes",
                env={"GATE_FULL_DISK": "report.html"})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 11, out  # every rule passed, but the report is missing: results not written
    assert f"NOT WRITTEN: report {tmp_path / 'out' / 'report.html'}: No space left on device" in out
    assert _kind(_cases(tmp_path / "out" / "junit.xml")["passes"]) == "passed"  # what could be written, was
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["junit.xml", "phases.json"]  # no partial report, no temporary


def _stored_runs(db: Path) -> list[tuple[int, bool]]:
    import sqlite3
    with sqlite3.connect(db) as conn:
        return [(int(i), bool(c)) for i, c in conn.execute("SELECT id, complete FROM runs ORDER BY id")]


def test_every_run_goes_to_the_store_an_interrupted_one_as_incomplete(tmp_path: Path) -> None:
    proc = _run(tmp_path, "--results-dir", str(tmp_path / "out"))  # the default store: results/vioconform.db
    assert "stored:    run 1 in sqlite:///results/vioconform.db" in proc.stdout, proc.stdout + proc.stderr
    db = tmp_path / "results" / "vioconform.db"
    assert _stored_runs(db) == [(1, True)]
    assert stat.S_IMODE((tmp_path / "results").stat().st_mode) == 0o700
    proc = _run(tmp_path, "--results-dir", str(tmp_path / "out2"), env={"GATE_SIGNAL": "SIGTERM"})
    assert proc.returncode == 2 and "stored:    run 2 in" in proc.stdout, proc.stdout + proc.stderr
    assert _stored_runs(db) == [(1, True), (2, False)]
    proc = _run(tmp_path, "--results-dir", str(tmp_path / "out3"), "--store", "none", "-k", "passes")
    assert proc.returncode == 0 and "stored:" not in proc.stdout, proc.stdout + proc.stderr
    assert _stored_runs(db) == [(1, True), (2, False)]


def test_a_junit_file_the_disk_cannot_take_costs_only_the_junit_file(tmp_path: Path) -> None:
    """The store is handed the run's data (reports/run_data.py), not filled from the JUnit file: it
    still gets the run when the JUnit file could not be written."""
    import sqlite3
    db = tmp_path / "store.db"
    proc = _run(tmp_path, "--results-dir", str(tmp_path / "out"), "--store", f"sqlite:///{db}", "-k", "passes",
                env={"GATE_FULL_DISK": "junit.xml"})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 11, out  # every rule passed, but the JUnit file is missing: results not written
    assert f"NOT WRITTEN: JUnit XML {tmp_path / 'out' / 'junit.xml'}: No space left on device" in out
    assert f"stored:    run 1 in sqlite:///{db}" in out and "NOT STORED" not in out, out
    assert _stored_runs(db) == [(1, True)]
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT rule, outcome FROM verdicts").fetchall() == [("passes", "passed")]


def test_a_store_that_cannot_be_used_ends_the_run_before_any_rule(tmp_path: Path) -> None:
    import sqlite3
    newer = tmp_path / "newer.db"
    with sqlite3.connect(newer) as conn:
        conn.execute("CREATE TABLE meta (key VARCHAR(64) PRIMARY KEY, value VARCHAR(256) NOT NULL)")
        conn.execute("INSERT INTO meta VALUES ('schema_version', '99')")
    before = newer.read_bytes()
    for url, said in ((f"sqlite:///{tmp_path}/no/such/dir/x.db", "does not exist"),
                      (f"sqlite:///{newer}", "schema version 99, written by a newer vioconform"),
                      ("postgresql://vioconform:s3cret@127.0.0.1:1/vioconform", "cannot be opened")):
        proc = _run(tmp_path, "--results-dir", str(tmp_path / "out"), "--store", url)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 4, out
        assert "--store:" in proc.stderr and said in proc.stderr and "PASSED" not in out, out
        assert "s3cret" not in out  # a password in the URL is never shown
        assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
    assert newer.read_bytes() == before  # refused, never altered


def test_a_store_that_fails_at_the_end_is_named_and_the_exit_is_not_clean(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    proc = _run(tmp_path, "--results-dir", str(tmp_path / "out"), "--store", f"sqlite:///{db}", "-k", "passes",
                env={"GATE_BREAK_STORE": str(db)})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 11, out  # every rule passed, but the run is not in the store
    assert "NOT STORED: store sqlite:///" in out and "the JUnit file and the report are the record" in out
    assert _kind(_cases(tmp_path / "out" / "junit.xml")["passes"]) == "passed"
