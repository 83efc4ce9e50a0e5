"""The HTML report: a verdict row per record and the depth picture built from the record's numbers."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from reports.html import depth_chart, depth_series, write_html
from reports.records import Record, settle

# Recorded: virtio-scsi with --inject tcq-off (guest holds 30, host sees 1).
TCQ_OFF = {"qd1_host_depth": 1.0, "qd1_guest_aqu_sz": 0.9, "qd32_host_depth": 1.0, "qd32_guest_aqu_sz": 30.1,
           "qd32_iops": 153.0}


def test_series_from_properties() -> None:
    assert depth_series(TCQ_OFF) == [(1, 0.9, 1.0), (32, 30.1, 1.0)]
    assert depth_series({"qd32_iops": 1}) == []


def test_chart_is_valid_svg_with_bar_heights_in_proportion() -> None:
    svg = ET.fromstring(depth_chart(depth_series(TCQ_OFF)))
    rects = [r for r in svg.iter("{http://www.w3.org/2000/svg}rect") if r.find("{http://www.w3.org/2000/svg}title") is not None]
    heights = {r.find("{http://www.w3.org/2000/svg}title").text: float(r.get("height")) for r in rects}
    assert heights["offered: 32"] > heights["guest aqu-sz: 30.1"] > 25 * heights["host depth: 1"]


def test_report_file(tmp_path: Path) -> None:
    recs = [Record("n1", "queue-depth", "libvirt:virtio-scsi:latency5ms", dict(TCQ_OFF), "failed", "host saw 1.0 <b>"),
            Record("n2", "queue-depth", "libvirt:virtio-blk:latency5ms", {}, "skipped", "no SCSI queue_depth")]
    text = write_html(recs, tmp_path / "r.html", subtitle="inject: tcq-off").read_text()
    assert text.count("<svg") == 1 and "FAILED" in text and "SKIPPED" in text
    assert "host saw 1.0 &lt;b&gt;" in text and "<b>" not in text.split("<body>")[1].split("<table>")[0]


def test_pair_chart_shows_expected_and_host_side() -> None:
    from reports.html import pair_chart
    # recorded: io-breakup on virtio-blk, 64 KiB host requests against 1 MiB expected
    svg = pair_chart("io-size", {"max_transfer_bytes": 1310720, "request_bytes": 1048576,
                                 "expected_request_bytes": 1048576, "host_request_bytes_mean": 65536})
    assert svg.startswith("<svg") and ">1024<" in svg and ">64<" in svg
    assert pair_chart("limits", {"x": 1}) == ""
    assert pair_chart("direct-io", {"dsync_guest_syncs": 100}) == ""  # half a pair is not drawn


def test_incomplete_run_has_a_banner_and_no_pass_it_did_not_reach(tmp_path: Path) -> None:
    live = [Record("n1", "queue-depth", "libvirt:virtio-blk:latency5ms", dict(TCQ_OFF), started=True),
            Record("n2", "io-size", "libvirt:virtio-blk:latency5ms")]
    records, status = settle(live, "SIGTERM")
    text = write_html(records, tmp_path / "r.html", status=status).read_text()
    body = text.split("<body>")[1]
    assert 'id="incomplete"' in body and "RUN INCOMPLETE: interrupted by SIGTERM" in body
    assert "PASSED" not in body and ">ERROR<" in body and ">NOT RUN<" in body
    assert "interrupted by SIGTERM: did not finish" in body


def test_complete_run_has_no_banner(tmp_path: Path) -> None:
    records, status = settle([Record("n1", "limits", "c", {}, "passed", started=True)])
    text = write_html(records, tmp_path / "r.html", status=status).read_text()
    assert "RUN INCOMPLETE" not in text and ">PASSED<" in text
