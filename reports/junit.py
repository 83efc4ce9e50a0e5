"""JUnit XML with junit-xml: one test case per rule and configuration, numbers as properties.

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

#: The HTML report's file name in a results directory (fixtures/finish.py writes it there).
REPORT_NAME = "report.html"


def _body(r: Record) -> str:
    """The whole text of a failure or error: its message, then what pytest reported if that adds to it."""
    details = r.details.strip()
    if not details or r.message.strip() in details:
        return details or r.message
    return f"{r.message}\n\n{details}"


def where(r: Record, results_dir: Path) -> str:
    """A case's ``system-out``: its section of the report and its raw-data directory."""
    return (f"report section: {results_dir / REPORT_NAME}#{section_id(r.rule, r.config)}\n"
            f"raw data: {raw_dir(results_dir, r.config)}")


def _case(r: Record, results_dir: Path | None) -> TestCase:
    case = TestCase(name=f"{r.rule}[{r.config}]", classname=f"vioconform.{r.rule}",
                    elapsed_sec=round(r.duration_s, 3), file=r.nodeid.split("::")[0],
                    stdout=where(r, results_dir) if results_dir is not None else None)
    outcome = r.outcome or "error"  # an undecided record is never a pass
    if outcome == "failed":
        case.add_failure_info(message=r.headline, output=_body(r))
    elif outcome == "error":
        case.add_error_info(message=r.headline or "no outcome recorded", output=_body(r))
    elif outcome in ("skipped", "not run"):
        case.add_skipped_info(message=r.message)
    return case


def case_properties(r: Record) -> dict[str, str]:
    """A case's properties: its measured numbers, a failure's ``blame`` and ``blame_reason``, and
    ``reproducer``, its reproducer bundle's directory where one was written."""
    props = {k: str(v) for k, v in r.measured().items()}
    if r.outcome == "failed":
        props["blame"] = r.blame or "unknown"
        props["blame_reason"] = r.blame_reason or "the rule failed outside its verdict: no layer was judged"
    if r.reproducer:
        props["reproducer"] = r.reproducer
    return props


def junit_document(records: Iterable[Record], suite_name: str = "vioconform",
                   suite_properties: dict[str, str] | None = None, status: RunStatus | None = None,
                   results_dir: Path | None = None, started: dt.datetime | None = None,
                   hostname: str | None = None) -> str:
    recs = list(records)
    cases = [_case(r, results_dir) for r in recs]
    props = dict(suite_properties or {})
    if status is not None:
        props.update(status.properties())
        if not status.complete:
            run = TestCase(name="run[incomplete]", classname="vioconform.run")
            run.add_error_info(message=status.banner(), error_type="incomplete")
            cases.append(run)
    stamp = started.astimezone(dt.UTC).isoformat(timespec="seconds") if started is not None else None
    text = to_xml_report_string([TestSuite(suite_name, cases, properties=props or None, timestamp=stamp,
                                           hostname=hostname)], encoding="utf-8")
    root = ET.fromstring(text)
    for elem, r in zip(root.iter("testcase"), recs, strict=False):  # run[incomplete], if any, comes last
        measured = case_properties(r)
        if measured:
            case_props = ET.Element("properties")
            for k, v in sorted(measured.items()):
                ET.SubElement(case_props, "property", {"name": k, "value": v})
            elem.insert(0, case_props)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode")


def write_junit(records: Iterable[Record], path: Path, suite_name: str = "vioconform",
                suite_properties: dict[str, str] | None = None, status: RunStatus | None = None,
                mode: int = file_mode(DEFAULT_DIR_MODE), results_dir: Path | None = None,
                started: dt.datetime | None = None, hostname: str | None = None) -> Path:
    """Write the JUnit file atomically (see :func:`reports.results.write_atomic`). ``results_dir``:
    the run's results directory, which each case's ``system-out`` points into; ``started`` (aware)
    and ``hostname``: the run's start and machine, the suite's ``timestamp`` and ``hostname``."""
    return write_atomic(path, '<?xml version="1.0" encoding="utf-8"?>\n'
                        + junit_document(records, suite_name, suite_properties, status, results_dir, started,
                                         hostname) + "\n", mode)
