"""Every picture of the reports, drawn by matplotlib as inline SVG (no JavaScript, no files).

Deterministic: the same figure gives the same SVG bytes (a fixed ``svg.hashsalt``, no date in the
metadata). Text stays text (``svg.fonttype none``), so the page is searchable and small. The Agg
backend: no display needed.

- :func:`depth_svg`: the queue-depth picture. For each offered depth three bars, what the workload
  offered, what the guest's block layer held (aqu-sz) and what the host saw; the axis always
  reaches the offered depth, so "offered 32" is never cut off.
- :func:`pair_svg`: the other rules' pairs, the expected or guest side against the host side.
- :func:`histogram_svg`: one window as vscsiStats shows it, the host's histograms of outstanding
  I/Os, request length and latency beside the guest's own view (fio's submitted depth and its
  completion latency percentiles).
- :func:`range_svg`: byte ranges of a disk in lanes, the guest's over the host's (discard): each range
  has its own hatch in every lane, so a reader matches a range across lanes without colour; a lane of
  amounts (a counter, an allocation total) draws each amount from its range's start, with a dashed edge.
- :func:`timeline_svg`: step series on one clock, one row per series (host: solid line and squares;
  guest: dashed line and circles), each event a dotted vertical line named in the legend.
- :func:`verdict_grid_svg`: the trend page's grid (reports/store/trend.py; its metric charts are
  reports/store/trend_charts.py), each run whose fingerprint changed marked by a dashed line before its
  column (:data:`CHANGE_LABEL` in the legend, and said in the chart's description).

Every chart is an ``<svg role="img">`` with a ``<title>`` and a ``<desc>``: what it is and what it
shows, in words (reports/a11y.py, which also holds the colours). The verdict grid writes each
cell's outcome in it, so no cell is told by its colour alone.
"""

from __future__ import annotations

import html
import io
import logging
from collections.abc import Sequence

import matplotlib
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure as MplFigure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import FuncFormatter

from model.judging.figures import (
    Buckets,
    DepthFigure,
    HistogramFigure,
    PairFigure,
    RangeFigure,
    Side,
    TimelineFigure,
)
from reports.a11y import (
    ABSENT,
    BACKGROUND,
    GUEST,
    HOST,
    OFFERED,
    OUTCOME_FILLS,
    TEXT,
    chart_summary,
    chart_title,
    grid_summary,
    seconds,
    threshold_text,
)

matplotlib.use("Agg")
# matplotlib's font search logs a line per installed font at DEBUG: with the suite's live log at
# DEBUG (-o log_cli_level=DEBUG) that would bury the run's own lines at the end of every run.
logging.getLogger("matplotlib").setLevel(logging.INFO)
matplotlib.rcParams.update({"svg.hashsalt": "vioconform", "svg.fonttype": "none", "font.size": 9,
                            "font.family": "DejaVu Sans", "axes.spines.top": False, "axes.spines.right": False})

OUTCOME_COLORS = {**OUTCOME_FILLS, ABSENT: BACKGROUND}
#: The outcomes written in bold in the verdict grid: the ones a reader looks for.
BOLD_OUTCOMES = ("failed", "error")
#: Every text of the trend page's charts, in points: 13 px where the page shows an SVG at its own size
#: (1 pt = 4/3 px), as the page's tables; one size in every chart, whatever its width.
TREND_FONT_PT = 9.75
#: A rule's pass threshold on its chart: a dashed line in the text colour (named in the legend or the title).
THRESHOLD_STYLE = (0, (4, 2))
THRESHOLD_LABEL = "pass: host at least"
#: The trend charts' mark of a run whose fingerprint changed: a dashed line in the text colour
#: before its column, and its legend text.
CHANGE_LABEL = "fingerprint changed"


def to_svg(fig: MplFigure, title: str, desc: str) -> str:
    """The figure as an inline ``<svg role="img">`` element (no XML prolog) whose first children
    are ``title`` (its accessible name) and ``desc`` (its description: what it shows, in words);
    then the figure is closed."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": "vioconform"}, bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    text = text[text.index("<svg"):]
    head = text.index(">") + 1
    return (text[:4] + ' role="img"' + text[4:head] + f"\n <title>{html.escape(title)}</title>"
            f"\n <desc>{html.escape(desc)}</desc>" + text[head:])


def depth_axis_top(figure: DepthFigure) -> float:
    """The top of the queue-depth axis: the largest offered depth or measured value, plus room
    for the bar labels."""
    top = max((max(float(g.offered), g.guest_aqu_sz, g.host_depth) for g in figure.groups), default=1.0)
    return top * 1.15 or 1.0


def depth_svg(figure: DepthFigure) -> str:
    if not figure.groups:
        return ""
    fig, ax = plt.subplots(figsize=(5.2, 2.6))
    n = len(figure.groups)
    width = 0.26
    for i, (label, color) in enumerate((("offered", OFFERED), ("guest aqu-sz", GUEST), ("host depth", HOST))):
        values = [float(g.offered) if i == 0 else g.guest_aqu_sz if i == 1 else g.host_depth for g in figure.groups]
        bars = ax.bar([x + (i - 1) * width for x in range(n)], values, width, label=label, color=color)
        ax.bar_label(bars, labels=[f"{v:.1f}" if v < 10 else f"{v:.0f}" for v in values], fontsize=7, padding=1)
    barred = [(x, g.host_min) for x, g in enumerate(figure.groups) if g.host_min is not None]
    for k, (x, least) in enumerate(barred):  # the pass bar across the host's bar, named once in the legend
        ax.hlines(least, x + width / 2, x + 3 * width / 2, colors=TEXT, linestyles=THRESHOLD_STYLE, lw=1.4,
                  label=THRESHOLD_LABEL if k == 0 else "_nolegend_")
    ax.set_xticks(range(n), [f"offered {g.offered}" for g in figure.groups])
    ax.set_ylim(0, depth_axis_top(figure))
    ax.set_ylabel("I/Os in flight")
    ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), fontsize=7, frameon=False, ncols=4)
    return to_svg(fig, chart_title(figure), chart_summary(figure))


def number_text(v: float) -> str:
    """A bar's value as a reader takes it in: whole numbers with thousands separators, never in
    exponent form (``4194304`` -> "4,194,304"), fractions to three significant digits."""
    return f"{v:,.0f}" if float(v).is_integer() or abs(v) >= 1000 else f"{v:.3g}"


def pair_svg(figure: PairFigure) -> str:
    """Each pair a row of two bars with their values; a pair's pass threshold a dashed line across it,
    its value and direction in the row's title."""
    return to_svg(pair_plot(figure), chart_title(figure), chart_summary(figure)) if figure.pairs else ""


def pair_plot(figure: PairFigure) -> MplFigure:
    """:func:`pair_svg`'s figure, before it becomes SVG (its texts' places can be measured)."""
    fig, axes = plt.subplots(len(figure.pairs), 1, figsize=(5.2, 0.95 * len(figure.pairs) + 0.2), squeeze=False)
    for ax, p in zip(axes[:, 0], figure.pairs, strict=True):
        bars = ax.barh([1, 0], [p.first, p.second], color=[GUEST, HOST], height=0.6)
        ax.bar_label(bars, labels=[f"{number_text(v)} {p.unit}".strip() for v in (p.first, p.second)], fontsize=7,
                     padding=2)
        ax.set_yticks([])
        ax.set_ylim(-0.5, 1.5)
        top = max(p.first, p.second, p.threshold.value if p.threshold else 0.0, 1e-9)
        ax.set_xlim(0, top * 1.4)
        title = p.label
        if p.threshold is not None:
            ax.axvline(p.threshold.value, color=TEXT, ls=THRESHOLD_STYLE, lw=1.2)
            title += f" ({threshold_text(p)})"
        ax.set_title(title, fontsize=8, loc="left")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: number_text(v)))
        ax.tick_params(axis="x", labelsize=7)
    fig.tight_layout(h_pad=0.6)
    return fig


def _bars(ax: Axes, data: Buckets, color: str, title: str, ylabel: str) -> None:
    ax.set_title(title, fontsize=8, loc="left")
    if not data:
        ax.text(0.5, 0.5, "nothing recorded", ha="center", va="center", transform=ax.transAxes, fontsize=8)
        ax.set_xticks([])
        return
    labels, values = zip(*data, strict=True)
    ax.bar(range(len(values)), values, color=color)
    ax.set_xticks(range(len(values)), labels, rotation=45, ha="right", fontsize=7)
    ax.set_ylabel(ylabel, fontsize=7)
    ax.tick_params(axis="y", labelsize=7)


def histogram_svg(figure: HistogramFigure) -> str:
    """Host (orange) and guest (blue) views of one window, vscsiStats-style."""
    fig, axes = plt.subplots(1, 5, figsize=(11, 2.3))
    if figure.host_missing:
        for ax in axes[:3]:
            ax.text(0.5, 0.5, "no host trace", ha="center", va="center", transform=ax.transAxes, fontsize=8)
            ax.set_xticks([])
            ax.set_yticks([])
    else:
        _bars(axes[0], figure.outstanding, HOST, "host: outstanding I/Os at issue", "requests")
        _bars(axes[1], figure.io_length, HOST, "host: I/O length (bytes)", "requests")
        _bars(axes[2], figure.latency_us, HOST, "host: latency", "requests")
    _bars(axes[3], figure.guest_depth_pct, GUEST, "guest: fio submitted depth", "% of time")
    _bars(axes[4], figure.guest_clat_us, GUEST, "guest: completion latency", "us")
    fig.suptitle(f"{figure.label}" + (f" (host: {figure.source})" if figure.source else
                                       f" (host: {figure.host_missing})"), fontsize=8, x=0.01, ha="left")
    fig.tight_layout()
    return to_svg(fig, chart_title(figure), chart_summary(figure))


SIDE_COLORS: dict[Side, str] = {"guest": GUEST, "host": HOST}
#: Each range's hatch, in the order the ranges come: the same range has the same hatch in every lane.
RANGE_HATCHES = ("//", "..", "xx", "\\\\", "++", "oo")
#: The timelines' series, told apart without colour: the host solid with squares, the guest dashed with circles.
SIDE_LINES: dict[Side, tuple[str, str]] = {"host": ("-", "s"), "guest": ("--", "o")}
#: The timelines' events, one line style each (in the legend with their names and times).
MARKER_STYLES = (":", "-.", (0, (1, 3)), (0, (5, 2, 1, 2, 1, 2)))
MIB = 1 << 20


def nothing_svg(title: str, desc: str) -> str:
    """A chart without data: a short figure that says so in words (``desc``, which starts with
    NOTHING_TO_DRAW), not an empty space."""
    fig, ax = plt.subplots(figsize=(6.4, 0.5))
    ax.axis("off")
    ax.text(0.0, 0.5, desc, ha="left", va="center", transform=ax.transAxes, fontsize=9, wrap=True)
    return to_svg(fig, title, desc)


def range_svg(figure: RangeFigure) -> str:
    """Each lane a row, top to bottom as the figure lists them; the x axis the disk's offset in MiB. A range
    the guest asked for and did not get is an outline; an amount of nothing is written "none"."""
    if figure.empty:
        return nothing_svg(chart_title(figure), chart_summary(figure))
    names = list(dict.fromkeys(r.label for lane in figure.lanes for r in lane.ranges))
    hatch = {name: RANGE_HATCHES[i % len(RANGE_HATCHES)] for i, name in enumerate(names)}
    n = len(figure.lanes)
    fig, ax = plt.subplots(figsize=(6.4, 0.62 * n + 0.9))
    for row, lane in enumerate(figure.lanes):
        y = n - 1 - row
        color = SIDE_COLORS[lane.side]
        for r in lane.ranges:
            left, width = r.offset_bytes / MIB, r.length_bytes / MIB
            text = r.label + (f": {r.note}" if r.note else "")
            if r.length_bytes <= 0:
                ax.text(left, y, f"{r.label}: none" + (f" ({r.note})" if r.note else ""), ha="left", va="center", fontsize=6.5)
                continue
            ax.barh(y, width, left=left, height=0.5, color=BACKGROUND if r.failed else color, hatch=hatch[r.label],
                    edgecolor=color if r.failed else TEXT, linewidth=1.2 if r.failed else 0.6,
                    linestyle="-" if lane.placed else "--")
            ax.text(left + width / 2, y + 0.3, text, ha="center", va="bottom", fontsize=6.5)
    ax.set_yticks(range(n), [lane.label + ("" if lane.placed else "\n(amount, from\nthe range's start)")
                             for lane in reversed(figure.lanes)], fontsize=7)
    ends = [r.end_bytes / MIB for lane in figure.lanes for r in lane.ranges]
    starts = [r.offset_bytes / MIB for lane in figure.lanes for r in lane.ranges]
    pad = (max(ends) - min(starts)) * 0.04 or 0.5
    ax.set_xlim(min(starts) - pad, max(ends) + pad)
    ax.set_ylim(-0.5, n - 0.2)
    ax.set_xlabel("offset on the disk (MiB)", fontsize=7)
    ax.tick_params(axis="x", labelsize=7)
    fig.tight_layout()
    return to_svg(fig, chart_title(figure), chart_summary(figure))


def timeline_svg(figure: TimelineFigure) -> str:
    """One row per series over the figure's clock, from 0 to ``end_s`` (a little past it, so a last change
    shows); the values as their level's word or in MiB; each event a vertical line across the rows."""
    series = [s for s in figure.series if s.changes]
    if not series:
        return nothing_svg(chart_title(figure), chart_summary(figure))
    right = max(figure.end_s, *(c.t_s for s in series for c in s.changes), *(m.t_s for m in figure.markers)) * 1.08
    right = right or 1.0
    values = sorted({c.value for s in series for c in s.changes})  # one scale in every row: the rows compare
    pad = (values[-1] - values[0]) * 0.25 or max(abs(values[-1]) * 0.1, 0.5)
    fig, axes = plt.subplots(len(series), 1, figsize=(6.4, 0.85 * len(series) + 1.1), sharex=True, squeeze=False)
    for ax, s in zip(axes[:, 0], series, strict=True):
        style, marker = SIDE_LINES[s.side]
        xs = [c.t_s for c in s.changes] + [right]
        ys = [c.value for c in s.changes] + [s.changes[-1].value]
        ax.plot(xs, ys, drawstyle="steps-post", color=SIDE_COLORS[s.side], ls=style, lw=1.6)
        ax.plot(xs[:-1], ys[:-1], ls="none", marker=marker, ms=4, color=SIDE_COLORS[s.side])
        ax.set_yticks(values, [figure.value_text(v) for v in values], fontsize=7)
        ax.set_ylim(values[0] - pad, values[-1] + pad)
        ax.set_title(s.label, fontsize=8, loc="left")
        for k, m in enumerate(figure.markers):
            ax.axvline(m.t_s, color=TEXT, lw=0.9, ls=MARKER_STYLES[k % len(MARKER_STYLES)])
    bottom = axes[-1, 0]
    bottom.set_xlim(0, right)
    bottom.set_xlabel(figure.clock, fontsize=7)
    bottom.tick_params(axis="x", labelsize=7)
    if figure.markers:
        handles = [Line2D([], [], color=TEXT, lw=0.9, ls=MARKER_STYLES[k % len(MARKER_STYLES)],
                          label=f"{m.label} ({seconds(m.t_s)} s)") for k, m in enumerate(figure.markers)]
        axes[0, 0].legend(handles=handles, loc="lower left", bbox_to_anchor=(0.0, 1.15), fontsize=7, frameon=False,
                          ncols=2)
    fig.tight_layout()
    return to_svg(fig, chart_title(figure), chart_summary(figure))


def mark_changes(ax: Axes, marks: Sequence[int], offset: float) -> list[Line2D]:
    """A dashed line before each column of ``marks`` (at ``column + offset``); the legend's handle."""
    for k, x in enumerate(marks):
        ax.axvline(x + offset, color=TEXT, ls="--", lw=1, label=CHANGE_LABEL if k == 0 else None)
    return [Line2D([], [], color=TEXT, ls="--", lw=1, label=CHANGE_LABEL)] if marks else []


def changes_said(columns: Sequence[str], marks: Sequence[int]) -> str:
    """The marks in words, for the chart's description: " The fingerprint changed before run A, run B." """
    return f" The fingerprint changed before {', '.join(columns[i] for i in marks)}." if marks else ""


def verdict_grid_svg(rows: Sequence[str], columns: Sequence[str], outcomes: Sequence[Sequence[str]],
                     marks: Sequence[int] = ()) -> str:
    """Rule x configuration rows, one column per run, each cell coloured by its outcome and the
    outcome written in it (failed and error in bold); an empty cell where a run did not have it.
    ``marks``: the columns whose run's fingerprint changed."""
    if not rows or not columns:
        return ""
    fig, ax = plt.subplots(figsize=(min(3.5 + 0.7 * len(columns), 14), 0.3 * len(rows) + 1.2))
    for y, row in enumerate(outcomes):
        for x, outcome in enumerate(row):
            ax.add_patch(Rectangle((x, len(rows) - 1 - y), 0.92, 0.88, fc=OUTCOME_COLORS.get(outcome, BACKGROUND),
                                   ec="#bbb", lw=0.5))
            if outcome != ABSENT:
                ax.text(x + 0.46, len(rows) - 1 - y + 0.44, outcome, ha="center", va="center", fontsize=TREND_FONT_PT,
                        color=TEXT, fontweight="bold" if outcome in BOLD_OUTCOMES else "normal")
    ax.set_xlim(0, len(columns))
    ax.set_ylim(0, len(rows))
    ax.set_xticks([x + 0.46 for x in range(len(columns))], columns, rotation=45, ha="right", fontsize=TREND_FONT_PT)
    ax.set_yticks([len(rows) - 1 - y + 0.44 for y in range(len(rows))], rows, fontsize=TREND_FONT_PT)
    ax.tick_params(length=0)
    for side in ("left", "bottom"):
        ax.spines[side].set_visible(False)
    used = sorted({o for row in outcomes for o in row} - {ABSENT})
    changed = mark_changes(ax, marks, -0.04)
    ax.legend(handles=[*(Patch(color=OUTCOME_COLORS.get(o, BACKGROUND), label=o) for o in used), *changed],
              loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=TREND_FONT_PT, frameon=False)
    return to_svg(fig, f"Verdicts of {len(rows)} rule and configuration row(s) over {len(columns)} run(s)",
                  grid_summary(rows, columns, outcomes) + changes_said(columns, marks))
