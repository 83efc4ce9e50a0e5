"""Defence in depth: every registered secret (model/secret.py) becomes ``***`` in what pytest reports.

The vSphere code keeps its password out of messages and tracebacks at the source; this plugin is
the second wall, for whatever slips past (a library's frame holding a revealed value under
``pytest -l``, an exception that quotes it, a log line). At start-up it registers the values of
``VIOCONFORM_VCENTER_PASSWORD`` and of other credential-named environment variables, and the
passwords in every URL given as an option (``--libvirt-uri``, ``--store``: model.secret.register_url);
every ``Secret`` made later (a password file read) and every URL read later (an inventory's)
registers itself. Then it scrubs:

- each test report, before any reader: the exception (in place, so ``str(exc)`` is clean for
  vioconform's record), the traceback with its locals and arguments, captured output and logs
  (``report.sections``), properties. Its ``pytest_runtest_makereport`` wrapper is ``trylast``, so it
  is the innermost wrapper and runs before reports/plugin.py's wrapper reads ``longreprtext``;
  the terminal, pytest's JUnit writer, vioconform's JUnit file and report.html all read the scrubbed report;
- collection reports and internal errors;
- every log record as it is made (``-o log_cli=true``, ``--log-file``, caplog), message and traceback.

What it cannot reach: output a test writes straight to the terminal under ``-s``.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Generator
from typing import Any

import pytest

from model.secret import PASSWORD_ENV, any_registered, has_secret, register_environment, register_url, scrub

_OLD_FACTORY_KEY = pytest.StashKey[Callable[..., logging.LogRecord]]()


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    register_environment(always=(PASSWORD_ENV,))
    for value in vars(config.option).values():  # before any other plugin reads them (an error's locals)
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str) and "://" in item:
                register_url(item)
    old = logging.getLogRecordFactory()
    config.stash[_OLD_FACTORY_KEY] = old
    logging.setLogRecordFactory(_scrubbing_factory(old))


def pytest_unconfigure(config: pytest.Config) -> None:
    old = config.stash.get(_OLD_FACTORY_KEY, None)
    if old is not None:
        logging.setLogRecordFactory(old)


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport,
                                                                                             pytest.TestReport]:
    if call.excinfo is not None:
        scrub_exception(call.excinfo.value)
    report = yield
    scrub_report(report)
    return report


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, pytest.CollectReport,
                                                                          pytest.CollectReport]:
    report = yield
    scrub_report(report)
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Again, for properties added after the report was made and reports made elsewhere (xdist)."""
    scrub_report(report)


@pytest.hookimpl(tryfirst=True)
def pytest_internalerror(excrepr: Any, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    scrub_exception(excinfo.value)
    _scrub_object(excrepr, set())


def scrub_report(report: pytest.TestReport | pytest.CollectReport) -> None:
    """Scrub a report in place, keeping its structure (colours, the short summary's crash line)."""
    report.longrepr = _scrub_object(report.longrepr, set())
    report.sections = [(title, scrub(text)) for title, text in report.sections]
    if isinstance(report, pytest.TestReport):
        report.user_properties = [(k, scrub(v) if isinstance(v, str) else v) for k, v in report.user_properties]
    if report.longrepr is not None and has_secret(report.longreprtext):
        # a representation this walk does not know: keep its text, scrubbed
        report.longrepr = scrub(report.longreprtext)


def scrub_exception(exc: BaseException | None, seen: set[int] | None = None) -> None:
    """Scrub an exception's arguments and string attributes in place, along its cause/context chain."""
    seen = set() if seen is None else seen
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        try:
            if any(isinstance(a, str) and has_secret(a) for a in exc.args):
                exc.args = tuple(scrub(a) if isinstance(a, str) else a for a in exc.args)
            for name, value in list(vars(exc).items()):
                if isinstance(value, str) and has_secret(value):
                    setattr(exc, name, scrub(value))
        except (AttributeError, TypeError):  # a C exception type with read-only attributes
            pass
        scrub_exception(exc.__cause__, seen)
        exc = exc.__context__


def _scrub_object(value: Any, seen: set[int]) -> Any:
    """Strings scrubbed inside lists, tuples and dataclasses (pytest's ``Repr*`` objects), in place where mutable."""
    if isinstance(value, str):
        return scrub(value)
    if id(value) in seen:
        return value
    seen.add(id(value))
    if isinstance(value, list):
        value[:] = [_scrub_object(v, seen) for v in value]
    elif isinstance(value, tuple):
        items = [_scrub_object(v, seen) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            if hasattr(value, f.name):
                object.__setattr__(value, f.name, _scrub_object(getattr(value, f.name), seen))
    return value


def _scrubbing_factory(make: Callable[..., logging.LogRecord]) -> Callable[..., logging.LogRecord]:
    """A log record factory that formats the message now and scrubs it (and the traceback, if any)."""

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make(*args, **kwargs)
        if not any_registered():
            return record
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 a bad format string: logging reports it at emit time, as it would have
            return record
        if has_secret(message):
            record.msg, record.args = scrub(message), None
        if record.exc_info and record.exc_info[1] is not None:
            scrub_exception(record.exc_info[1])
            text = logging.Formatter().formatException(record.exc_info)
            if has_secret(text):
                record.exc_text = scrub(text)
        if record.stack_info and has_secret(record.stack_info):
            record.stack_info = scrub(record.stack_info)
        return record

    return factory
