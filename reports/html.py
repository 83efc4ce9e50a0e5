"""A one-file HTML report: verdict table, and per configuration the pictures of its verdict.

The pictures come from the verdict's typed figures (``model.rules.figures``), never from the
names of its JUnit properties. For the queue-depth rule the picture is the whole story at a
glance: for each offered depth, three bars: what the workload offered, what the guest block
layer held (aqu-sz) and what the host saw. A healthy guest has three similar bars; the Solaris
TCQ signature is a tall guest bar over a host bar of about 1. The other rules draw labelled
pairs, the expected or guest side against the host side. Plain inline SVG: no JavaScript, no
external files. Each kind of figure is drawn by one function (:func:`chart` picks it), so a
kind can be drawn another way without touching the rest.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import assert_never

from model.rules.figures import DepthFigure, Figure, PairFigure
from reports.records import Record, RunStatus
from reports.results import DEFAULT_DIR_MODE, file_mode, write_atomic

COLORS = {"passed": "#2e7d32", "failed": "#c62828", "error": "#6a1b9a", "skipped": "#757575", "not run": "#e65100"}
BARS = (("offered", "#9e9e9e"), ("guest aqu-sz", "#1565c0"), ("host depth", "#ef6c00"))
PAIR_COLORS = ("#1565c0", "#ef6c00")


def chart(figure: Figure) -> str:
    """One figure as inline SVG (empty when it has nothing to draw)."""
    match figure:
        case DepthFigure():
            return depth_chart(figure)
        case PairFigure():
            return pair_chart(figure)
        case _:
            assert_never(figure)


def depth_chart(figure: DepthFigure, width: int = 420, height: int = 220) -> str:
    """Grouped bars (offered, guest aqu-sz, host depth) on a linear scale up to the largest of them."""
    groups = [(g.offered, (float(g.offered), g.guest_aqu_sz, g.host_depth)) for g in figure.groups]
    if not groups:
        return ""
    top = max(max(values) for _, values in groups) or 1.0
    left, bottom, plot_h = 40, 30, height - 62  # 32 px over the plot: the legend and the tallest bar's value
    group_w = (width - left - 10) / len(groups)
    bar_w = group_w / (len(BARS) + 1)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img">',
             f'<line x1="{left}" y1="{height - bottom}" x2="{width - 5}" y2="{height - bottom}" stroke="#333"/>']
    for frac in (0.0, 0.5, 1.0):
        y = height - bottom - frac * plot_h
        parts.append(f'<text x="{left - 4}" y="{y + 4:.0f}" font-size="10" text-anchor="end">{top * frac:.0f}</text>')
    for gi, (offered, values) in enumerate(groups):
        x0 = left + gi * group_w + bar_w / 2
        for bi, ((label, color), v) in enumerate(zip(BARS, values, strict=True)):
            h = plot_h * v / top
            x = x0 + bi * bar_w
            parts.append(f'<rect x="{x:.1f}" y="{height - bottom - h:.1f}" width="{bar_w * 0.9:.1f}" '
                         f'height="{h:.1f}" fill="{color}"><title>{label}: {v:g}</title></rect>')
            parts.append(f'<text x="{x + bar_w * 0.45:.1f}" y="{height - bottom - h - 3:.1f}" font-size="9" '
                         f'text-anchor="middle">{v:.1f}</text>')
        parts.append(f'<text x="{x0 + 1.5 * bar_w:.1f}" y="{height - bottom + 14}" font-size="11" '
                     f'text-anchor="middle">offered {offered}</text>')
    for li, (label, color) in enumerate(BARS):
        parts.append(f'<rect x="{left + li * 110}" y="4" width="10" height="10" fill="{color}"/>'
                     f'<text x="{left + li * 110 + 14}" y="13" font-size="11">{label}</text>')
    parts.append("</svg>")
    return "".join(parts)


def pair_chart(figure: PairFigure, width: int = 420) -> str:
    """Horizontal bar pairs (expected or guest side in blue, host side in orange)."""
    if not figure.pairs:
        return ""
    top = max(max(p.first, p.second) for p in figure.pairs) or 1.0
    left, bar_h, row_h = 190, 12, 34
    height = row_h * len(figure.pairs) + 6
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img">']
    for i, p in enumerate(figure.pairs):
        y = 4 + i * row_h
        parts.append(f'<text x="{left - 6}" y="{y + bar_h + 4}" font-size="11" text-anchor="end">'
                     f"{html.escape(p.label)}</text>")
        for j, v in enumerate((p.first, p.second)):
            w = (width - left - 60) * v / top
            yy = y + j * (bar_h + 2)
            value = html.escape(f"{v:g} {p.unit}".strip())
            parts.append(f'<rect x="{left}" y="{yy}" width="{w:.1f}" height="{bar_h}" fill="{PAIR_COLORS[j]}">'
                         f"<title>{value}</title></rect>"
                         f'<text x="{left + w + 4:.1f}" y="{yy + bar_h - 2}" font-size="10">{value}</text>')
    parts.append("</svg>")
    return "".join(parts)


def incomplete_banner(status: RunStatus | None) -> str:
    """A red banner over the verdicts of a run that did not reach every verdict."""
    if status is None or status.complete:
        return ""
    return (f'<p id="incomplete" style="background:#c62828;color:#fff;padding:8px;font-weight:bold">'
            f"{html.escape(status.banner())}</p>")


def what_was_tested(properties: Mapping[str, str]) -> str:
    """"What was tested": the run's suite properties as two tables. The run's own (image, guest OS,
    kernel, options) as name and value; each controller's (``disk.<controller>.<what>``: its driver,
    the driver's version, the boot settings) with one column per controller, so two controllers,
    or two reports side by side, compare row by row. Plain data: the keys are the README's."""
    general = [(k, v) for k, v in properties.items() if not k.startswith("disk.")]
    per: dict[str, dict[str, str]] = {}
    for k, v in properties.items():
        if k.startswith("disk.") and k.count(".") >= 2:
            _, controller, what = k.split(".", 2)
            per.setdefault(controller, {})[what] = v
    if not general and not per:
        return ""
    esc = html.escape
    out = ['<section id="tested"><h2>What was tested</h2><table>']
    out += [f"<tr><td>{esc(k)}</td><td>{esc(v)}</td></tr>" for k, v in general]
    out.append("</table>")
    if per:
        controllers = list(per)
        rows = list(dict.fromkeys(w for c in controllers for w in sorted(per[c], key=_row_order)))
        out.append("<table><tr><th></th>" + "".join(f"<th>{esc(c)}</th>" for c in controllers) + "</tr>")
        for w in rows:
            values = [per[c].get(w, "") for c in controllers]
            mark = ' style="background:#fff3e0"' if len(set(values)) > 1 else ""  # controllers differ here
            cells = "".join(f"<td{mark}>{esc(v)}</td>" for v in values)
            out.append(f"<tr><td>{esc(w)}</td>{cells}</tr>")
        out.append("</table>")
    out.append("</section>")
    return "".join(out)


def _row_order(what: str) -> tuple[int, str]:
    """Drivers first, then the disk under test's boot settings, then the scratch disk's."""
    return (2 if what.startswith("scratch.") else 1 if what.startswith("boot.") or what == "kernel_name" else 0, what)


def report_document(records: Iterable[Record], title: str = "vioconform report", subtitle: str = "",
                    status: RunStatus | None = None, properties: Mapping[str, str] | None = None) -> str:
    recs = list(records)
    rows, sections = [], []
    for r in recs:
        outcome = r.outcome or "error"  # an undecided record is never a pass
        color = COLORS.get(outcome, "#000")
        first = html.escape(r.message.splitlines()[0]) if r.message else ""
        rows.append(f'<tr><td style="color:{color};font-weight:bold">{outcome.upper()}</td>'
                    f"<td>{html.escape(r.rule)}</td><td>{html.escape(r.config)}</td><td>{first}</td></tr>")
        charts = "".join(chart(f) for f in r.verdict.figures) if r.verdict else ""
        props = "".join(f"<tr><td>{html.escape(k)}</td><td>{html.escape(str(v))}</td></tr>"
                        for k, v in sorted(r.measured().items()))
        details = f"<pre>{html.escape(r.message)}</pre>" if outcome in ("failed", "error") else ""
        sections.append(f'<section><h2 style="color:{color}">{html.escape(r.rule)} — {html.escape(r.config)}</h2>'
                        f"{charts}{details}<details><summary>measured numbers</summary>"
                        f"<table>{props}</table></details></section>")
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:60em}} table{{border-collapse:collapse}}
td{{border-bottom:1px solid #ddd;padding:2px 8px;font-size:13px}} pre{{background:#f6f6f6;padding:8px;white-space:pre-wrap}}
section{{margin-top:2em}}</style></head>
<body><h1>{html.escape(title)}</h1>{incomplete_banner(status)}<p>{html.escape(subtitle)}</p>
<table><tr><th>verdict</th><th>rule</th><th>configuration</th><th>message</th></tr>{''.join(rows)}</table>
{what_was_tested(properties or {})}
{''.join(sections)}
</body></html>
"""


def write_html(records: Iterable[Record], path: Path, subtitle: str = "", status: RunStatus | None = None,
               mode: int = file_mode(DEFAULT_DIR_MODE), properties: Mapping[str, str] | None = None) -> Path:
    """Write the report atomically (see :func:`reports.results.write_atomic`)."""
    return write_atomic(path, report_document(records, subtitle=subtitle, status=status, properties=properties), mode)
