"""JUnit XML with junit-xml: one test case per rule and configuration, numbers as properties.

junit-xml 1.9 writes properties only per suite; the measured numbers belong to each test
case (as pytest's own JUnit writer puts them), so they are added to the document after.

The suite's properties say whether the run is complete (``complete``, ``interrupted_by``).
A JUnit consumer that reads only test cases must not see an incomplete run as green either:
such a run gets one more case, ``run[incomplete]``, as an error that says what stopped it.
A rule that never started is a skipped case whose message starts with "not run".
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable
from pathlib import Path

from junit_xml import TestCase, TestSuite, to_xml_report_string

from reports.records import Record, RunStatus
from reports.results import DEFAULT_DIR_MODE, file_mode, write_atomic


def _case(r: Record) -> TestCase:
    case = TestCase(name=f"{r.rule}[{r.config}]", classname=f"vioconform.{r.rule}",
                    elapsed_sec=round(r.duration_s, 3), file=r.nodeid.split("::")[0])
    outcome = r.outcome or "error"  # an undecided record is never a pass
    if outcome == "failed":
        case.add_failure_info(message=r.message, output=r.details)
    elif outcome == "error":
        case.add_error_info(message=r.message or "no outcome recorded", output=r.details)
    elif outcome in ("skipped", "not run"):
        case.add_skipped_info(message=r.message)
    return case


def junit_document(records: Iterable[Record], suite_name: str = "vioconform",
                   suite_properties: dict[str, str] | None = None, status: RunStatus | None = None) -> str:
    recs = list(records)
    cases = [_case(r) for r in recs]
    props = dict(suite_properties or {})
    if status is not None:
        props.update(status.properties())
        if not status.complete:
            run = TestCase(name="run[incomplete]", classname="vioconform.run")
            run.add_error_info(message=status.banner(), error_type="incomplete")
            cases.append(run)
    text = to_xml_report_string([TestSuite(suite_name, cases, properties=props or None)], encoding="utf-8")
    root = ET.fromstring(text)
    for elem, r in zip(root.iter("testcase"), recs, strict=False):  # run[incomplete], if any, comes last
        measured = r.measured()
        if measured:
            case_props = ET.Element("properties")
            for k, v in sorted(measured.items()):
                ET.SubElement(case_props, "property", {"name": k, "value": str(v)})
            elem.insert(0, case_props)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode")


def write_junit(records: Iterable[Record], path: Path, suite_name: str = "vioconform",
                suite_properties: dict[str, str] | None = None, status: RunStatus | None = None,
                mode: int = file_mode(DEFAULT_DIR_MODE)) -> Path:
    """Write the JUnit file atomically (see :func:`reports.results.write_atomic`)."""
    return write_atomic(path, '<?xml version="1.0" encoding="utf-8"?>\n'
                        + junit_document(records, suite_name, suite_properties, status) + "\n", mode)
