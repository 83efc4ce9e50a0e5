"""report.html as a reader first sees it: the run's date, duration, exit code and host, and links to
the rest of its results directory, above the verdicts; each chart with its pass threshold drawn and
no label over another."""

from __future__ import annotations

import dataclasses
import re
import socket
import xml.etree.ElementTree as ET
from itertools import combinations
from pathlib import Path

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure as MplFigure
from matplotlib.text import Text

from model.judging.figures import DepthFigure, Pair, PairFigure, Threshold
from model.rules.io_size import judge_io_size
from reports.charts import THRESHOLD_LABEL, depth_svg, pair_plot, pair_svg
from reports.html import report_document
from reports.records import Record
from reports.run_header import RunHeader, duration_text, header_html
from tests.runs.test_gate_plugin import _run
from tests.unit.test_html import IO_BREAKUP, SVG, TCQ_OFF_VERDICT, _texts

#: Recorded: data-integrity on virtio-scsi, 2026-12-07 (8192 sectors written, 4 MiB read back).
DATA_INTEGRITY = PairFigure((Pair("sectors written / whole on the host", 8192, 8192, "sectors", Threshold(8192)),
                             Pair("bytes read back by the guest / verified", 4194304, 4194304, "bytes",
                                  Threshold(4194304))))


def _first_screen(html: str) -> str:
    """What comes before the verdict grid: the title, the subtitle and the run's facts."""
    return html.split("<body>")[1].split('<h2 id="grid-title">')[0]


def test_the_first_screen_says_when_how_long_how_it_ended_where_and_links_the_files() -> None:
    header = RunHeader(1796618941.0, 396.5, 1, "a rule FAILED", ("ci7", "libvirt: local"),
                       (("junit.xml", "junit.xml"), ("raw/", "raw/"), ("logs/", "logs/")))
    top = _first_screen(report_document([Record("n1", "queue-depth", "c", {}, "failed", "tcq",
                                                verdict=TCQ_OFF_VERDICT)], header=header))
    for said in ("<dt>started</dt><dd>2026-12-07 04:49:01 UTC</dd>", "<dt>took</dt><dd>6 min 36 s</dd>",
                 "<dt>exit code</dt><dd>1 (a rule FAILED)</dd>", "<dt>ran on</dt><dd>ci7, libvirt: local</dd>",
                 '<a href="junit.xml">junit.xml</a>', '<a href="raw/">raw/</a>', '<a href="logs/">logs/</a>'):
        assert said in top, said
    assert [duration_text(s) for s in (42.4, 396.5, 3725)] == ["42 s", "6 min 36 s", "1 h 02 min"]
    assert "<dt>exit code</dt><dd>3</dd>" in header_html(dataclasses.replace(header, exit_code=3, exit_meaning=""))


@pytest.mark.parametrize(("env", "code"), [({}, 1), ({"GATE_BREAK_STORE": "store.db"}, 11)])
def test_a_runs_report_says_the_exit_code_the_run_ended_with(tmp_path: Path, env: dict[str, str], code: int) -> None:
    """The report is written last, after the JUnit files and the store, so the code it names is the
    run's own, also when the store could not be written (11)."""
    store = tmp_path / "store.db"
    proc = _run(tmp_path, "--results-dir", str(tmp_path / "out"), "--store", f"sqlite:///{store}",
                env={k: str(tmp_path / v) for k, v in env.items()})
    assert proc.returncode == code, proc.stdout + proc.stderr
    top = _first_screen((tmp_path / "out" / "report.html").read_text())
    assert f"<dt>exit code</dt><dd>{code} (" in top
    assert re.search(r"<dt>started</dt><dd>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC</dd><dt>took</dt><dd>\d+ s</dd>", top)
    assert f"<dt>ran on</dt><dd>{socket.gethostname()}, libvirt: local</dd>" in top
    for href in re.findall(r'<a href="([^"]+)">', top):
        assert (tmp_path / "out" / href).exists(), href
    assert '<a href="junit.xml">' in top


def test_the_queue_depth_chart_draws_the_host_depth_it_passes_at() -> None:
    svg = depth_svg(TCQ_OFF_VERDICT.figures[0]) if isinstance(TCQ_OFF_VERDICT.figures[0], DepthFigure) else ""
    assert THRESHOLD_LABEL in _texts(svg)
    desc = ET.fromstring(svg).find(f"{SVG}desc")
    assert desc is not None and "the host saw 0.8 (passes at 12 or more)" in (desc.text or "")


def test_a_pair_chart_draws_its_threshold_and_names_it() -> None:
    """io-breakup: the host's 64 KiB against 1 MiB expected; it passes at 1 MiB over the allowed split."""
    (figure,) = judge_io_size(IO_BREAKUP).figures
    assert isinstance(figure, PairFigure) and figure.pairs[0].threshold is not None
    texts = _texts(pair_svg(figure))
    assert any(t.startswith("request size: expected / host (pass: host at least ") for t in texts), texts
    assert not any(t.startswith("request size") and "(pass" in t for t in _texts(pair_svg(
        PairFigure((Pair("request size: expected / host", 1024.0, 64.0, "KiB"),)))))


#: The least room between two labels, in pixels at the figure's 100 dpi: half a line of its 7-point
#: text. A browser draws the SVG's text in its own font, a little wider and taller than matplotlib's
#: measure, so labels closer than this run into each other on the page.
CLEARANCE_PX = 5.0


def _texts_of(fig: MplFigure) -> list[Text]:
    return [t for t in fig.findobj(match=Text) if isinstance(t, Text)]


def _overlaps(fig: MplFigure) -> list[tuple[str, str]]:
    """Pairs of visible texts whose boxes, grown by half the clearance on each side, overlap."""
    canvas = FigureCanvasAgg(fig)
    canvas.draw()  # type: ignore[no-untyped-call]
    renderer = canvas.get_renderer()  # type: ignore[no-untyped-call]
    boxes = [(t.get_text(), t.get_window_extent(renderer).padded(CLEARANCE_PX / 2)) for t in _texts_of(fig)
             if t.get_visible() and t.get_text().strip()]
    return [(a, b) for (a, ba), (b, bb) in combinations(boxes, 2) if ba.overlaps(bb)]


def test_the_data_integrity_chart_has_no_label_over_another() -> None:
    """Recorded: its two values were drawn over each other ("8192 sectors" twice, "4.1943e+06 bytes"
    twice) in rows too short for two bars and their labels."""
    fig = pair_plot(DATA_INTEGRITY)
    assert _overlaps(fig) == []
    texts = [t.get_text() for t in _texts_of(fig)]
    assert "4,194,304 bytes" in texts and not any("e+06" in t for t in texts)
