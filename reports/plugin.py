"""pytest hooks that turn rule tests into Records, the JUnit file and the end-of-run summary."""

from __future__ import annotations

from collections.abc import Generator

import pytest

from fixtures.session import OPTIONS_KEY
from reports.html import write_html
from reports.junit import write_junit
from reports.records import Record

RECORDS_KEY = pytest.StashKey[dict[str, Record]]()
ITEM_RECORD_KEY = pytest.StashKey[Record]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "rule(name): the conformance rule a suite test checks")
    config.stash[RECORDS_KEY] = {}


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


@pytest.fixture
def record(request: pytest.FixtureRequest) -> Record:
    """The current rule test's record: ``record.add(qd32_host_depth=21.7)`` puts numbers in the report."""
    rec = _record_for(request.node)
    if rec is None:
        raise pytest.UsageError(f"{request.node.nodeid} uses `record` but has no @pytest.mark.rule(...)")
    return rec


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, None, None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    rec = _record_for(item)
    if rec is None:
        return
    rec.duration_s += report.duration
    if report.when == "call" or report.outcome != "passed":
        if report.skipped:
            rec.outcome = "skipped"
            rec.message = str(report.longrepr[2]) if isinstance(report.longrepr, tuple) else str(report.longrepr)
            rec.message = rec.message.removeprefix("Skipped: ")
        elif report.failed:
            rec.outcome = "failed" if report.when == "call" else "error"
            exc = call.excinfo.value if call.excinfo else None
            rec.message = str(exc).strip() if exc else report.longreprtext.splitlines()[-1]
            rec.details = report.longreprtext
        elif report.when == "call":
            rec.outcome = "passed"
    for k, v in rec.properties.items():
        if report.when == "call":
            report.user_properties.append((k, v))


def pytest_sessionfinish(session: pytest.Session) -> None:
    records = list(session.config.stash.get(RECORDS_KEY, {}).values())
    opts = session.config.stash.get(OPTIONS_KEY, None)
    if records and opts is not None:
        props = {"hypervisor": opts.hypervisor, "controllers": ",".join(opts.controllers),
                 "inject": ",".join(opts.inject) or "none"}
        write_junit(records, opts.junit_path, suite_properties=props)
        write_html(records, opts.results_dir / "report.html",
                   subtitle=", ".join(f"{k}: {v}" for k, v in props.items()))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    records = list(config.stash.get(RECORDS_KEY, {}).values())
    opts = config.stash.get(OPTIONS_KEY, None)
    if not records or opts is None:
        return
    tr = terminalreporter
    tr.section("vioconform verdicts")
    for r in records:
        tr.write_line(f"{r.outcome.upper():8} {r.rule:22} {r.config}  {r.message.splitlines()[0] if r.message else ''}")
    tr.write_line(f"JUnit XML: {opts.junit_path}")
    tr.write_line(f"report:    {opts.results_dir / 'report.html'}")
    tr.write_line(f"raw data:  {opts.results_dir}")
