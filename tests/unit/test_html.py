"""The HTML report: a verdict row per record and the pictures drawn from the verdict's typed figures."""

from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from model.judging.figures import DepthFigure, DepthGroup, HistogramFigure, Pair, PairFigure, buckets
from model.rules.io_size import IoSizeMeasurement, judge_io_size
from model.rules.queue_depth import judge_queue_depth
from reports.charts import depth_axis_top, depth_svg, pair_svg
from reports.html import chart, write_html
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


def _texts(svg: str | ET.Element) -> list[str]:
    """Every text in an SVG (matplotlib keeps text as text: ``svg.fonttype none``)."""
    root = ET.fromstring(svg) if isinstance(svg, str) else svg
    return ["".join(t.itertext()).strip() for t in root.iter(f"{SVG}text")]


def test_depth_chart_labels_every_bar_and_reaches_the_offered_depth() -> None:
    texts = _texts(depth_svg(TCQ_OFF))
    assert {"offered 1", "offered 32", "offered", "guest aqu-sz", "host depth"} <= set(texts)
    assert {"32", "30", "0.8", "0.9"} <= set(texts)  # each bar's value over it
    assert depth_svg(DepthFigure(())) == ""


def test_depth_scale_reaches_the_offered_depth() -> None:
    # Recorded: healthy virtio-scsi; the offered 32 is the tallest bar and must not be cut off at the top.
    healthy = DepthFigure((DepthGroup(1, 0.92, 0.85), DepthGroup(32, 27.03, 25.37)))
    assert depth_axis_top(healthy) >= 32
    # a host that saw more than was offered (a wrong count) is drawn, not cut off
    assert depth_axis_top(DepthFigure((DepthGroup(8, 7.0, 40.0),))) >= 40


def test_charts_are_deterministic_svg() -> None:
    assert depth_svg(TCQ_OFF) == depth_svg(TCQ_OFF) and depth_svg(TCQ_OFF).startswith("<svg")
    assert "<?xml" not in depth_svg(TCQ_OFF)


def test_pair_chart_shows_expected_and_host_side() -> None:
    svg = pair_svg(PairFigure((Pair("request size: expected / host", 1024.0, 64.0, "KiB"),)))
    assert {"1,024 KiB", "64 KiB", "request size: expected / host"} <= set(_texts(svg))
    assert pair_svg(PairFigure(())) == ""


def test_chart_draws_each_kind_with_its_own_function() -> None:
    pairs = PairFigure((Pair("a / b", 3.0, 4.0),))
    assert chart(TCQ_OFF) == depth_svg(TCQ_OFF) and chart(pairs) == pair_svg(pairs)


def test_histograms_host_beside_guest() -> None:
    fig = HistogramFigure("queue-depth, offered 32", "exact (QEMU trace events)",
                          buckets((1, 2, 4, 8, 12, 16, 20, 24, 28, 32, 64), (0, 0, 1, 3, 5, 9, 30, 100, 300, 900, 0, 0)),
                          buckets((4095, 4096, 8191), (0, 1552, 0, 0)), buckets((1000, 5000, 10000), (0, 10, 1530, 12),
                                                                               "us"),
                          (("16", 1.2), ("32", 98.8)), (("p50", 6128.0), ("p99", 9000.0)))
    texts = _texts(chart(fig))
    assert {"host: outstanding I/Os at issue", "host: I/O length (bytes)", "host: latency",
            "guest: fio submitted depth", "guest: completion latency"} <= set(texts)
    assert {"<=4", "<=32", "<=4K", "<=10000us", ">10000us"} <= set(texts) and "<=1" not in texts  # empty ends cut
    missing = dataclasses.replace(fig, source="", outstanding=(), io_length=(), latency_us=(),
                                  host_missing="this backend has no per-request host trace")
    assert "no host trace" in _texts(chart(missing))


def test_report_file(tmp_path: Path) -> None:
    recs = [Record("n1", "queue-depth", "libvirt:virtio-scsi:latency5ms", {}, "failed", "host saw 0.8 <b>",
                   verdict=TCQ_OFF_VERDICT),
            Record("n2", "queue-depth", "libvirt:virtio-blk:latency5ms", {}, "skipped", "no SCSI queue_depth")]
    text = write_html(recs, tmp_path / "r.html", subtitle="inject: tcq-off").read_text()
    assert text.count("<svg") == 1 and "FAILED" in text and "SKIPPED" in text
    assert "host saw 0.8 &lt;b&gt;" in text and "<b>" not in text.split("<body>")[1].split("<table>")[0]
    (drawn,) = TCQ_OFF_VERDICT.figures
    assert isinstance(drawn, DepthFigure)
    assert [dataclasses.replace(g, host_min=None) for g in drawn.groups] == list(TCQ_OFF.groups)
    assert [g.host_min for g in drawn.groups] == pytest.approx([0.36, 12.04])  # 0.4 x min(offered, aqu-sz)
    assert "<td>qd32_guest_aqu_sz</td><td>30.1</td>" in text  # the verdict's numbers, flattened for the table


def _svgs(text: str) -> list[ET.Element]:
    return [ET.fromstring("<svg" + part.split("</svg>")[0] + "</svg>") for part in text.split("<svg")[1:]]


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
    pair_pic, depth_pic = _svgs(text)
    assert {"1,024 KiB", "64 KiB"} <= set(_texts(pair_pic))
    assert {"offered 1", "offered 32", "0.9", "30", "0.8"} <= set(_texts(depth_pic))
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


def test_a_failed_verdict_names_its_layer_in_a_column_and_over_its_section(tmp_path: Path) -> None:
    recs = [Record("n1", "queue-depth", "libvirt:virtio-scsi:latency5ms", {}, "failed",
                   "queue-depth failed on x\nFAIL: the host saw 1.0 <b>", verdict=TCQ_OFF_VERDICT,
                   blame="guest configuration", blame_reason="queue depth was 128 when probed and is 1 now"),
            Record("n2", "io-size", "libvirt:virtio-scsi:latency5ms", {}, "passed")]
    text = write_html(recs, tmp_path / "r.html").read_text()
    table = text.split("<h2>Verdicts</h2>")[1].split("</table>")[0]
    assert "<th scope=\"col\">blame</th>" in table
    assert ('<td class="blame" title="queue depth was 128 when probed and is 1 now">guest configuration</td>'
            "<td class=\"message\">FAIL: the host saw 1.0 &lt;b&gt;</td>") in table  # the message column: the first FAIL: line
    assert 'href="#queue-depth--libvirt-virtio-scsi-latency5ms"' in text.split('id="verdict-grid"')[1]
    section = text.split('<section id="queue-depth--libvirt-virtio-scsi-latency5ms">')[1].split("</section>")[0]
    assert "<strong>blame: guest configuration</strong>: queue depth was 128 when probed and is 1 now" in section
    assert 'class="blame"' not in text.split('<section id="io-size--libvirt-virtio-scsi-latency5ms">')[1]
