"""The report and the trend page in a real headless browser (Debian's Chromium): the pages load,
their charts are in the DOM, and a screenshot shows them in their colours (passed green, failed
red, the host's bars orange, the guest's blue)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from matplotlib import image

from model.rules.figures import HistogramFigure, buckets
from reports.html import write_html
from reports.records import Record, settle
from reports.store import Store
from reports.trend import main as trend_main
from tests.unit.test_compare_recorded import HEALTHY, HEALTHY2
from tests.unit.test_html import TCQ_OFF_VERDICT

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (scripts/setup-host.sh)")
WIDTH, HEIGHT = 1200, 1800


def _browser(*args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           f"--window-size={WIDTH},{HEIGHT}", *args], capture_output=True, text=True, timeout=120,
                          check=False)


def _render(page: Path) -> tuple[str, np.ndarray]:
    """The DOM Chromium built from ``page``, and its screenshot as RGB pixels."""
    dom = _browser("--dump-dom", page.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    png = page.with_suffix(".png")
    shot = _browser(f"--screenshot={png}", page.as_uri())
    assert shot.returncode == 0 and png.exists(), shot.stderr[-2000:]
    return dom.stdout, image.imread(str(png))[:, :, :3]


def _share(pixels: np.ndarray, hex_color: str) -> float:
    """The share of pixels within a small distance of ``hex_color``."""
    rgb = np.array([int(hex_color[i:i + 2], 16) / 255 for i in (1, 3, 5)])
    return float((np.abs(pixels - rgb).max(axis=2) < 0.04).mean())


def test_the_report_renders_its_charts(tmp_path: Path) -> None:
    hist = HistogramFigure("queue-depth, offered depth 32", "exact (QEMU trace events)",
                           buckets((1, 2, 4, 8, 12, 16, 20, 24, 28, 32, 64), (0, 0, 0, 0, 1, 2, 1, 0, 0, 0, 0, 0)),
                           buckets((4095, 4096, 8191), (0, 466, 0, 0)),
                           buckets((1000, 5000, 10000), (0, 0, 460, 6), "us"), (("32", 99.2),), (("p50", 6500.0),))
    verdict = TCQ_OFF_VERDICT.__class__(**{**TCQ_OFF_VERDICT.__dict__, "figures": (*TCQ_OFF_VERDICT.figures, hist)})
    records, status = settle([Record("n1", "queue-depth", "libvirt:virtio-scsi:latency5ms", {}, "failed",
                                     "host saw 0.8", verdict=verdict, started=True),
                              Record("n2", "limits", "libvirt:virtio-scsi:latency5ms", {}, "passed", started=True)])
    page = write_html(records, tmp_path / "report.html", status=status, mode=0o644,
                      properties={"qemu.version": "7.2.19", "qemu.machine": "pc-i440fx-7.2", "qemu.accel": "tcg",
                                  "libvirt.version": "9.0.0", "image": "embedded:56a4ad75000f8008"})
    dom, pixels = _render(page)
    assert dom.count("<svg") == 2 and 'id="measured-on"' in dom and "pc-i440fx-7.2" in dom
    assert "host: outstanding I/Os at issue" in dom and "offered 32" in dom
    assert pixels.shape == (HEIGHT, WIDTH, 3)
    assert _share(pixels, "#c62828") > 0  # FAILED in red
    assert _share(pixels, "#2e7d32") > 0  # PASSED in green
    assert _share(pixels, "#ef6c00") > 0.002 and _share(pixels, "#1565c0") > 0.002  # host and guest bars
    assert len(np.unique((pixels * 255).astype(np.uint8).reshape(-1, 3), axis=0)) > 50  # not a blank page


def test_the_trend_page_renders_its_grid_and_series(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = Store(url)
    for d in (HEALTHY, HEALTHY2):
        store.import_dir(d)
    store.close()
    page = tmp_path / "trend.html"
    assert trend_main(["--store", url, "-o", str(page)]) == 0
    dom, pixels = _render(page)
    assert dom.count("<svg") >= 10 and 'id="grid"' in dom and "noise band" in dom
    assert _share(pixels, "#2e7d32") > 0.01  # the verdict grid: every healthy cell green
    assert _share(pixels, "#c62828") == 0  # nothing failed in these two nights
    assert len(np.unique((pixels * 255).astype(np.uint8).reshape(-1, 3), axis=0)) > 50
