"""JUnit XML with junit-xml: one test case per rule and configuration, numbers as properties.

junit-xml 1.9 writes properties only per suite; the measured numbers belong to each test
case (as pytest's own JUnit writer puts them), so they are added to the document after.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable
from pathlib import Path

from junit_xml import TestCase, TestSuite, to_xml_report_string

from reports.records import Record


def junit_document(records: Iterable[Record], suite_name: str = "vioconform",
                   suite_properties: dict[str, str] | None = None) -> str:
    recs = list(records)
    cases = []
    for r in recs:
        case = TestCase(name=f"{r.rule}[{r.config}]", classname=f"vioconform.{r.rule}",
                        elapsed_sec=round(r.duration_s, 3), file=r.nodeid.split("::")[0])
        if r.outcome == "failed":
            case.add_failure_info(message=r.message, output=r.details)
        elif r.outcome == "error":
            case.add_error_info(message=r.message, output=r.details)
        elif r.outcome == "skipped":
            case.add_skipped_info(message=r.message)
        cases.append(case)
    text = to_xml_report_string([TestSuite(suite_name, cases, properties=suite_properties)], encoding="utf-8")
    root = ET.fromstring(text)
    for elem, r in zip(root.iter("testcase"), recs):
        if r.properties:
            props = ET.Element("properties")
            for k, v in sorted(r.properties.items()):
                ET.SubElement(props, "property", {"name": k, "value": str(v)})
            elem.insert(0, props)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode")


def write_junit(records: Iterable[Record], path: Path, suite_name: str = "vioconform",
                suite_properties: dict[str, str] | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('<?xml version="1.0" encoding="utf-8"?>\n'
                    + junit_document(records, suite_name, suite_properties) + "\n")
    return path
