"""JUnit XML with junit-xml: one test case per rule and configuration, numbers as properties. It writes
a run's data as reports/run_data.py builds it, which the run hands to the results store too.

junit-xml 1.9 writes properties only per suite; the measured numbers belong to each test
case (as pytest's own JUnit writer puts them), so they are added to the document after.

The file is a CI contract (the README's exit-code table goes with it):

- a failure's ``message`` is one line, its first ``FAIL:`` line; the whole explanation (every
  number, the ``blame:`` line, where the raw data is) is the element's text. An error's message
  is its first line, its text the whole traceback;
- a failed case has the properties ``blame`` (the layer at fault: hypervisor, guest driver,
  guest configuration or unknown; model/blame.py) and ``blame_reason``;
- each case's ``system-out`` names its section of the HTML report and its raw-data directory.

The suite's ``timestamp`` is the run's start in UTC with its offset (``2026-12-07T04:27:12+00:00``:
the same moment whatever the machine's time zone) and its ``hostname`` the machine that ran it; the
results store orders runs by that start.

The suite's properties say whether the run is complete (``complete``, ``interrupted_by``).
A JUnit consumer that reads only test cases must not see an incomplete run as green either:
such a run gets one more case, ``run[incomplete]``, as an error that says what stopped it.
A rule that never started is a skipped case whose message starts with "not run".
"""

from __future__ import annotations

import datetime as dt
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from pathlib import Path

from junit_xml import TestCase, TestSuite, to_xml_report_string

from reports.records import Record, RunStatus, raw_dir, section_id
from reports.results import DEFAULT_DIR_MODE, file_mode, write_atomic
from reports.run_data import INCOMPLETE_CASE, BuiltRun, CaseData, attribute, build_run

#: The HTML report's file name in a results directory (fixtures/finish.py writes it there).
REPORT_NAME = "report.html"


def where(r: Record, results_dir: Path) -> str:
    """A case's ``system-out``: its section of the report and its raw-data directory."""
    return (f"report section: {results_dir / REPORT_NAME}#{section_id(r.rule, r.config)}\n"
            f"raw data: {raw_dir(results_dir, r.config)}")


def _case(c: CaseData, results_dir: Path | None) -> TestCase:
    r = c.record
    case = TestCase(name=c.name, classname=c.classname, elapsed_sec=c.elapsed_s, file=r.nodeid.split("::")[0],
                    stdout=where(r, results_dir) if results_dir is not None else None)
    if c.tag == "failure":
        case.add_failure_info(message=c.message, output=c.body)
    elif c.tag == "error":
        case.add_error_info(message=c.message, output=c.body)
    elif c.tag == "skipped":
        case.add_skipped_info(message=c.message)
    return case


def run_document(run: BuiltRun, suite_name: str = "vioconform", results_dir: Path | None = None) -> str:
    """The JUnit document of a run's data (reports/run_data.py: what the store is handed too)."""
    cases = [_case(c, results_dir) for c in run.cases]
    if run.incomplete:
        assert run.status is not None
        name, classname = INCOMPLETE_CASE
        incomplete = TestCase(name=name, classname=classname)
        incomplete.add_error_info(message=attribute(run.status.banner()), error_type="incomplete")
        cases.append(incomplete)
    text = to_xml_report_string([TestSuite(suite_name, cases, properties=run.suite_properties or None,
                                           timestamp=run.timestamp, hostname=run.hostname)], encoding="utf-8")
    root = ET.fromstring(text)
    for elem, c in zip(root.iter("testcase"), run.cases, strict=False):  # run[incomplete], if any, comes last
        if c.properties:
            case_props = ET.Element("properties")
            for k, v in sorted(c.properties.items()):
                ET.SubElement(case_props, "property", {"name": k, "value": v})
            elem.insert(0, case_props)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode")


def junit_document(records: Iterable[Record], suite_name: str = "vioconform",
                   suite_properties: dict[str, str] | None = None, status: RunStatus | None = None,
                   results_dir: Path | None = None, started: dt.datetime | None = None,
                   hostname: str | None = None) -> str:
    return run_document(build_run(records, suite_properties, status, started, hostname), suite_name, results_dir)


def write_run_junit(run: BuiltRun, path: Path, mode: int = file_mode(DEFAULT_DIR_MODE),
                    results_dir: Path | None = None, suite_name: str = "vioconform") -> Path:
    """Write the JUnit file of a run's data atomically (see :func:`reports.results.write_atomic`).
    ``results_dir``: the run's results directory, which each case's ``system-out`` points into."""
    return write_atomic(path, '<?xml version="1.0" encoding="utf-8"?>\n'
                        + run_document(run, suite_name, results_dir) + "\n", mode)


def write_junit(records: Iterable[Record], path: Path, suite_name: str = "vioconform",
                suite_properties: dict[str, str] | None = None, status: RunStatus | None = None,
                mode: int = file_mode(DEFAULT_DIR_MODE), results_dir: Path | None = None,
                started: dt.datetime | None = None, hostname: str | None = None) -> Path:
    """Write the JUnit file of ``records`` (:func:`write_run_junit` of :func:`reports.run_data.build_run`);
    ``started`` (aware) and ``hostname``: the run's start and machine, the suite's ``timestamp`` and
    ``hostname``."""
    return write_run_junit(build_run(records, suite_properties, status, started, hostname), path, mode, results_dir,
                           suite_name)
