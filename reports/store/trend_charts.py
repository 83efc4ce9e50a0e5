"""The trend page's metric charts (reports/store/trend.py): one chart per metric, one line per rule and
configuration across the series' runs.

Each line is a configuration's medians over the runs with its repeats' min..max, over its noise band
(shaded in the line's colour); lines differ in colour, marker and dash, so none is told by colour
alone. Every chart has the same size and every text the same size (reports/charts.py
``TREND_FONT_PT``: 13 px where the page shows the SVG at its own size, as the page's tables), so no
chart's words come out larger or smaller than another's. A dashed black line before a column marks a run whose fingerprint changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter

from reports.a11y import GUEST, OFFERED, TEXT, series_summary
from reports.charts import TREND_FONT_PT as FONT_PT
from reports.charts import changes_said, mark_changes, number_text, to_svg

#: Every metric chart's size in inches: the same scale for all of them.
METRIC_FIGSIZE = (7.2, 2.8)
#: The lines' looks, in order: each its own marker and dash, so no line is told by colour alone; blues,
#: black and greys at 3:1 or more against the page, none an outcome's colour (the grid above uses those).
LINE_STYLES = ((GUEST, "o", "-"), (TEXT, "s", "--"), (OFFERED, "^", "-."), ("#004a75", "D", ":"),
               ("#595959", "v", (0, (5, 1, 1, 1))))


@dataclass(frozen=True)
class MetricLine:
    """One configuration's metric over the runs: per run its median and repeats' min..max (None where
    the run did not measure it), and its noise band (None: not known)."""

    label: str
    medians: Sequence[float | None]
    lows: Sequence[float | None]
    highs: Sequence[float | None]
    band: tuple[float, float] | None = None


def metric_svg(metric: str, unit: str, columns: Sequence[str], lines: Sequence[MetricLine],
               marks: Sequence[int] = ()) -> str:
    """One metric across the runs (``columns``), a line per configuration (empty without a line)."""
    if not lines:
        return ""
    fig, ax = plt.subplots(figsize=METRIC_FIGSIZE)
    for k, line in enumerate(lines):
        color, marker, dash = LINE_STYLES[k % len(LINE_STYLES)]
        if line.band is not None:
            ax.axhspan(line.band[0], line.band[1], color=color, alpha=0.10, lw=0)
        xs = [i for i, m in enumerate(line.medians) if m is not None]
        ys = [float(m) for m in line.medians if m is not None]
        lo = [ys[j] - (v if (v := line.lows[i]) is not None else ys[j]) for j, i in enumerate(xs)]
        hi = [(v if (v := line.highs[i]) is not None else ys[j]) - ys[j] for j, i in enumerate(xs)]
        ax.errorbar(xs, ys, yerr=[lo, hi], color=color, marker=marker, ls=dash, ms=5, lw=1.4, capsize=3,
                    label=line.label)
    ax.set_xticks(range(len(columns)), columns, rotation=30, ha="right", fontsize=FONT_PT)
    ax.set_xlim(-0.5, max(len(columns) - 0.5, 0.5))
    ax.set_title(f"{metric} ({unit})" if unit else metric, fontsize=FONT_PT, loc="left")
    ax.tick_params(axis="y", labelsize=FONT_PT)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: number_text(v)))  # 1,048,576, never "1e6"
    mark_changes(ax, marks, -0.5)
    ax.legend(fontsize=FONT_PT, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    desc = " ".join(series_summary(f"{metric} of {line.label}", unit, columns, line.medians, line.band)
                    for line in lines)
    return to_svg(fig, f"{metric} over {len(columns)} run(s), {len(lines)} configuration(s)",
                  desc + " The shaded bands are each line's noise band." + changes_said(columns, marks))
