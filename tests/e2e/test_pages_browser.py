"""The report and the trend page in a real headless browser (Debian's Chromium): the pages load,
their charts are in the DOM, a screenshot shows them in their colours (passed bluish green,
failed vermillion, the host's bars vermillion, the guest's blue), and axe-core finds no serious or
critical accessibility violation in them.

axe-core comes from npm, installed on first use into the cache (``$XDG_CACHE_HOME/vioconform/
axe-core/<version>``) and loaded into a copy of each page; Chromium runs it and the page writes
its violations into the DOM that ``--dump-dom`` prints. These tests skip when Chromium or npm is
missing, or when the npm registry cannot be reached for a first install; any other failure of the
install fails them."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib import image

from images.cache import build_lock, cache_dir, use_entry
from model.judging.figures import HistogramFigure, buckets
from model.rules.discard import judge_discard
from model.rules.hotplug import judge_hotplug
from model.rules.resize import bound_for, judge_resize
from reports.a11y import GUEST, HOST, OUTCOME_FILLS
from reports.html import write_html
from reports.records import Record, settle
from reports.store import Store
from reports.store.trend import main as trend_main
from tests.model.test_discard import SCSI, WHERE, _healthy
from tests.model.test_hotplug import BLK as HOTPLUG_BLK
from tests.model.test_resize import _run as resize_run
from tests.unit.test_compare_recorded import HEALTHY, HEALTHY2
from tests.unit.test_html import TCQ_OFF_VERDICT

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (scripts/setup-host.sh)")
WIDTH, HEIGHT = 1200, 1800
#: Chromium's bound for loading and drawing a page: a page takes about 2 s here, 10 s on a saturated
#: CI host; one with axe-core's run in it about 6 s here.
BROWSER_TIMEOUT_S = 120.0

#: The axe-core release the pages are checked with. Pinned: a new release may add rules, and
#: taking one is a change of this test, made on purpose.
AXE_VERSION = "4.14.1"
#: The impacts that fail the check (axe-core's scale: minor, moderate, serious, critical).
AXE_BLOCKING = ("serious", "critical")
#: npm's bound for the first install: one 650 kB package; npm retries a refused fetch with back-off
#: for about a minute before it gives up.
NPM_TIMEOUT_S = 300.0
#: npm's error codes (``npm error code X``) that mean the registry cannot be reached: the test
#: skips on these only.
UNREACHABLE = ("ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "ENETUNREACH", "EHOSTUNREACH")
#: How long Chromium lets the page's timers and promises run (virtual time, which moves on at
#: once when the page is idle): axe-core's run is asynchronous, and the DOM is printed after it.
AXE_VIRTUAL_TIME_MS = 60_000


def _browser(*args: str, timeout: float = BROWSER_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           f"--window-size={WIDTH},{HEIGHT}", *args], capture_output=True, text=True, timeout=timeout,
                          check=False)


@pytest.fixture(scope="session")
def axe_js(tmp_path_factory: pytest.TempPathFactory) -> str:
    """axe-core's ``axe.min.js``, installed by npm into the cache on first use (under the cache's
    build lock: a second xdist worker waits for the first one's install)."""
    root = cache_dir() / "axe-core"
    entry = root / AXE_VERSION
    script = entry / "node_modules" / "axe-core" / "axe.min.js"
    root.mkdir(parents=True, exist_ok=True)
    with build_lock(entry):
        if not script.exists():
            _npm_install(entry, tmp_path_factory.mktemp("npm-cache"))
    use_entry(entry, lambda _: None)  # an older release's entry goes after a month unused
    return script.read_text()


def _npm_install(entry: Path, npm_cache: Path) -> None:
    """``npm install axe-core@AXE_VERSION`` into a build directory beside ``entry``, then renamed to
    it: a killed install leaves no half entry. npm's own cache goes to ``npm_cache``, a temp dir."""
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed (Debian: apt-get install npm); it installs axe-core for the "
                    "accessibility check")
    build = entry.with_name(f".build-{entry.name}-{os.getpid()}")
    shutil.rmtree(build, ignore_errors=True)
    build.mkdir()
    try:
        try:
            done = subprocess.run([npm, "install", "--prefix", str(build), "--cache", str(npm_cache), "--no-audit",
                                   "--no-fund", "--no-save", "--no-package-lock", "--ignore-scripts",
                                   "--no-update-notifier", f"axe-core@{AXE_VERSION}"],
                                  capture_output=True, text=True, timeout=NPM_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            pytest.skip(f"the npm registry did not answer in {NPM_TIMEOUT_S:.0f} s: axe-core {AXE_VERSION} could "
                        f"not be installed into {entry}")
        code = re.search(r"npm (?:error|ERR!) code (\w+)", done.stderr)
        if done.returncode != 0 and code and code.group(1) in UNREACHABLE:
            pytest.skip(f"the npm registry cannot be reached (npm: {code.group(1)}): axe-core {AXE_VERSION} could "
                        f"not be installed into {entry}")
        assert done.returncode == 0, f"npm install axe-core@{AXE_VERSION} failed:\n{done.stderr[-3000:]}"
        installed = json.loads((build / "node_modules" / "axe-core" / "package.json").read_text())["version"]
        assert installed == AXE_VERSION, f"npm installed axe-core {installed}, not {AXE_VERSION}"
        os.replace(build, entry)
    finally:
        shutil.rmtree(build, ignore_errors=True)


#: Run in the page after axe-core: its violations and the ids of the rules that passed, as base64
#: JSON in a <pre id="axe-result"> (or the error in <pre id="axe-error">), for --dump-dom to print.
AXE_RUNNER = """<script>
function vioconformOut(id, text) {
  const pre = document.createElement('pre'); pre.id = id; pre.textContent = text; document.body.appendChild(pre);
}
axe.run(document).then(
  r => vioconformOut('axe-result', btoa(unescape(encodeURIComponent(JSON.stringify(
    {violations: r.violations, passes: r.passes.map(p => p.id)}))))),
  e => vioconformOut('axe-error', String(e)));
</script>"""


def _axe(page: Path, axe: str) -> dict[str, Any]:
    """axe-core's findings on ``page``, run in Chromium on a copy of it with axe-core loaded."""
    text = page.read_text()
    end = text.rindex("</body>")
    probe = page.with_name(f"{page.stem}.axe.html")
    probe.write_text(f"{text[:end]}<script>{axe}</script>{AXE_RUNNER}{text[end:]}")
    dom = _browser(f"--virtual-time-budget={AXE_VIRTUAL_TIME_MS}", "--dump-dom", probe.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    found = re.search(r'<pre id="axe-result">([A-Za-z0-9+/=]*)</pre>', dom.stdout)
    error = re.search(r'<pre id="axe-error">([^<]*)</pre>', dom.stdout)
    assert found, f"axe-core did not report on {page.name}: {error.group(1) if error else dom.stderr[-2000:]}"
    result: dict[str, Any] = json.loads(base64.b64decode(found.group(1)))
    return result


def _blocking(findings: dict[str, Any]) -> list[str]:
    """The serious and critical violations, one line each: rule, impact, what to fix, where."""
    return [f"{v['id']} ({v['impact']}): {v['help']}; at {[n['target'] for n in v['nodes'][:5]]}: "
            f"{v['nodes'][0].get('failureSummary', '')}"
            for v in findings["violations"] if v["impact"] in AXE_BLOCKING]


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


PROPERTIES = {"qemu.version": "7.2.19", "qemu.machine": "pc-i440fx-7.2", "qemu.accel": "tcg",
              "libvirt.version": "9.0.0", "image": "embedded:56a4ad75000f8008"}


def _report(path: Path, *more: Record, interrupted_by: str = "") -> Path:
    """A report of recorded verdicts: queue-depth failed with --inject tcq-off (its bars and one
    window's histograms) and limits passed, then ``more``."""
    hist = HistogramFigure("queue-depth, offered depth 32", "exact (QEMU trace events)",
                           buckets((1, 2, 4, 8, 12, 16, 20, 24, 28, 32, 64), (0, 0, 0, 0, 1, 2, 1, 0, 0, 0, 0, 0)),
                           buckets((4095, 4096, 8191), (0, 466, 0, 0)),
                           buckets((1000, 5000, 10000), (0, 0, 460, 6), "us"), (("32", 99.2),), (("p50", 6500.0),))
    verdict = TCQ_OFF_VERDICT.__class__(**{**TCQ_OFF_VERDICT.__dict__, "figures": (*TCQ_OFF_VERDICT.figures, hist)})
    records, status = settle([Record("n1", "queue-depth", "libvirt:virtio-scsi:latency5ms", {}, "failed",
                                     "host saw 0.8", verdict=verdict, started=True),
                              Record("n2", "limits", "libvirt:virtio-scsi:latency5ms", {}, "passed", started=True),
                              *more], interrupted_by)
    return write_html(records, path, status=status, mode=0o644, properties=PROPERTIES)


def _trend(directory: Path) -> Path:
    """The trend page of two recorded healthy nights of one series."""
    url = f"sqlite:///{directory / 'store.db'}"
    store = Store(url)
    for d in (HEALTHY, HEALTHY2):
        store.import_dir(d)
    store.close()
    page = directory / "trend.html"
    assert trend_main(["--store", url, "-o", str(page)]) == 0
    return page


def test_the_report_renders_its_charts(tmp_path: Path) -> None:
    dom, pixels = _render(_report(tmp_path / "report.html"))
    assert dom.count("<svg") == 2 and 'id="measured-on"' in dom and "pc-i440fx-7.2" in dom
    assert "host: outstanding I/Os at issue" in dom and "offered 32" in dom
    assert pixels.shape == (HEIGHT, WIDTH, 3)
    assert _share(pixels, OUTCOME_FILLS["failed"]) > 0  # FAILED on vermillion
    assert _share(pixels, OUTCOME_FILLS["passed"]) > 0  # PASSED on bluish green
    assert _share(pixels, HOST) > 0.002 and _share(pixels, GUEST) > 0.002  # host and guest bars
    assert len(np.unique((pixels * 255).astype(np.uint8).reshape(-1, 3), axis=0)) > 50  # not a blank page


def test_the_trend_page_renders_its_grid_and_series(tmp_path: Path) -> None:
    dom, pixels = _render(_trend(tmp_path))
    assert dom.count("<svg") >= 10 and 'id="grid"' in dom and "noise band" in dom
    assert _share(pixels, OUTCOME_FILLS["passed"]) > 0.01  # the verdict grid: every healthy cell green
    assert _share(pixels, OUTCOME_FILLS["failed"]) == 0  # nothing failed in these two nights
    assert len(np.unique((pixels * 255).astype(np.uint8).reshape(-1, 3), axis=0)) > 50


def test_axe_core_finds_no_serious_violation_in_the_report(tmp_path: Path, axe_js: str) -> None:
    # every outcome's badge (an interrupted run: its banner, an error and a rule not run), the charts
    page = _report(tmp_path / "report.html",
                   Record("n3", "queue-depth", "libvirt:virtio-blk:latency5ms", {}, "skipped", "no SCSI queue_depth",
                          started=True),
                   Record("n4", "io-size", "libvirt:virtio-blk:latency5ms", {"fio_iops": 291.1}, started=True),
                   Record("n5", "limits", "libvirt:virtio-blk:latency5ms"),
                   # the lifecycle rules' range and timeline charts, from real runs' numbers
                   Record("n6", "discard", "libvirt:virtio-scsi:latency5ms", {}, "passed", started=True,
                          verdict=judge_discard(SCSI, _healthy(SCSI, True), WHERE, "sdb")),
                   Record("n7", "resize", "libvirt:virtio-blk:latency5ms", {}, "passed", started=True,
                          verdict=judge_resize(resize_run("virtio_blk", "vdb", 0.108, 0.09), bound_for("virtio_blk"))),
                   Record("n8", "hotplug", "libvirt:virtio-blk:latency5ms", {}, "passed", started=True,
                          verdict=judge_hotplug(HOTPLUG_BLK)),
                   interrupted_by="SIGTERM")
    findings = _axe(page, axe_js)
    assert not _blocking(findings), "\n".join(_blocking(findings))
    # axe-core did check what it is here for: the language, the text contrast, the charts' names
    assert {"html-has-lang", "color-contrast", "svg-img-alt"} <= set(findings["passes"])


def test_axe_core_finds_no_serious_violation_in_the_trend_page(tmp_path: Path, axe_js: str) -> None:
    findings = _axe(_trend(tmp_path), axe_js)
    assert not _blocking(findings), "\n".join(_blocking(findings))
    assert {"html-has-lang", "color-contrast", "svg-img-alt"} <= set(findings["passes"])


#: A phone's width in CSS pixels (an iPhone 12 to 15 held upright).
NARROW_PX = 390
#: Every element of the page that reaches past the window's right edge and is not inside a region that
#: scrolls sideways within the window: what a reader on a phone cannot see. Sent to the page's parent
#: as JSON (headless Chromium's window is at least 500 px wide: the page runs in a frame of the width).
OVERFLOW_PROBE = """<script>
window.addEventListener('load', () => {
  const w = document.documentElement.clientWidth, cut = [];
  for (const el of document.querySelectorAll('main *')) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.right <= w + 1) continue;
    let a = el.parentElement, held = false;
    for (; a; a = a.parentElement) {
      const o = getComputedStyle(a).overflowX;
      if (o === 'auto' || o === 'scroll' || o === 'hidden') { held = a.getBoundingClientRect().right <= w + 1; break; }
    }
    if (!held) cut.push(el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + ' to ' + Math.round(r.right) + ' px');
  }
  parent.postMessage(JSON.stringify({width: w, page: document.documentElement.scrollWidth, cut: cut.slice(0, 20)}),
                     '*');
});
</script>"""
#: The page in a frame ``{width}`` pixels wide; what its probe says is written into the DOM.
FRAME = """<!doctype html><html><body style="margin:0">
<iframe src="{src}" title="page" style="width:{width}px;height:1600px;border:0"></iframe>
<script>window.addEventListener('message', e => {{
  const pre = document.createElement('pre'); pre.id = 'overflow'; pre.textContent = e.data; document.body.appendChild(pre);
}});</script></body></html>"""


def _overflow(page: Path, width: int) -> dict[str, Any]:
    """What of ``page`` reaches past a window ``width`` pixels wide (OVERFLOW_PROBE), in Chromium."""
    text = page.read_text()
    end = text.rindex("</body>")
    probe = page.with_name(f"{page.stem}.narrow.html")
    probe.write_text(f"{text[:end]}{OVERFLOW_PROBE}{text[end:]}")
    frame = page.with_name(f"{page.stem}.frame.html")
    frame.write_text(FRAME.format(src=probe.name, width=width))
    dom = _browser("--virtual-time-budget=5000", "--dump-dom", frame.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    found = re.search(r'<pre id="overflow">([^<]*)</pre>', dom.stdout)
    assert found, dom.stderr[-2000:]
    result: dict[str, Any] = json.loads(found.group(1).replace("&quot;", '"'))
    return result


@pytest.mark.parametrize("which", ["report", "trend"])
def test_on_a_phone_nothing_is_cut_off(tmp_path: Path, which: str) -> None:
    """At 390 px the report's verdicts table reached 600 px past the screen's edge, out of reach: a table
    now reflows or scrolls inside its own region, and nothing else reaches past the edge."""
    page = (_report(tmp_path / "report.html", Record("n3", "io-size", "libvirt:virtio-blk:latency5ms", {}, "failed",
                                                     "each 1024 KiB I/O reached the host as 16.0 requests of 64 KiB; "
                                                     "expected 1 request(s) of 1024 KiB", started=True))
            if which == "report" else _trend(tmp_path))
    found = _overflow(page, NARROW_PX)
    assert found["width"] <= NARROW_PX and found["cut"] == [], found
    assert found["page"] <= found["width"], found  # the page itself never scrolls sideways
    assert _overflow(page, WIDTH)["cut"] == []

