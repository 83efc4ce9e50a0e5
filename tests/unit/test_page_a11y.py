"""The report and the trend page read well without colour and without sight: a language and a
viewport, every outcome a word beside its colour, a palette with WCAG text contrast that a
colour-blind reader tells apart, a title and a description in words for every chart, and the
report's rule x configuration grid at the top. (tests/e2e/test_pages_browser.py runs axe-core on
the same pages in Chromium.)"""

from __future__ import annotations

import itertools
import math
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest

from model.judging.figures import HistogramFigure, Pair, PairFigure, buckets
from reports.a11y import (
    BACKGROUND,
    GUEST,
    HOST,
    OFFERED,
    OUTCOME_FILLS,
    TEXT,
    grid_headline,
    grid_summary,
)
from reports.charts import depth_svg, histogram_svg, pair_svg, verdict_grid_svg
from reports.html import report_document, write_html
from reports.records import Record, settle
from reports.store import Store
from reports.store.trend import main as trend_main
from reports.store.trend_charts import MetricLine, metric_svg
from tests.unit.test_compare_recorded import HEALTHY, HEALTHY2
from tests.unit.test_html import TCQ_OFF, TCQ_OFF_VERDICT

SVG = "{http://www.w3.org/2000/svg}"

#: WCAG 2 success criterion 1.4.3 (level AA): text, at least 4.5:1 against its background.
MIN_TEXT_CONTRAST = 4.5
#: WCAG 2 success criterion 1.4.11 (level AA): graphical objects (a chart's bars), at least 3:1.
MIN_GRAPHIC_CONTRAST = 3.0
#: CIELAB distance (Delta E 1976) passed and failed keep under every simulated colour-vision
#: deficiency. 2.3 is a just-noticeable difference; the former green and red kept 16 under
#: deuteranopia and 19 under protanopia, about the same brightness, and a red-green colour-blind
#: reader could not tell them apart (issue 26). 30 is nearly twice what they had.
MIN_PASS_FAIL_DELTA_E = 30.0
#: The distance any two outcome fills keep under every simulated deficiency: the word is always
#: written on the fill, so the colour only has to help a scan. The former palette had 11 (failed
#: red and not-run orange under tritanopia) and 12 (passed and not run under protanopia).
MIN_OUTCOME_DELTA_E = 15.0
#: Machado, Oliveira and Fernandes (2009), "A physiologically-based model for simulation of color
#: vision deficiency", severity 1.0: the matrices act on linear RGB.
DEFICIENCIES = {
    "protanopia": ((0.152286, 1.052583, -0.204868), (0.114503, 0.786281, 0.099216), (-0.003882, -0.048116, 1.051998)),
    "deuteranopia": ((0.367322, 0.860646, -0.227968), (0.280085, 0.672501, 0.047413), (-0.011820, 0.042940, 0.968881)),
    "tritanopia": ((1.255528, -0.076749, -0.178779), (-0.078411, 0.930809, 0.147602), (0.004733, 0.691367, 0.303900)),
}


def _linear(hex_color: str) -> tuple[float, float, float]:
    """sRGB ``#rrggbb`` (or ``#rgb``) as linear RGB, the sRGB transfer function undone (WCAG 2's formula)."""
    h = hex_color.lstrip("#")
    h = "".join(c * 2 for c in h) if len(h) == 3 else h
    r, g, b = (int(h[i:i + 2], 16) / 255 for i in (0, 2, 4))
    return tuple(c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in (r, g, b))  # type: ignore[return-value]


def _luminance(rgb: tuple[float, float, float]) -> float:
    return 0.2126 * rgb[0] + 0.7152 * rgb[1] + 0.0722 * rgb[2]


def contrast(a: str, b: str) -> float:
    """WCAG 2's contrast ratio of two colours: (L1 + 0.05) / (L2 + 0.05), L1 the lighter."""
    hi, lo = sorted((_luminance(_linear(a)), _luminance(_linear(b))), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def _simulate(rgb: tuple[float, float, float], deficiency: str) -> tuple[float, float, float]:
    m = DEFICIENCIES[deficiency]
    return tuple(min(1.0, max(0.0, sum(m[i][j] * rgb[j] for j in range(3)))) for i in range(3))  # type: ignore[return-value]


def _lab(rgb: tuple[float, float, float]) -> tuple[float, float, float]:
    """Linear sRGB to CIELAB (D65)."""
    r, g, b = rgb
    x = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047
    y = 0.2126 * r + 0.7152 * g + 0.0722 * b
    z = (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883

    def f(t: float) -> float:
        return t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116
    return 116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))


def delta_e(a: str, b: str, deficiency: str | None = None) -> float:
    """CIELAB distance of two colours, as seen with ``deficiency`` (None: typical vision)."""
    ra, rb = _linear(a), _linear(b)
    if deficiency:
        ra, rb = _simulate(ra, deficiency), _simulate(rb, deficiency)
    return math.dist(_lab(ra), _lab(rb))


class _Page(HTMLParser):
    """The parts of a page these tests read: the root's attributes, the meta tags, the outcome
    badges (class and text) and the second-level headings."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.root: dict[str, str | None] = {}
        self.metas: list[dict[str, str | None]] = []
        self.badges: list[tuple[str, str]] = []  # (class, text)
        self.h2: list[str] = []
        self._open: list[tuple[str, str, list[str]]] = []  # (tag, class, text parts)
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "html":
            self.root = a
        if tag == "meta":
            self.metas.append(a)
        if tag not in ("meta", "wbr", "br"):
            self._open.append((tag, a.get("class") or "", []))

    def handle_endtag(self, tag: str) -> None:
        while self._open:
            t, cls, parts = self._open.pop()
            text = "".join(parts)
            if self._open:
                self._open[-1][2].append(text)
            if cls.split()[:1] == ["o"]:
                self.badges.append((cls, text))
            if t == "h2":
                self.h2.append(text)
            if t == tag:
                break

    def handle_data(self, data: str) -> None:
        if self._open:
            self._open[-1][2].append(data)


RECORDED = [Record("n1", "queue-depth", "libvirt:virtio-scsi:latency5ms", {}, "failed", "host saw 0.8",
                   verdict=TCQ_OFF_VERDICT, started=True),
            Record("n2", "limits", "libvirt:virtio-scsi:latency5ms", {}, "passed", started=True),
            Record("n3", "queue-depth", "libvirt:virtio-blk:latency5ms", {}, "skipped", "no SCSI queue_depth",
                   started=True),
            Record("n4", "limits", "libvirt:virtio-blk:latency5ms", {}, "error", "guest gone", started=True),
            Record("n5", "io-size", "libvirt:virtio-blk:latency5ms")]


@pytest.fixture
def report(tmp_path: Path) -> str:
    records, status = settle(RECORDED, "SIGTERM")  # every outcome, the last one not run
    return write_html(records, tmp_path / "report.html", status=status,
                      properties={"qemu.version": "7.2.19", "image": "embedded:56a4ad75000f8008"}).read_text()


@pytest.fixture(scope="module")
def trend(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The trend page of two recorded nights (built once: its charts take seconds)."""
    top = tmp_path_factory.mktemp("trend")
    url = f"sqlite:///{top / 'store.db'}"
    store = Store(url)
    for d in (HEALTHY, HEALTHY2):
        store.import_dir(d)
    store.close()
    assert trend_main(["--store", url, "-o", str(top / "trend.html")]) == 0
    return (top / "trend.html").read_text()


@pytest.mark.parametrize("page", ["report", "trend"])
def test_pages_have_a_language_and_a_viewport(page: str, request: pytest.FixtureRequest) -> None:
    parsed = _Page(request.getfixturevalue(page))
    assert parsed.root.get("lang") == "en"
    viewport = [m.get("content") or "" for m in parsed.metas if m.get("name") == "viewport"]
    assert viewport == ["width=device-width, initial-scale=1"]  # zoom allowed: no maximum-scale, no user-scalable


@pytest.mark.parametrize("page", ["report", "trend"])
def test_every_text_colour_of_the_pages_has_wcag_contrast(page: str, request: pytest.FixtureRequest) -> None:
    text = request.getfixturevalue(page)
    # the style sheet's and the elements' own (style="color:..."); not background-color
    colours = re.findall(r"(?<![-\w])color:\s*(#[0-9a-fA-F]{3,6})\b", text)
    assert colours
    for c in colours:  # text on the page's white (the badges' text on their fill: the next test)
        assert contrast(c, BACKGROUND) >= MIN_TEXT_CONTRAST, c


def test_outcome_words_have_wcag_contrast_on_their_colour() -> None:
    for outcome, fill in OUTCOME_FILLS.items():
        assert contrast(TEXT, fill) >= MIN_TEXT_CONTRAST, outcome
    assert contrast(TEXT, BACKGROUND) >= MIN_TEXT_CONTRAST


def test_chart_colours_stand_out_from_the_page() -> None:
    for colour in (GUEST, HOST, OFFERED):
        assert contrast(colour, BACKGROUND) >= MIN_GRAPHIC_CONTRAST, colour


@pytest.mark.parametrize("deficiency", [None, *DEFICIENCIES])
def test_a_colour_blind_reader_tells_the_outcomes_apart(deficiency: str | None) -> None:
    assert delta_e(OUTCOME_FILLS["passed"], OUTCOME_FILLS["failed"], deficiency) >= MIN_PASS_FAIL_DELTA_E
    for a, b in itertools.combinations(OUTCOME_FILLS, 2):
        assert delta_e(OUTCOME_FILLS[a], OUTCOME_FILLS[b], deficiency) >= MIN_OUTCOME_DELTA_E, (a, b)
    assert delta_e(GUEST, HOST, deficiency) >= MIN_PASS_FAIL_DELTA_E  # the charts' two sides


def test_the_former_palette_fails_these_checks() -> None:
    # the palette issue 26 reported: NOT RUN orange text at 3.8:1, passed and failed apart by colour only
    assert contrast("#e65100", BACKGROUND) < MIN_TEXT_CONTRAST
    assert delta_e("#2e7d32", "#c62828", "deuteranopia") < MIN_PASS_FAIL_DELTA_E


def test_every_outcome_is_written_beside_its_colour(report: str) -> None:
    page = _Page(report)
    words = {"o-" + o.replace(" ", "-"): o.upper() for o in OUTCOME_FILLS}
    assert {cls.split()[1] for cls, _ in page.badges} == set(words)  # each outcome shows up at least once
    for cls, text in page.badges:
        assert text.strip().endswith(words[cls.split()[1]]), (cls, text)
    # each rule's heading says its outcome in a word, not by the heading's colour
    headings = [h for h in page.h2 if " — " in h]
    assert len(headings) == len(RECORDED)
    assert all(any(w in h for w in words.values()) for h in headings)
    assert 'style="color:' not in report


def test_the_report_opens_with_a_rule_by_configuration_grid(report: str) -> None:
    body = report.split("<body>", 1)[1]
    assert body.index('id="verdict-grid"') < body.index("Measured on") < body.index("<h2>Verdicts</h2>")
    grid = body.split('id="verdict-grid"', 1)[1].split("</table>", 1)[0]
    assert ('<th scope="col">libvirt:<wbr>virtio-scsi:<wbr>latency5ms</th>'
            '<th scope="col">libvirt:<wbr>virtio-blk:<wbr>latency5ms</th>') in grid
    rows = re.findall(r'<th scope="row">([^<]+)</th>', grid)
    assert rows == ["queue-depth", "limits", "io-size"]
    # each cell links to its rule's section; io-size did not run on virtio-scsi: a dash, in words too
    targets = re.findall(r'href="#([^"]+)"', grid)
    for target in targets:
        assert f'<section id="{target}">' in body
    assert len(targets) == len(RECORDED)
    assert "not run on this configuration" in grid.split("io-size", 1)[1]
    assert '<p id="counts">5 verdict(s): 1 passed, 1 failed, 1 error, 1 skipped, 1 not run.</p>' in body


def test_every_chart_has_a_title_and_a_description() -> None:
    hist = HistogramFigure("queue-depth, offered 32", "exact (QEMU trace events)",
                           buckets((1, 2, 4, 8, 16, 32, 64), (0, 0, 1, 3, 5, 900, 9, 0)),
                           buckets((4095, 4096, 8191), (0, 466, 0, 0)), buckets((1000, 5000), (0, 10, 456), "us"),
                           (("32", 98.8),), (("p50", 6128.0),))
    svgs = {"depth": depth_svg(TCQ_OFF),
            "pair": pair_svg(PairFigure((Pair("request size: expected / host", 1024.0, 64.0, "KiB"),))),
            "histogram": histogram_svg(hist),
            "grid": verdict_grid_svg(["a [c]", "b [c]"], ["#1", "#2"], [["passed", "failed"], ["absent", "error"]]),
            "series": metric_svg("a: qd32_iops", "IO/s", ["#1", "#2", "#3"], [
                MetricLine("c", [5000.0, None, 3000.0], [4900.0, None, 2900.0], [5100.0, None, 3100.0],
                           (4600.0, 5400.0))])}
    descs = {}
    for name, svg in svgs.items():
        root = ET.fromstring(svg)
        assert root.get("role") == "img", name
        title, desc = root[0], root[1]  # the first children: a screen reader's name and description
        assert title.tag == f"{SVG}title" and (title.text or "").strip(), name
        assert desc.tag == f"{SVG}desc" and (desc.text or "").strip(), name
        descs[name] = desc.text or ""
    assert descs["depth"] == ("Offered 1: the guest held 0.9, the host saw 0.8. "
                              "Offered 32: the guest held 30.1, the host saw 0.8.")
    assert descs["pair"] == "request size: expected / host: 1024 against 64 KiB."
    assert "outstanding I/Os at issue most in <=32 (98 %)" in descs["histogram"]
    assert "fio submitted depth most in 32 (100 %) of the time; completion latency p50 6128 us" in descs["histogram"]
    assert "b [c]: error in 1 run(s)" not in descs["grid"] and "a [c]: passed in 1 run(s); failed in #2." in descs["grid"]
    assert "Error in every run that had them: b [c]." in descs["grid"]
    assert descs["series"] == ("a: qd32_iops of c, medians in IO/s: from 3000 to 5000 over 2 run(s); newest (#3) "
                               "3000. Noise band 4600 to 5400: outside it: #3. The shaded bands are each line's "
                               "noise band.")


def test_the_verdict_grid_writes_each_outcome_in_its_cell() -> None:
    rows, columns = ["a [c]", "b [c]"], ["#1", "#2", "#3"]
    outcomes = [["passed", "failed", "not run"], ["absent", "skipped", "error"]]
    texts = ["".join(t.itertext()) for t in ET.fromstring(verdict_grid_svg(rows, columns, outcomes)).iter(f"{SVG}text")]
    for outcome in ("passed", "failed", "not run", "skipped", "error"):
        # once in its cell and once in the legend; the absent cell stays empty
        assert texts.count(outcome) == 2, outcome
    assert "absent" not in texts


def test_grid_headline_names_what_changed() -> None:
    rows, columns = ["a [c]", "b [c]", "c [c]"], ["#1", "#2", "#3"]
    outcomes = [["passed", "failed", "passed"], ["passed", "passed", "passed"], ["absent", "skipped", "skipped"]]
    assert grid_headline(rows, columns, outcomes) == ("Newest run (#3): 2 passed, 1 skipped. "
                                                      "Changed over these runs: a [c]: passed in 2 run(s); failed in #2.")
    steady = [["passed", "passed"]]
    assert grid_headline(["a"], ["#1", "#2"], steady) == ("Newest run (#2): 1 passed. "
                                                          "No row changed its outcome over these 2 run(s).")
    assert grid_summary(["a"], ["#1", "#2"], steady).endswith("Passed in every run that had them: a.")
    assert grid_headline([], [], []) == ""


def test_the_trend_page_says_its_grid_in_words(trend: str) -> None:
    assert ('<p id="grid-summary">Newest run (11-24 19:13 #2): 12 passed, 2 skipped. '
            "No row changed its outcome over these 2 run(s).</p>") in trend
    svgs = trend.count("<svg")
    assert svgs >= 10 and trend.count('<svg role="img"') == svgs and trend.count("<desc>") == svgs


def test_the_report_captions_each_chart_in_words() -> None:
    text = report_document([Record("n1", "queue-depth", "c", {}, "failed", "tcq", verdict=TCQ_OFF_VERDICT)])
    assert "<figure><svg" in text
    assert ("<figcaption>Offered 1: the guest held 0.9, the host saw 0.8 (passes at 0.36 or more). "
            "Offered 32: the guest held 30.1, the host saw 0.8 (passes at 12 or more).</figcaption></figure>") in text
