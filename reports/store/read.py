"""A results directory read back: its ``junit.xml`` (reports/junit.py wrote it) as the :class:`RunData` a
store keeps, refused when vioconform did not write it."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from model.across.fingerprint import OPTIONS_KEY, REVISION_KEY, SERIES_OPTIONS
from model.across.moves import Key
from model.across.series import SERIES_KEY, series_problem, stored_series
from reports.store.store_error import StoreError

#: Suite properties that are the run's options rather than what it measured against (the
#: ``options`` property, JSON, adds the rest of them).
OPTION_KEYS = SERIES_OPTIONS
#: Suite properties that say how the run ended: the ``complete`` column, not the fingerprint.
STATUS_KEYS = ("complete", "interrupted_by")
#: The suite property with the run's own identity (a UUID each run writes into its junit.xml):
#: the ``run_uid`` column, not the fingerprint.
RUN_ID_KEY = "vioconform_run_id"
#: What every JUnit file a vioconform run writes has (fixtures/finish.py, reports/junit.py): the
#: suite's name, the run's own properties and the test cases' class prefix.
SUITE_NAME = "vioconform"
RUN_KEYS = ("hypervisor", "controllers", "inject")
CASE_CLASS_PREFIX = "vioconform."


@dataclass
class RunData:
    """One run as read from a results directory (or built by a test), before it is stored."""

    fingerprint: dict[str, str]
    options: dict[str, str] = field(default_factory=dict)
    revision: str = ""
    complete: bool = True
    started: dt.datetime | None = None
    finished: dt.datetime | None = None
    source: str | None = None
    #: The run's own identity (its ``vioconform_run_id``); None for runs written before run ids
    run_uid: str | None = None
    #: The run's series (model/across/series.py); "": derived from ``options`` and ``fingerprint`` when stored
    series: str = ""
    #: The machine the run ran on (its JUnit suite's ``hostname``); None when not recorded
    host: str | None = None
    #: Where ``started`` came from (a key of :data:`STARTED_FROM`)
    started_from: str | None = None
    verdicts: dict[Key, tuple[str, str]] = field(default_factory=dict)  # (outcome, message)
    #: (rule, config, property name as written, e.g. "qd1_iops.r2") -> value as written
    properties: dict[tuple[str, str, str], str] = field(default_factory=dict)


@dataclass(frozen=True)
class CaseRead:
    """One JUnit test case as the store reads it: its name (``rule[config]``) and class, the element of
    its outcome (``failure``, ``error``, ``skipped``; None: it passed), that element's message, and the
    case's properties. A run's own records give the same (reports/run_data.py)."""

    name: str
    classname: str
    tag: str | None
    message: str
    properties: dict[str, str]


#: The outcome the store keeps for a case's element (None: no element, a pass).
OUTCOMES: dict[str | None, str] = {None: "passed", "failure": "failed", "error": "error", "skipped": "skipped"}


def _verdict(case: CaseRead) -> tuple[str, str]:
    """(outcome, message): a skip whose message says "not run" is a rule that never started."""
    outcome = OUTCOMES[case.tag]
    if outcome == "skipped" and case.message.startswith("not run"):
        outcome = "not run"
    return outcome, case.message if case.tag is not None else ""


def _case_read(case: ET.Element) -> CaseRead:
    props = {p.get("name") or "": p.get("value") or "" for p in case.findall("properties/property")}
    for tag in ("failure", "error", "skipped"):
        el = case.find(tag)
        if el is not None:
            return CaseRead(case.get("name") or "", case.get("classname") or "", tag, el.get("message") or "", props)
    return CaseRead(case.get("name") or "", case.get("classname") or "", None, "", props)


#: Where a run's start was read from (``runs.started_from``), and how ``import`` and ``list`` say it.
#: A run writes its start (UTC) as its JUnit suite's ``timestamp``; a JUnit file without one (written
#: before, or by hand) falls back to its results directory's name, the local time of the machine that
#: ran it (``results/<YYYYmmdd-HHMMSS>``), read in this machine's time zone (``TZ``), then to the
#: file's modification time (the run's end) less the run's duration.
STARTED_FROM = {
    "timestamp": "the JUnit file's timestamp",
    "directory name": "the results directory's name, read as local time ({tz}): the JUnit file has no timestamp",
    "file time": "junit.xml's modification time less the run's duration: the JUnit file has no timestamp and the "
                 "directory's name is no date",
}


def started_from_text(source: str | None) -> str:
    """How ``import`` says where a run's start came from ("" for the run's own timestamp)."""
    zone = os.environ.get("TZ") or time.tzname[0]  # the zone as the user set it, else the system's name for it
    return "" if source in (None, "timestamp") else STARTED_FROM.get(source, source).format(tz=zone)


def _utc(moment: dt.datetime) -> dt.datetime:
    """``moment`` as the store keeps it: naive UTC (an aware time converted; a naive one is taken as UTC)."""
    return moment.astimezone(dt.UTC).replace(tzinfo=None) if moment.tzinfo is not None else moment


def stamped(stamp: str | None) -> dt.datetime | None:
    """A JUnit suite's ``timestamp`` as the store keeps it (naive UTC); None when there is none, or no time."""
    if stamp:
        with contextlib.suppress(ValueError):
            return _utc(dt.datetime.fromisoformat(stamp))
    return None


def _started(directory: Path, suite: ET.Element, junit: Path, duration_s: float) -> tuple[dt.datetime, str]:
    """The run's start (naive UTC) and where it came from (a key of :data:`STARTED_FROM`): the suite's
    ``timestamp``, else the directory's name (local time), else the JUnit file's modification time
    less ``duration_s``."""
    started = stamped(suite.get("timestamp"))
    if started is not None:
        return started, "timestamp"
    try:
        local = dt.datetime.strptime(directory.name[:15], "%Y%m%d-%H%M%S")
        return _utc(local.astimezone()), "directory name"  # a naive time's astimezone() reads it as local time
    except (ValueError, OverflowError, OSError):
        end = dt.datetime.fromtimestamp(junit.stat().st_mtime, dt.UTC)
        return _utc(end - dt.timedelta(seconds=duration_s)), "file time"


def read_results_dir(directory: Path, junit: Path | None = None) -> RunData:
    """A results directory's run, from its ``junit.xml`` (or ``junit``, where ``--junit-xml`` put
    it); StoreError with the reason otherwise."""
    junit = junit or directory / "junit.xml"
    if not junit.is_file():
        raise StoreError(f"{directory}: no junit.xml in it: not a vioconform results directory "
                         f"(give the directory a run wrote, e.g. results/20261123-020000)")
    try:
        root = ET.parse(junit).getroot()
    except ET.ParseError as e:
        raise StoreError(f"{junit}: not readable XML ({e}); the run may have been killed while writing it") from None
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    if suite is None:
        raise StoreError(f"{junit}: no <testsuite> element: not a JUnit file vioconform wrote")
    props = {p.get("name", ""): p.get("value", "") for p in suite.findall("properties/property")}
    foreign = _not_vioconform(suite, props)
    if foreign:
        raise StoreError(f"{junit}: not a vioconform run ({foreign}); only results directories a vioconform run "
                         f"wrote are stored (give one such as results/20261123-020000)")
    try:
        duration_s: float | None = float(suite.get("time") or 0)
    except ValueError:
        duration_s = None
    started, started_from = _started(directory, suite, junit, duration_s or 0.0)
    return run_data(props, (_case_read(c) for c in suite.iter("testcase")), str(directory.resolve()),
                    str(junit), started, started_from, duration_s, suite.get("hostname"))


def run_data(props: dict[str, str], cases: Iterable[CaseRead], source: str, where: str, started: dt.datetime | None,
             started_from: str | None, duration_s: float | None, host: str | None) -> RunData:
    """The :class:`RunData` of a run from its suite's properties and its cases (read from its junit.xml, or
    built from the run's own records: reports/run_data.py), its results directory (``source``), its start
    and duration and its machine; StoreError (naming ``where``) for a series no series can have."""
    given_series = props.get(SERIES_KEY) or None
    problem = series_problem(given_series) if given_series is not None else None
    if problem is not None:
        raise StoreError(f"{where}: its series {given_series!r} cannot name a series ({problem}); nothing was "
                         f"stored: correct the series property, or remove it to store the run in its default series")
    finished = started + dt.timedelta(seconds=duration_s) if started is not None and duration_s is not None else None
    options = {k: props[k] for k in OPTION_KEYS if k in props}
    try:
        more = json.loads(props.get(OPTIONS_KEY) or "{}")
    except json.JSONDecodeError:
        more = {"unreadable": props[OPTIONS_KEY]}
    if isinstance(more, dict):
        options.update({str(k): v if isinstance(v, str) else json.dumps(v) for k, v in more.items() if k not in options})
    fingerprint = {k: v for k, v in props.items()
                   if k not in (*OPTION_KEYS, *STATUS_KEYS, REVISION_KEY, OPTIONS_KEY, RUN_ID_KEY, SERIES_KEY)}
    run = RunData(fingerprint=fingerprint, options=options, revision=props.get(REVISION_KEY, ""),
                  complete=props.get("complete", "true") == "true", started=started, finished=finished,
                  source=source, host=host or None, started_from=started_from,
                  run_uid=props.get(RUN_ID_KEY) or None,
                  series=stored_series(options, fingerprint, given_series))
    for case in cases:
        if case.classname == "vioconform.run":  # run[incomplete]: the complete flag says it
            run.complete = False
            continue
        rule, _, config = case.name.partition("[")
        key = (rule, config.removesuffix("]"))
        run.verdicts[key] = _verdict(case)
        for name, value in case.properties.items():
            run.properties[(*key, name)] = value
    return run


def _not_vioconform(suite: ET.Element, props: dict[str, str]) -> str:
    """Why a JUnit suite is not one a vioconform run wrote ("" when it is): another tool's JUnit
    file (pytest's own, a CI tool's) must not become a complete run and a trend's series."""
    name = suite.get("name") or ""
    if name != SUITE_NAME:
        return f"its test suite is named {name!r}, not {SUITE_NAME!r}"
    missing = [k for k in RUN_KEYS if k not in props]
    if missing:
        return f"it has no {', '.join(missing)} suite propert{'y' if len(missing) == 1 else 'ies'}"
    other = next((c for c in suite.iter("testcase") if not (c.get("classname") or "").startswith(CASE_CLASS_PREFIX)),
                 None)
    if other is not None:
        return (f"its test case {other.get('classname') or ''}.{other.get('name') or ''} is not a vioconform rule "
                f"(class {CASE_CLASS_PREFIX}*)")
    if suite.find("testcase") is None:
        return "it has no test case"
    return ""


