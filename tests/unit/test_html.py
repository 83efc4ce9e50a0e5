"""The HTML report: a verdict row per record and the pictures drawn from the verdict's typed figures."""

from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ET
from pathlib import Path

from model.rules.figures import DepthFigure, DepthGroup, Pair, PairFigure
from model.rules.io_size import IoSizeMeasurement, judge_io_size
from model.rules.queue_depth import judge_queue_depth
from reports.html import chart, depth_chart, pair_chart, write_html
from reports.records import Record, settle
from tests.unit.test_queue_depth_verdict import TCQ_OFF as TCQ_OFF_POINTS

SVG = "{http://www.w3.org/2000/svg}"

# Recorded: virtio-scsi with --inject tcq-off (guest holds 30, host sees 0.8).
TCQ_OFF_VERDICT = judge_queue_depth(TCQ_OFF_POINTS, 128)
TCQ_OFF = DepthFigure((DepthGroup(1, 0.9, 0.8), DepthGroup(32, 30.1, 0.8)))
# Recorded: io-breakup on virtio-blk (suite run of 2026-11-23), 64 KiB host requests against 1 MiB expected.
IO_BREAKUP = IoSizeMeasurement(request_bytes=1 << 20, max_transfer_bytes=1310720,
                               max_transfer_source="max_sectors_kb 1280 as probed", host_request_bytes=65536,
                               host_requests=15872, guest_max_sectors_kb=64, guest_max_hw_sectors_kb=2147483647,
                               host_source="exact (QEMU trace events)", fio_iops=291.1, host_request_bytes_p50=65536)


def test_depth_chart_is_valid_svg_with_bar_heights_in_proportion_and_inside_the_plot() -> None:
    svg = ET.fromstring(depth_chart(TCQ_OFF))
    rects = [r for r in svg.iter(f"{SVG}rect") if r.find(f"{SVG}title") is not None]
    heights = {r.findtext(f"{SVG}title") or "": float(r.get("height", "0")) for r in rects}
    assert heights["offered: 32"] > heights["guest aqu-sz: 30.1"] > 25 * heights["host depth: 0.8"]
    assert depth_chart(DepthFigure(())) == ""


def test_depth_scale_reaches_the_offered_depth() -> None:
    # Recorded: healthy virtio-scsi; the offered 32 is the tallest bar and must not be cut off at the top.
    svg = ET.fromstring(depth_chart(DepthFigure((DepthGroup(1, 0.92, 0.85), DepthGroup(32, 27.03, 25.37)))))
    assert [t.text for t in svg.iter(f"{SVG}text")][:3] == ["0", "16", "32"]
    assert all(float(r.get("y", "0")) >= 0 for r in svg.iter(f"{SVG}rect"))


def test_pair_chart_shows_expected_and_host_side() -> None:
    svg = pair_chart(PairFigure((Pair("request size: expected / host", 1024.0, 64.0, "KiB"),)))
    assert svg.startswith("<svg") and ">1024 KiB<" in svg and ">64 KiB<" in svg
    assert pair_chart(PairFigure(())) == ""


def test_chart_draws_each_kind_with_its_own_function() -> None:
    pairs = PairFigure((Pair("a / b", 3.0, 4.0),))
    assert chart(TCQ_OFF) == depth_chart(TCQ_OFF) and chart(pairs) == pair_chart(pairs)


def test_report_file(tmp_path: Path) -> None:
    recs = [Record("n1", "queue-depth", "libvirt:virtio-scsi:latency5ms", {}, "failed", "host saw 0.8 <b>",
                   verdict=TCQ_OFF_VERDICT),
            Record("n2", "queue-depth", "libvirt:virtio-blk:latency5ms", {}, "skipped", "no SCSI queue_depth")]
    text = write_html(recs, tmp_path / "r.html", subtitle="inject: tcq-off").read_text()
    assert text.count("<svg") == 1 and "FAILED" in text and "SKIPPED" in text
    assert "host saw 0.8 &lt;b&gt;" in text and "<b>" not in text.split("<body>")[1].split("<table>")[0]
    assert TCQ_OFF_VERDICT.figures == (TCQ_OFF,)
    assert "<td>qd32_guest_aqu_sz</td><td>30.1</td>" in text  # the verdict's numbers, flattened for the table


def _svgs(text: str) -> list[ET.Element]:
    return [ET.fromstring("<svg" + part.split("</svg>")[0] + "</svg>") for part in text.split("<svg")[1:]]


def _titles(svg: ET.Element) -> list[str]:
    return [t.text or "" for t in svg.iter(f"{SVG}title")]


def test_renamed_or_dropped_properties_do_not_change_the_pictures(tmp_path: Path) -> None:
    io_size = judge_io_size(IO_BREAKUP)
    renamed = {("expected_request_size" if k == "expected_request_bytes" else k): v
               for k, v in io_size.properties.items() if k != "host_request_bytes_mean"}
    depth = dataclasses.replace(TCQ_OFF_VERDICT, properties={
        k.replace("host_depth", "depth_seen_by_host"): v for k, v in TCQ_OFF_VERDICT.properties.items()
        if not k.endswith("guest_aqu_sz")})
    recs = [Record("n1", "io-size", "c", {}, "failed", "split", verdict=dataclasses.replace(io_size,
                                                                                           properties=renamed)),
            Record("n2", "queue-depth", "c", {}, "failed", "tcq", verdict=depth)]
    text = write_html(recs, tmp_path / "r.html").read_text()
    pair_svg, depth_svg = _svgs(text)
    assert _titles(pair_svg) == ["1024 KiB", "64 KiB"]
    assert _titles(depth_svg) == ["offered: 1", "guest aqu-sz: 0.9", "host depth: 0.8",
                                  "offered: 32", "guest aqu-sz: 30.1", "host depth: 0.8"]
    assert "<td>expected_request_size</td>" in text and "host_request_bytes_mean" not in text
    assert "<td>qd32_depth_seen_by_host</td>" in text and "qd32_host_depth<" not in text and "aqu_sz<" not in text


def test_incomplete_run_has_a_banner_and_no_pass_it_did_not_reach(tmp_path: Path) -> None:
    live = [Record("n1", "queue-depth", "libvirt:virtio-blk:latency5ms", {"qd1_iops": 150.0}, started=True),
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
