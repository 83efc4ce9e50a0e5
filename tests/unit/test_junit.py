"""The JUnit file: one case per rule and configuration, measured numbers as case properties."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from reports.junit import write_junit
from reports.records import Record


def test_cases_outcomes_and_properties(tmp_path: Path) -> None:
    recs = [
        Record("suites/test_queue_depth.py::t[a]", "queue-depth", "libvirt:virtio-scsi:latency5ms",
               {"qd32_host_depth": 25.37}, "passed", duration_s=12.5),
        Record("suites/test_queue_depth.py::t[b]", "queue-depth", "libvirt:virtio-blk:latency5ms",
               {"qd32_host_depth": 0.8}, "failed", "host saw 0.8", "details"),
        Record("suites/test_queue_depth.py::t[c]", "queue-depth", "libvirt:ide:latency5ms", {}, "skipped", "why"),
    ]
    path = write_junit(recs, tmp_path / "j.xml", suite_properties={"hypervisor": "libvirt"})
    root = ET.parse(path).getroot()
    cases = root.findall(".//testcase")
    assert [c.get("name") for c in cases] == ["queue-depth[libvirt:virtio-scsi:latency5ms]",
                                              "queue-depth[libvirt:virtio-blk:latency5ms]",
                                              "queue-depth[libvirt:ide:latency5ms]"]
    props = {p.get("name"): p.get("value") for p in cases[0].find("properties")}
    assert props == {"qd32_host_depth": "25.37"}
    assert cases[1].find("failure").get("message") == "host saw 0.8"
    assert cases[2].find("skipped") is not None
    suite = root.find("testsuite")
    assert suite.get("failures") == "1" and suite.get("skipped") == "1"
