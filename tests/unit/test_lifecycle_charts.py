"""The lifecycle rules' pictures: byte ranges in lanes (discard) and step series over time (resize, hotplug),
each an ``<svg role="img">`` with a title and a description in words, told apart without colour, drawn in
the rule's section of the report with a caption; a figure with nothing to draw says so."""

from __future__ import annotations

import dataclasses
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from model.judging.figures import Figure, RangeFigure, RangeLane, StepSeries, TimelineFigure
from model.rules.discard import DiscardLimits, judge_discard
from model.rules.hotplug import judge_hotplug
from model.rules.resize import bound_for, judge_resize
from reports.a11y import GUEST, HOST, NOTHING_TO_DRAW, chart_summary, chart_title
from reports.charts import range_svg, timeline_svg
from reports.html import chart, figure_html, write_html
from reports.records import Record
from tests.model.test_discard import SCSI, WHERE, _healthy
from tests.model.test_hotplug import BLK as HOTPLUG_BLK
from tests.model.test_hotplug import SCSI_SURPRISE
from tests.model.test_resize import _run
from tests.unit.test_html import SVG, _texts

DISCARD = judge_discard(SCSI, _healthy(SCSI, True), WHERE, "sdb")
RESIZE = judge_resize(_run("virtio_blk", "vdb", 0.108, 0.09), bound_for("virtio_blk"))
HOTPLUG = judge_hotplug(dataclasses.replace(HOTPLUG_BLK, controller="virtio-scsi", surprise=SCSI_SURPRISE))
RANGES = next(f for f in DISCARD.figures if isinstance(f, RangeFigure))
GROW, SHRINK = (f for f in RESIZE.figures if isinstance(f, TimelineFigure))
PRESENCE, SURPRISE = (f for f in HOTPLUG.figures if isinstance(f, TimelineFigure))


def _title_desc(svg: str) -> tuple[str, str]:
    """The chart's accessible name and description: its first two children."""
    root = ET.fromstring(svg)
    assert root.get("role") == "img"
    title, desc = root[0], root[1]
    assert title.tag == f"{SVG}title" and desc.tag == f"{SVG}desc"
    return title.text or "", desc.text or ""


def test_ranges_chart_draws_each_lane_and_range_with_words_and_hatches() -> None:
    svg = range_svg(RANGES)
    title, desc = _title_desc(svg)
    assert title == "discarded ranges: guest and host (3 range(s))"
    assert desc.startswith("guest: discarded: aligned 1 MiB at 512 MiB; unaligned 1 MiB + 2560 bytes at "
                           "514 MiB + 1536 bytes; beyond_max 2 MiB at 517 MiB. host: discards counted (amounts): "
                           "aligned 1 MiB (1 request);")
    texts = _texts(svg)
    assert {"guest: discarded", "host: discards counted", "host: device counted", "host: allocation freed",
            "aligned", "unaligned", "beyond_max", "unaligned: 2 requests", "beyond_max: 8 requests",
            "unaligned: 2560 bytes kept", "offset on the disk (MiB)"} <= set(texts)
    assert texts.count("(amount, from") == 3  # each host lane says it is an amount, drawn from the range's start
    # a hatch per range (x2 sides' colours): the same range is told by its pattern in every lane, not its colour
    assert len(set(re.findall(r'<pattern id="([^"]+)"', svg))) == 6
    assert chart(RANGES) == svg


def test_a_refused_range_is_an_outline_and_the_hosts_nothing_is_written() -> None:
    refused = dataclasses.replace(RANGES, lanes=(
        dataclasses.replace(RANGES.lanes[0], ranges=tuple(dataclasses.replace(r, note="refused", failed=True)
                                                          for r in RANGES.lanes[0].ranges)),
        dataclasses.replace(RANGES.lanes[1], ranges=tuple(dataclasses.replace(r, length_bytes=0, note="0 requests")
                                                          for r in RANGES.lanes[1].ranges))))
    texts = _texts(range_svg(refused))
    assert {"aligned: refused", "aligned: none (0 requests)", "beyond_max: none (0 requests)"} <= set(texts)


def test_timeline_chart_draws_each_side_its_sizes_and_its_events() -> None:
    svg = timeline_svg(GROW)
    title, desc = _title_desc(svg)
    assert title == "grow: vdb's size, host and guest"
    assert desc.startswith("Time in s from the host's grow request, to 0.112 s. host size: 1024 MiB at 0 s, 1088 MiB "
                           "from 0.004 s. guest size: 1024 MiB at 0 s, 1088 MiB from 0.112 s. Marked: host call "
                           "returned at 0.004 s; guest showed the host's size at 0.112 s.")
    texts = _texts(svg)
    assert {"host size", "guest size", "1024 MiB", "1088 MiB", "host call returned (0.004 s)",
            "guest showed the host's size (0.112 s)", "s from the host's grow request"} <= set(texts)
    # the guest's line is dashed, the host's solid: the sides differ without their colours
    lines = re.findall(r'style="([^"]*stroke-width: 1.6[^"]*)"', svg)  # the series' lines, host first
    assert [("dasharray" in x, HOST.lower() in x, GUEST.lower() in x) for x in lines] == [
        (False, True, False), (True, False, True)], lines
    assert chart(GROW) == svg and chart(SHRINK) == timeline_svg(SHRINK)


def test_presence_timelines_name_their_levels() -> None:
    texts = _texts(timeline_svg(PRESENCE))
    assert {"host: disk present", "guest: disk present", "present", "absent",
            "host: remove request (0.33 s)"} <= set(texts)
    _, desc = _title_desc(timeline_svg(SURPRISE))
    assert "host: disk present: present at 0 s, absent from 0.47 s." in desc and "Marked: fio ended at 0.15 s." in desc


def test_figures_with_no_data_say_there_is_nothing_to_draw() -> None:
    (none,) = judge_discard(DiscardLimits(0, 0, 0), [], WHERE, "hdb").figures
    assert isinstance(none, RangeFigure)
    empties: list[Figure] = [none, RangeFigure("r", ()), RangeFigure("r", (RangeLane("guest: discarded", "guest", ()),)),
               TimelineFigure("t", "s from x", (), 1.0),
               TimelineFigure("t", "s from x", (StepSeries("host size", "host", ()),), 0.0, unit="bytes")]
    for fig in empties:
        svg = chart(fig)
        title, desc = _title_desc(svg)
        assert title == chart_title(fig) and desc == chart_summary(fig) and desc.startswith(NOTHING_TO_DRAW)
        assert any(t.startswith(NOTHING_TO_DRAW) for t in _texts(svg))
    assert "no range was discarded: the device does not advertise discard" in figure_html(none)


def test_each_rule_section_draws_its_figures_with_a_caption(tmp_path: Path) -> None:
    recs = [Record("n1", "discard", "libvirt:virtio-scsi", {}, "passed", verdict=DISCARD),
            Record("n2", "resize", "libvirt:virtio-blk", {}, "passed", verdict=RESIZE),
            Record("n3", "hotplug", "libvirt:virtio-scsi", {}, "passed", verdict=HOTPLUG)]
    text = write_html(recs, tmp_path / "r.html").read_text()

    def section(anchor: str) -> str:
        return text.split(f'<section id="{anchor}">')[1].split("</section>")[0]
    discard, resize, hotplug = (section(a) for a in ("discard--libvirt-virtio-scsi", "resize--libvirt-virtio-blk",
                                                     "hotplug--libvirt-virtio-scsi"))
    assert discard.count("<figure><svg") == 1 and resize.count("<figure><svg") == 2
    assert hotplug.count("<figure><svg") == 3  # the pairs, the add and removal, the surprise removal
    assert "<figcaption>guest: discarded: aligned 1 MiB at 512 MiB;" in discard
    assert "<figcaption>Time in s from the host&#x27;s shrink request" in resize
    assert "guest: disk present: present at 0 s, absent from 0.16 s." in hotplug
    assert text.count('<svg role="img"') == text.count("<svg") == text.count("<desc>") == 6
