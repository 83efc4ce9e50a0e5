"""What was tested: the run's own properties (fixtures.run_properties.RUN_PROPERTIES_KEY, filled by the
fixtures) in the JUnit suite properties and in report.html's "What was tested" tables."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from model.parse.guestfacts import disk_properties, image_properties, parse_disk_facts, parse_system_facts
from reports.html import report_document, what_was_tested
from reports.junit import junit_document
from reports.records import Record
from tests.unit.fake_shell import DATA

ROOT = Path(__file__).resolve().parents[2]
FACTS = DATA / "guest" / "facts"
KERNEL = "6.1.0-56-amd64"


def embedded_run() -> dict[str, str]:
    """The properties the fixtures build for the embedded guest with virtio-scsi and virtio-blk."""
    props = {**image_properties("embedded:56a4ad75000f8008", "initramfs"),
             **parse_system_facts((FACTS / "system.txt").read_text()).properties()}
    for controller, module in (("virtio-scsi", "virtio_scsi"), ("virtio-blk", "virtio_blk")):
        props.update(disk_properties(controller, "dut", parse_disk_facts((FACTS / f"disk-{controller}.txt").read_text()),
                                     KERNEL, module))
    return props


def test_junit_suite_properties_carry_what_was_tested() -> None:
    rec = Record("suites/test_limits.py::t[a]", "limits", "libvirt:virtio-scsi:latency5ms", outcome="passed")
    root = ET.fromstring(junit_document([rec], suite_properties={"hypervisor": "libvirt", **embedded_run()}))
    suite = root.find("testsuite") if root.tag == "testsuites" else root
    assert suite is not None
    props = {p.get("name"): p.get("value") for p in suite.find("properties") or []}
    assert props["image"] == "embedded:56a4ad75000f8008" and props["guest.kernel"] == KERNEL
    assert props["disk.virtio-scsi.driver"] == "virtio_scsi" and props["disk.virtio-scsi.boot.queue_depth"] == "128"
    assert props["disk.virtio-blk.boot.queue_depth"] == "none"
    assert props["disk.virtio-blk.driver_version"] == f"in-tree {KERNEL}"


def test_report_shows_what_was_tested_one_column_per_controller() -> None:
    table = what_was_tested({"hypervisor": "libvirt", **embedded_run()})
    assert table.startswith('<section id="tested"><h2 id="tested-title">What was tested</h2>')
    assert "<tr><td>image</td><td>embedded:56a4ad75000f8008</td></tr>" in table
    assert "<th>virtio-scsi</th><th>virtio-blk</th>" in table
    # the same setting on both controllers is one row; a row where they differ is marked, in words
    # and tinted (not by its colour alone)
    assert "<tr><td>boot.nr_requests</td><td>256</td><td>256</td></tr>" in table
    assert ('<tr><td>boot.queue_depth <em>(differs)</em></td><td style="background:#fff3e0">128</td>'
            '<td style="background:#fff3e0">none</td></tr>') in table
    rows = [r.split("</td>")[0].removesuffix(" <em>(differs)</em>") for r in table.split("<tr><td>")[1:]]
    assert rows.index("driver") < rows.index("boot.scheduler")  # drivers first
    assert what_was_tested({}) == ""


def test_report_escapes_what_the_guest_said() -> None:
    doc = report_document([], properties={"guest.os_release": "<b>x</b>", "disk.a.driver": "a&b"})
    assert "&lt;b&gt;x&lt;/b&gt;" in doc and "a&amp;b" in doc and "<b>x" not in doc


CONFTEST = textwrap.dedent('''
    import pytest

    from fixtures import PLUGIN_MODULES
    from fixtures.run_properties import RUN_PROPERTIES_KEY

    pytest_plugins = ["fixtures.options", *PLUGIN_MODULES]

    @pytest.fixture
    def facts(pytestconfig):
        pytestconfig.stash.setdefault(RUN_PROPERTIES_KEY, {}).update(
            {"guest.kernel": "6.1.0-28-cloud-amd64", "disk.virtio-scsi.boot.scheduler": "mq-deadline",
             "fio_version": "fio-3.33"})
''')
RULES = textwrap.dedent('''
    import pytest

    @pytest.mark.rule("limits")
    def test_limits(record, facts):
        pass
''')


def test_the_plugin_writes_the_fixtures_properties_into_junit_and_report(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "test_rules.py").write_text(RULES)
    proc = subprocess.run([sys.executable, "-m", "pytest", "rules", "-p", "no:cacheprovider", "--rootdir",
                           str(tmp_path), "-o", "pythonpath=.", "--results-dir", str(tmp_path / "out")],
                          check=False, cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": f"{ROOT}:{tmp_path}", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    props = {p.get("name"): p.get("value") for p in ET.parse(tmp_path / "out" / "junit.xml").iter("property")}
    assert props["guest.kernel"] == "6.1.0-28-cloud-amd64" and props["fio_version"] == "fio-3.33"
    assert props["disk.virtio-scsi.boot.scheduler"] == "mq-deadline" and props["hypervisor"] == "libvirt"
    html = (tmp_path / "out" / "report.html").read_text()
    assert "What was tested" in html and "<th>virtio-scsi</th>" in html and "<td>fio-3.33</td>" in html


def test_two_runs_side_by_side(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from reports.store.compare import main
    from reports.store.tested import side_by_side

    rec = Record("suites/test_limits.py::t[a]", "limits", "libvirt:virtio-scsi:latency5ms", outcome="passed")
    a = embedded_run()
    b = {**a, "guest.kernel": "6.1.0-28-cloud-amd64", "disk.virtio-scsi.boot.scheduler": "mq-deadline"}
    (tmp_path / "a.xml").write_text(junit_document([rec], suite_properties=a))
    (tmp_path / "b.xml").write_text(junit_document([Record(rec.nodeid, rec.rule, rec.config, outcome="failed",
                                                           message="x")], suite_properties=b))
    assert main([str(tmp_path / "a.xml"), str(tmp_path / "b.xml")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[:2] for line in lines[1:]] == [
        ["*", "disk.virtio-scsi.boot.scheduler"], ["*", "guest.kernel"],
        ["*", "verdict.limits[libvirt:virtio-scsi:latency5ms]"], ["*", "blame.limits[libvirt:virtio-scsi:latency5ms]"]]
    assert lines[2].split()[2:] == [KERNEL, "6.1.0-28-cloud-amd64"]
    assert len(side_by_side([a, b], everything=True)) == len(a)
    (tmp_path / "c.xml").write_text("<html/>")
    assert main([str(tmp_path / "a.xml"), str(tmp_path / "c.xml")]) == 2
    assert "c.xml: no <testsuite> element" in capsys.readouterr().err
