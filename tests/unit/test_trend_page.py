"""The trend page (reports/store/trend.py) from stored runs: recorded whole runs imported into a store."""

from __future__ import annotations

import re
import statistics
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from model.across.moves import Series
from model.across.run_to_run import EFFECT_PER_CV
from reports.store import Store
from reports.store.trend import main, noise_bands
from tests.unit.test_compare_recorded import HEALTHY, HEALTHY2, RUNS

SVG = "{http://www.w3.org/2000/svg}"


def _texts(page: str) -> list[str]:
    out = []
    for part in page.split("<svg")[1:]:
        root = ET.fromstring("<svg" + part.split("</svg>")[0] + "</svg>")
        out += ["".join(t.itertext()).strip() for t in root.iter(f"{SVG}text")]
    return out


def test_two_nights_of_one_series(tmp_path: Path, store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    store = Store(store_url)
    for d in (HEALTHY, HEALTHY2, RUNS / "20261124-194640-tcq-off"):
        store.import_dir(d)
    store.close()
    out = tmp_path / "trend.html"
    assert main(["--store", store_url, "--run", "2", "-o", str(out)]) == 0
    assert "2 run(s) of series libvirt_local_virtio_blk_virtio_scsi_lat5ms_embedded, up to run 2" in \
        capsys.readouterr().out
    page = out.read_text()
    # the tcq-off run is another series (inject), not in it
    assert "2 run(s) of series libvirt_local_virtio_blk_virtio_scsi_lat5ms_embedded" in page
    assert "<th>guest.kernel</th><td>6.1.0-56-amd64</td>" in page and "<th>inject</th><td>none</td>" in page
    texts = _texts(page)
    assert "queue-depth [libvirt:virtio-scsi:latency5ms]" in texts and "passed" in texts and "skipped" in texts
    assert "11-24 19:11 #1" in texts and "11-24 19:13 #2" in texts
    # one chart per metric, a line per configuration across the runs (not a chart per configuration)
    metrics = page.split('<div id="metrics">')[1]
    titles = [t for t in _texts(metrics) if t.endswith(")") and ": " in t.split(" (")[0]]
    assert "queue-depth: qd32_iops (IO/s)" in titles and len(titles) == len(set(titles)) == metrics.count("<svg")
    assert _texts(metrics).count("libvirt:virtio-scsi:latency5ms") == len(titles)  # each chart's legend
    assert _texts(metrics).count("libvirt:virtio-blk:latency5ms") == len(titles)
    assert len(_font_sizes(page)) == 1  # every chart's words in one size
    assert "width:49%" not in page  # each chart at its own size: no chart's text scaled up or down
    # the tcq-off run's own series: one run, said so, its values in a table and no one-point charts
    assert main(["--store", store_url, "--run", "3", "-o", str(out)]) == 0
    one = out.read_text()
    assert "Only one run of this series is stored" in one and '<table id="one-run">' in one
    assert "<svg" not in one.split('<div id="metrics">')[1]
    assert "<td>queue-depth</td><td>libvirt:virtio-scsi:latency5ms</td><td>qd32_iops</td>" in one


def _font_sizes(page: str) -> set[str]:
    """The font sizes of every text in the page's SVGs."""
    return set(re.findall(r"<text[^>]*font-size: ([0-9.]+)px", page))


def test_bands_come_from_the_shown_runs_or_the_measured_table() -> None:
    key = ("queue-depth", "c", "qd32_iops")
    two = [{key: Series("IO/s", "higher-better", (5000.0,))}, {key: Series("IO/s", "higher-better", (5100.0,))}]
    lo, hi = noise_bands(two, [key])[key]
    assert (lo + hi) / 2 == pytest.approx(5050) and hi - lo == pytest.approx(2 * 5050 * 0.100)  # MIN_EFFECTS
    many = [{key: Series("IO/s", "higher-better", (v,))} for v in (5000.0, 5100.0, 4900.0, 5000.0)]
    lo, hi = noise_bands(many, [key])[key]
    cv = statistics.stdev([5000, 5100, 4900, 5000]) / 5000  # 1.6 %: 3 x sqrt 2 x CV = 6.9 % > widest 4.1 %
    assert hi - lo == pytest.approx(2 * 5000 * EFFECT_PER_CV * cv)  # these runs' own spread, not the table's


def test_bad_input(tmp_path: Path, store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--store", store_url, "-o", str(tmp_path / "t.html")]) == 2
    assert "has no complete run" in capsys.readouterr().err
    assert main(["--store", store_url, "--run", "4", "-o", str(tmp_path / "t.html")]) == 2
    assert "has no run 4" in capsys.readouterr().err
    assert not (tmp_path / "t.html").exists()
