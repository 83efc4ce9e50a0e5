"""pytest hooks that turn rule tests into Records, the JUnit file and the end-of-run summary.

The outputs never claim more than happened:

- a rule's verdict failure (``suites.assertions``' RuleFailure, or ``pytest.fail`` or
  ``AssertionError`` raised by the rule's own code) is FAILED; any other exception
  (fio, SSH, the guest, the hypervisor, a bug) is an ERROR: the rule reached no verdict;
- a rule test whose call phase never reported (Ctrl-C, SIGTERM) is an ERROR, one never
  started is NOT RUN, and the run is marked incomplete everywhere, with a non-zero exit code;
- an output that cannot be written (disk full) is named with the reason, and the exit code
  is non-zero;
- the exit code is reports/exitcodes.py's table: 1 only for a rule that FAILED, 10 for harness
  errors where none failed, 11 for results not written or not stored;
- the results directory always holds its own ``junit.xml``, also when ``--junit-xml`` writes
  one elsewhere, so ``python -m reports.compare DIR DIR`` works on any run directory.
"""

from __future__ import annotations

import base64
import contextlib
import pickle
import re
import signal
import uuid
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import _pytest
import pluggy
import pytest

from fixtures.session import OPTIONS_KEY
from measure import phase_times as phases
from reports.exitcodes import MEANING, Exit, run_exit_code
from reports.html import write_html
from reports.junit import REPORT_NAME, write_junit
from reports.per_test import Record, RunStatus, record_from_nodeid, settle
from reports.results import INTERRUPT_KEY, RESULTS_KEY
from reports.run_properties import RUN_PROPERTIES_KEY
from reports.store import RUN_ID_KEY, StoreError, shown_url, store_results
from suites.assertions import RuleFailure

#: The run's own suite properties (what was tested), filled by the fixtures; defined in
#: reports/results.py, which the fixtures import (this module imports the fixtures).
RECORDS_KEY = pytest.StashKey[dict[str, Record]]()
ITEM_RECORD_KEY = pytest.StashKey[Record]()
FINAL_KEY = pytest.StashKey["FinalReport"]()
#: The exit code the session ends with (reports/exitcodes.py), for the summary's last line.
EXIT_KEY = pytest.StashKey[int]()

#: Frames of pytest and pluggy themselves: pytest.fail raises inside them, not in the caller.
_FRAMEWORK_DIRS = tuple(str(Path(m.__file__).parent) for m in (_pytest, pluggy) if m.__file__)


@dataclass
class FinalReport:
    """What the session settled: the records, the run's status, and outputs not written."""

    records: list[Record]
    status: RunStatus
    written: list[tuple[str, Path]] = field(default_factory=list)
    not_written: list[tuple[str, Path, str]] = field(default_factory=list)
    #: The run in the results store: "run 12 in sqlite:///results/vioconform.db"; "" when not stored
    stored: str = ""
    #: Why the run is not in the store although --store asked for it ("" when it is, or none was asked)
    not_stored: str = ""


class _InterruptWatcher:
    """Keeps what interrupted the session (pytest_keyboard_interrupt is given no config)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        # setdefault: a reason given before the interrupt was raised (fixtures/workerstart.py) stays
        self.config.stash.setdefault(INTERRUPT_KEY, interrupt_name(excinfo.value))


class _WorkerRecords:
    """In the controller of ``pytest -n N``: each test's record as its worker made it (sent in the
    test's last report), or, for a test whose worker died under it, one made from the report."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_xdist_node_collection_finished(self, node: object, ids: list[str]) -> None:
        """Every rule test a worker collected has a record from the start (the workers collect, the
        controller does not): one that never runs shows as not run, and the run as incomplete."""
        records = self.config.stash[RECORDS_KEY]
        for nodeid in ids:
            if nodeid.startswith("suites/") and nodeid not in records:
                records[nodeid] = record_from_nodeid(nodeid)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        records = self.config.stash[RECORDS_KEY]
        for name, value in report.user_properties:
            if name == RECORD_PROPERTY:
                records[report.nodeid] = pickle.loads(base64.b64decode(str(value)))
                return
        if report.failed and report.nodeid.startswith("suites/"):
            # no record from the worker: it died under this test (xdist's report says so)
            rec = records.get(report.nodeid) or record_from_nodeid(report.nodeid)
            rec.outcome, rec.started = "error", True
            rec.message, rec.details = _first_line(report.longreprtext), report.longreprtext
            records[report.nodeid] = rec


#: The user property that carries a worker's record to the controller (base64 of a pickle: the
#: record's verdict holds the rule's evidence and figures).
RECORD_PROPERTY = "vioconform.record"


def _is_worker(config: pytest.Config) -> bool:
    return getattr(config, "workerinput", None) is not None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "rule(name): the conformance rule a suite test checks")
    config.stash[RECORDS_KEY] = {}
    config.pluginmanager.register(_InterruptWatcher(config), "vioconform-interrupt-watcher")
    if getattr(config.option, "numprocesses", None) and not _is_worker(config):
        config.pluginmanager.register(_WorkerRecords(config), "vioconform-worker-records")


def _record_for(item: pytest.Item) -> Record | None:
    marker = item.get_closest_marker("rule")
    if marker is None:
        return None
    if ITEM_RECORD_KEY not in item.stash:
        callspec = getattr(item, "callspec", None)
        config = callspec.id if callspec else "default"
        rec = Record(nodeid=item.nodeid, rule=marker.args[0], config=config)
        item.stash[ITEM_RECORD_KEY] = rec
        item.config.stash[RECORDS_KEY][item.nodeid] = rec
    return item.stash[ITEM_RECORD_KEY]


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """A record for every selected rule test up front, so one never reached shows as not run."""
    if session.config.option.collectonly:
        return
    for item in session.items:
        _record_for(item)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    phases.begin_test(item.nodeid)
    rec = _record_for(item)
    if rec is not None:
        rec.started = True


@pytest.fixture
def record(request: pytest.FixtureRequest) -> Record:
    """The current rule test's record: ``record.add(qd32_host_depth=21.7)`` puts numbers in the report."""
    rec = _record_for(request.node)
    if rec is None:
        raise pytest.UsageError(f"{request.node.nodeid} uses `record` but has no @pytest.mark.rule(...)")
    return rec


def is_verdict_failure(excinfo: pytest.ExceptionInfo[BaseException], rule_dir: Path) -> bool:
    """True if ``excinfo`` is the rule failing its check: suites.assertions' RuleFailure, or
    ``pytest.fail`` or an ``AssertionError`` raised by the rule's own code (in ``rule_dir``).
    The same exceptions raised by the harness (an ``assert`` in fixtures/, pytest.fail in a
    helper) and every other exception mean the rule reached no verdict."""
    if isinstance(excinfo.value, RuleFailure):
        return True
    if not isinstance(excinfo.value, (pytest.fail.Exception, AssertionError)):
        return False
    for entry in reversed(excinfo.traceback):
        path = str(entry.path)
        if path.startswith(_FRAMEWORK_DIRS):
            continue
        return Path(path).resolve().is_relative_to(rule_dir.resolve())
    return False


def _first_line(text: str) -> str:
    return next((line for line in text.splitlines() if line.strip()), "")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item,
                              call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    phases.add_duration(item.nodeid, report.duration)
    rec = _record_for(item)
    if rec is not None:
        _update(rec, item, call, report)
        if report.when == "teardown" and _is_worker(item.config):
            report.user_properties = [*report.user_properties,
                                      (RECORD_PROPERTY, base64.b64encode(pickle.dumps(rec)).decode())]
    return report


def _update(rec: Record, item: pytest.Item, call: pytest.CallInfo[None], report: pytest.TestReport) -> None:
    """Let one phase's report decide (or add to) the record's outcome."""
    rec.duration_s += report.duration
    if report.when == "call" or report.outcome != "passed":
        if report.skipped:
            rec.outcome = "skipped"
            rec.message = str(report.longrepr[2]) if isinstance(report.longrepr, tuple) else str(report.longrepr)
            rec.message = rec.message.removeprefix("Skipped: ")
        elif report.failed and rec.outcome == "failed":
            # A verdict already reached stays; a later phase's error (teardown) joins its details.
            rec.details += f"\n\n{report.when}: {report.longreprtext}"
        elif report.failed:
            excinfo = call.excinfo
            verdict = (report.when == "call" and excinfo is not None
                       and is_verdict_failure(excinfo, item.path.parent))
            rec.outcome = "failed" if verdict else "error"
            exc = excinfo.value if excinfo else None
            if exc is None:
                rec.message = _first_line(report.longreprtext)
            elif verdict or isinstance(exc, pytest.fail.Exception):
                rec.message = str(exc).strip()
            else:
                rec.message = f"{type(exc).__name__}: {str(exc).strip()}"
            rec.details = report.longreprtext
        elif report.when == "call":
            rec.outcome = "passed"
    if report.when == "call":
        report.user_properties.extend(rec.measured().items())


def interrupt_name(exc: BaseException) -> str:
    """What stopped the run, for people: ``SIGTERM`` (cleanup turns it into KeyboardInterrupt
    "signal 15"), ``SIGINT`` for Ctrl-C, or pytest.exit's message."""
    if isinstance(exc, pytest.exit.Exception):
        return f"pytest.exit ({exc.msg})"
    m = re.fullmatch(r"signal (\d+)", str(exc))
    if m:
        try:
            return signal.Signals(int(m.group(1))).name
        except ValueError:
            return f"signal {m.group(1)}"
    return "SIGINT" if not str(exc) else f"KeyboardInterrupt ({exc})"


def _stopped_by(session: pytest.Session, undecided: bool) -> str:
    """What stopped the run: an interrupt, or --maxfail/-x if rules were left undecided."""
    if INTERRUPT_KEY in session.config.stash:
        return session.config.stash[INTERRUPT_KEY]
    stop = session.shouldfail or session.shouldstop
    return str(stop) if stop and undecided else ""


def _write_phases(config: pytest.Config) -> None:
    """Where the run's time went (measure/phase_times.py): ``phases.json`` (``phases.<worker>.json``)."""
    opts = config.stash.get(OPTIONS_KEY, None)
    worker = getattr(config, "workerinput", None)
    if opts is None or not config.stash.get(RECORDS_KEY, {}) or not opts.results_dir.is_dir():
        return  # no rule ran (the project's own tests): no results directory to write into
    name = f"phases.{worker['workerid']}.json" if worker else "phases.json"
    with contextlib.suppress(OSError):  # a timing table, never a reason to fail the run
        phases.write(opts.results_dir / name)


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    _write_phases(config)
    pending = list(config.stash.get(RECORDS_KEY, {}).values())
    opts = config.stash.get(OPTIONS_KEY, None)
    results = config.stash.get(RESULTS_KEY, None)
    if not pending or opts is None or results is None:
        return
    records, status = settle(pending, _stopped_by(session, any(r.outcome is None for r in pending)))
    final = FinalReport(records, status)
    config.stash[FINAL_KEY] = final
    props = {"hypervisor": opts.hypervisor, "controllers": ",".join(opts.controllers),
             "inject": ",".join(opts.inject) or "none"}
    subtitle = ", ".join(f"{k}: {v}" for k, v in props.items())
    # The run's own identity: a copy of its results directory imported again is the same stored run.
    props[RUN_ID_KEY] = str(uuid.uuid4())
    # What was tested (image, guest OS and kernel, drivers, boot settings, fio), as the fixtures
    # learnt it; never replacing the run's own properties.
    props.update({k: v for k, v in sorted(config.stash.get(RUN_PROPERTIES_KEY, {}).items()) if k not in props})
    html_path = results.path / REPORT_NAME
    junit = partial(write_junit, records, suite_properties=props, status=status, mode=results.file_mode,
                    results_dir=results.path)
    outputs: list[tuple[str, Path, Callable[[], Path]]] = [
        ("JUnit XML", results.junit_path, partial(junit, results.junit_path)),
        ("report", html_path, partial(write_html, records, html_path, status=status, mode=results.file_mode,
                                      subtitle=subtitle, properties=props))]
    own = results.path / "junit.xml"
    if own.resolve() != results.junit_path.resolve():  # --junit-xml elsewhere: the directory keeps its own too
        outputs.insert(1, ("JUnit XML", own, partial(junit, own)))
    for what, path, write in outputs:
        try:  # each output on its own: a full disk must not lose the other
            write()
            final.written.append((what, path))
        except OSError as e:
            final.not_written.append((what, path, e.strerror or str(e)))
    if opts.store_url is not None:
        _store(final, opts.store_url, results.path, results.file_mode)
    results.make_private()
    session.exitstatus = run_exit_code(session.exitstatus, (r.outcome or "error" for r in records), status.complete,
                                       bool(final.not_written or final.not_stored))
    config.stash[EXIT_KEY] = int(session.exitstatus)


def _store(final: FinalReport, url: str, directory: Path, mode: int) -> None:
    """Write the run into the results store (an interrupted one as incomplete), from a JUnit
    file just written; the reason in ``final.not_stored`` when it cannot be."""
    junit = next((path for what, path in final.written if what == "JUnit XML"), None)
    if junit is None:
        final.not_stored = "the JUnit file was not written, and the store is filled from it"
        return
    try:
        run_id, new = store_results(url, directory, junit, mode)
    except StoreError as e:
        final.not_stored = str(e)
        return
    except KeyboardInterrupt as e:  # Ctrl-C or SIGTERM while the store is slow to answer: stop storing
        final.not_stored = f"{interrupt_name(e)} while the run was being stored in {shown_url(url)}"
        return
    final.stored = f"run {run_id} in {shown_url(url)}" + ("" if new else " (stored before, not changed)")


def pytest_unconfigure(config: pytest.Config) -> None:
    results = config.stash.get(RESULTS_KEY, None)
    if results is not None:
        # Again, last: what was written after pytest_sessionfinish (on SIGTERM or Ctrl-C pytest tears
        # the guest down, and keeps its logs, after the results are written) gets the results mode too.
        results.make_private()
        results.remove_if_unused()  # e.g. a run of the project's own tests: no rule, no results


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    final = config.stash.get(FINAL_KEY, None)
    results = config.stash.get(RESULTS_KEY, None)
    if final is None or results is None:
        return
    tr = terminalreporter
    tr.section("vioconform verdicts")
    banner = final.status.banner()
    if banner:
        tr.write_line(banner, red=True, bold=True)
    for r in final.records:
        assert r.outcome is not None  # settled
        blamed = f"[blame: {r.blame or 'unknown'}] " if r.outcome == "failed" else ""
        tr.write_line(f"{r.outcome.upper():8} {r.rule:22} {r.config}  {blamed}{r.headline}")
    for what, path in final.written:
        tr.write_line(f"{what + ':':10} {path}")
    for what, path, why in final.not_written:
        tr.write_line(f"NOT WRITTEN: {what} {path}: {why}; the verdicts above are the only record of them",
                      red=True, bold=True)
    if final.stored:
        tr.write_line(f"stored:    {final.stored}")
    if final.not_stored:
        tr.write_line(f"NOT STORED: {final.not_stored}; the JUnit file and the report are the record of this run",
                      red=True, bold=True)
    tr.write_line(f"raw data:  {results.path}")
    code = config.stash.get(EXIT_KEY, None)
    if code is not None:
        known = code in {e.value for e in Exit}
        tr.write_line(f"exit code: {code} ({MEANING[Exit(code)]})" if known else f"exit code: {code}")
