"""The JUnit file: one case per rule and configuration, measured numbers as case properties."""

from __future__ import annotations

import dataclasses
import errno
import os
import stat
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from model.rules.io_size import judge_io_size
from reports.junit import write_junit
from reports.records import Record, RunStatus, settle
from tests.unit.test_html import IO_BREAKUP


def _find(elem: ET.Element | None, tag: str) -> ET.Element:
    found = elem.find(tag) if elem is not None else None
    assert found is not None, tag
    return found


def _props(elem: ET.Element) -> dict[str, str | None]:
    return {p.get("name") or "": p.get("value") for p in _find(elem, "properties")}


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
    assert _props(cases[0]) == {"qd32_host_depth": "25.37"}
    assert _find(cases[1], "failure").get("message") == "host saw 0.8"
    assert cases[2].find("skipped") is not None
    suite = _find(root, "testsuite")
    assert suite.get("failures") == "1" and suite.get("skipped") == "1"


def test_a_verdicts_numbers_are_flattened_into_its_case_with_the_tests_own(tmp_path: Path) -> None:
    verdict = judge_io_size(IO_BREAKUP)
    rec = Record("n1", "io-size", "c", {"guest_avg_request_bytes": 65536}, "failed", "split",
                 verdict=dataclasses.replace(verdict, notes=("a note",)))
    props = _props(_find(ET.parse(write_junit([rec], tmp_path / "j.xml")).getroot(), ".//testcase"))
    assert props["split_factor"] == "16.0" and props["expected_request_bytes"] == "1048576"
    assert props["guest_avg_request_bytes"] == "65536" and props["notes"] == "a note"
    assert set(props) == {*verdict.properties, "guest_avg_request_bytes", "notes", "blame", "blame_reason"}


def _interrupted_run() -> tuple[list[Record], RunStatus]:
    """multi-queue passed, queue-depth cut short by Ctrl-C after its depth-1 window, io-size never started."""
    live = [Record("n1", "multi-queue", "libvirt:virtio-blk:latency5ms", {}, "passed", started=True),
            Record("n2", "queue-depth", "libvirt:virtio-blk:latency5ms", {"qd1_iops": 150.0}, started=True),
            Record("n3", "io-size", "libvirt:virtio-blk:latency5ms")]
    return settle(live, "SIGINT")


def test_interrupted_run_is_an_error_and_incomplete_never_a_pass(tmp_path: Path) -> None:
    records, status = _interrupted_run()
    root = ET.parse(write_junit(records, tmp_path / "j.xml", status=status)).getroot()
    cases = {c.get("name"): c for c in root.iter("testcase")}
    qd = cases["queue-depth[libvirt:virtio-blk:latency5ms]"]
    assert _find(qd, "error").get("message") == "interrupted by SIGINT: did not finish" and qd.find("failure") is None
    assert str(_find(cases["io-size[libvirt:virtio-blk:latency5ms]"], "skipped").get("message")).startswith("not run")
    run = _find(cases["run[incomplete]"], "error")
    assert str(run.get("message")).startswith("RUN INCOMPLETE: interrupted by SIGINT")
    suite = _find(root, "testsuite")
    props = _props(suite)
    assert props["complete"] == "false" and props["interrupted_by"] == "SIGINT"
    assert suite.get("errors") == "2" and suite.get("failures") == "0"


def test_complete_run_is_marked_complete(tmp_path: Path) -> None:
    records, status = settle([Record("n1", "limits", "c", {}, "passed", started=True)])
    root = ET.parse(write_junit(records, tmp_path / "j.xml", status=status)).getroot()
    assert _props(_find(root, "testsuite")) == {"complete": "true"} and len(list(root.iter("testcase"))) == 1


def test_harness_error_is_an_error_element_and_an_undecided_record_is_never_passed(tmp_path: Path) -> None:
    recs = [Record("n1", "queue-depth", "a", {}, "error", "RuntimeError: fio exited 1"),
            Record("n2", "io-size", "a")]  # not settled: a writer must still not show it as passed
    root = ET.parse(write_junit(recs, tmp_path / "j.xml")).getroot()
    cases = list(root.iter("testcase"))
    assert _find(cases[0], "error").get("message") == "RuntimeError: fio exited 1" and cases[0].find("failure") is None
    assert cases[1].find("error") is not None


def test_disk_full_keeps_the_previous_file_whole_and_leaves_no_temporary(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "junit.xml"
    records, status = _interrupted_run()
    write_junit(records, path, status=status)
    before = path.read_bytes()
    real_write = os.write
    budget = [100]  # the disk takes 100 bytes, then is full

    def full_disk(fd: int, data: bytes | memoryview) -> int:
        if budget[0] <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        n = real_write(fd, bytes(data[:budget[0]]))
        budget[0] -= n
        return n

    with monkeypatch.context() as m:
        m.setattr(os, "write", full_disk)
        with pytest.raises(OSError) as e:
            write_junit(records[:1], path)
    assert e.value.errno == errno.ENOSPC
    assert path.read_bytes() == before  # the earlier, whole file
    assert sorted(p.name for p in tmp_path.iterdir()) == ["junit.xml"]
    with monkeypatch.context() as m:
        budget[0] = 100
        m.setattr(os, "write", full_disk)
        with pytest.raises(OSError):
            write_junit(records, tmp_path / "new.xml")
    assert not (tmp_path / "new.xml").exists()  # no file rather than a 0-byte or truncated one


def test_file_is_private_by_default(tmp_path: Path) -> None:
    path = write_junit([], tmp_path / "j.xml")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(write_junit([], tmp_path / "k.xml", mode=0o644).stat().st_mode) == 0o644


FAIL_TEXT = ("queue-depth failed on libvirt:virtio-scsi:latency5ms\ndevice queue depth: 128\n"
             "FAIL: at offered depth 32 the host saw 1.0 in flight; expected at least 12.8\n"
             "FAIL: IOPS scaled 1.0x\nblame: hypervisor: dut disk sda: the device advertises queue depth 1\n"
             "raw data: /r/raw/libvirt_virtio-scsi_latency5ms")


def test_a_failure_message_is_its_first_fail_line_and_the_body_the_whole_text(tmp_path: Path) -> None:
    """CI shows failure@message as one line: before, it was the whole explanation (its first line the rule's name)."""
    rec = Record("suites/test_queue_depth.py::t[a]", "queue-depth", "libvirt:virtio-scsi:latency5ms", {}, "failed",
                 FAIL_TEXT, FAIL_TEXT, blame="hypervisor", blame_reason="dut disk sda: the device advertises 1")
    err = Record("suites/test_io_size.py::t[a]", "io-size", "libvirt:virtio-scsi:latency5ms", {}, "error",
                 "GuestCommandError: fio exited 1\nstderr: no space", "Traceback ...\nGuestCommandError: fio exited 1")
    root = ET.parse(write_junit([rec, err], tmp_path / "j.xml", results_dir=tmp_path / "run")).getroot()
    case, error_case = root.findall(".//testcase")
    failure = _find(case, "failure")
    assert failure.get("message") == "FAIL: at offered depth 32 the host saw 1.0 in flight; expected at least 12.8"
    assert failure.text == FAIL_TEXT
    assert _props(case)["blame"] == "hypervisor" and str(_props(case)["blame_reason"]).startswith("dut disk sda")
    error = _find(error_case, "error")
    assert error.get("message") == "GuestCommandError: fio exited 1" and "stderr: no space" in (error.text or "")
    assert error_case.find("properties") is None  # no verdict, no blame
    # each case names its report section and raw data
    assert _find(case, "system-out").text == (
        f"report section: {tmp_path / 'run' / 'report.html'}#queue-depth--libvirt-virtio-scsi-latency5ms\n"
        f"raw data: {tmp_path / 'run' / 'raw' / 'libvirt_virtio-scsi_latency5ms'}")


def test_a_failure_outside_its_verdict_is_blamed_on_no_layer(tmp_path: Path) -> None:
    rec = Record("n", "queue-depth", "c", {}, "failed", "assert 1 == 2")
    props = _props(_find(ET.parse(write_junit([rec], tmp_path / "j.xml")).getroot(), ".//testcase"))
    assert props["blame"] == "unknown" and "outside its verdict" in str(props["blame_reason"])
