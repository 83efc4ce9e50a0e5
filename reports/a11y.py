"""What makes the report and the trend page read well without colour and without sight.

- The palette. Outcomes are Okabe-Ito fills (Okabe and Ito, "Color Universal Design", 2002: eight
  colours told apart with every common colour-vision deficiency) with the outcome's word written
  on them in black: black on each fill has a WCAG contrast of at least 5.4:1, over the 4.5:1 that
  WCAG 2 (1.4.3, level AA) asks of text. Passed is bluish green and failed vermillion: under a
  simulated deuteranopia or protanopia the two still differ by 37 or more CIELAB units (the
  former green and red differed by 16-19, about the same brightness, so a red-green colour-blind
  reader could not tell them apart). The charts draw the guest in Okabe-Ito blue and the host in
  vermillion: blue against orange survives every deficiency, and both bars have at least the 3:1
  contrast against the white page that WCAG 2 (1.4.11) asks of graphics.
- The text alternatives: a title and a one- or two-sentence summary of what each chart shows, for
  the chart's SVG ``<title>``/``<desc>`` (a screen reader's name and description of the picture)
  and for the report's visible caption. They are built from the same typed figures as the
  pictures.

No matplotlib here: the report imports this for every run, and matplotlib only for a chart.
"""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Sequence
from typing import assert_never

from model.judging.figures import (
    Buckets,
    DepthFigure,
    Figure,
    HistogramFigure,
    Pair,
    PairFigure,
    RangeFigure,
    RangeLane,
    TimelineFigure,
    size_text,
)

BACKGROUND = "#ffffff"
TEXT = "#000000"
#: The outcome fills (Okabe-Ito; skipped a neutral light grey): the word is always written on them.
OUTCOME_FILLS = {"passed": "#009e73", "failed": "#d55e00", "error": "#cc79a7", "skipped": "#dddddd",
                 "not run": "#e69f00"}
#: Where the trend grid has no such test in a run: an empty cell (its summary says "in all N run(s)
#: that had it").
ABSENT = "absent"
#: A shape beside the word, for a reader who scans a grid: the same for every reader, so never
#: the only sign (the word is). HTML: written into the page as they are.
OUTCOME_MARKS = {"passed": "✓", "failed": "✗", "error": "!", "skipped": "&ndash;", "not run": "○"}

#: The charts' series: the guest (Okabe-Ito blue), the host (vermillion), what was offered (grey,
#: 3.5:1 against white, the lightest grey over WCAG's 3:1 for graphics).
GUEST, HOST, OFFERED = "#0072b2", "#d55e00", "#888888"


def outcome_class(outcome: str) -> str:
    """The CSS class of an outcome's badge: ``o-not-run`` for "not run"."""
    return "o-" + outcome.replace(" ", "-")


def badge_css() -> str:
    """The badges' style: the word in black on the outcome's fill."""
    rules = [f".o{{color:{TEXT};padding:0 5px;border-radius:3px;font-weight:bold;white-space:nowrap}}"]
    rules += [f".{outcome_class(o)}{{background:{fill}}}" for o, fill in OUTCOME_FILLS.items()]
    return "\n".join(rules)


def badge(outcome: str, tag: str = "span", attrs: str = "") -> str:
    """The outcome as a word on its colour, its mark beside it (hidden from screen readers, which
    read the word): ``<span class="o o-failed">✗ FAILED</span>``."""
    mark = OUTCOME_MARKS.get(outcome, "?")
    return (f'<{tag} class="o {outcome_class(outcome)}"{attrs}><span aria-hidden="true">{mark} </span>'
            f"{html.escape(outcome.upper())}</{tag}>")


def counts_text(outcomes: Sequence[str]) -> str:
    """"3 passed, 1 failed": each outcome's count, in the palette's order."""
    n = Counter(outcomes)
    order = [*OUTCOME_FILLS, *sorted(set(n) - set(OUTCOME_FILLS))]
    return ", ".join(f"{n[o]} {o}" for o in order if n[o]) or "none"


def _num(v: float) -> str:
    return f"{v:.3g}" if abs(v) < 1000 else f"{v:.0f}"


def _mode(data: Buckets) -> str:
    """The bucket holding the most, and its share of the whole."""
    total = sum(v for _, v in data)
    label, top = max(data, key=lambda b: b[1])
    return f"most in {label} ({100 * top / total:.0f} %)" if total else "nothing recorded"


def chart_title(figure: Figure) -> str:
    """What a chart is, in a few words."""
    match figure:
        case DepthFigure():
            return "I/Os in flight at each offered depth: offered, guest block layer (aqu-sz), host"
        case PairFigure():
            return "; ".join(p.label for p in figure.pairs)
        case HistogramFigure():
            return f"{figure.label}: host and guest histograms"
        case RangeFigure() | TimelineFigure():
            return figure.title
        case _:
            assert_never(figure)


def threshold_text(pair: Pair) -> str:
    """A pair's pass threshold in words: "pass: host at least 12.8 KiB" ("" without one)."""
    t = pair.threshold
    return "" if t is None else f"pass: host {t.passes} {_num(t.value)}{' ' + pair.unit if pair.unit else ''}"


def chart_summary(figure: Figure) -> str:
    """What a chart shows, in words: its numbers, or the shape of its histograms."""
    match figure:
        case DepthFigure():
            return " ".join(f"Offered {g.offered}: the guest held {_num(g.guest_aqu_sz)}, the host saw "
                            f"{_num(g.host_depth)}"
                            + (f" (passes at {_num(g.host_min)} or more)" if g.host_min is not None else "") + "."
                            for g in figure.groups)
        case PairFigure():
            return " ".join(f"{p.label}: {_num(p.first)} against {_num(p.second)}{' ' + p.unit if p.unit else ''}"
                            + (f" ({threshold_text(p)})" if p.threshold else "") + "." for p in figure.pairs)
        case HistogramFigure():
            host = (f"No host trace ({figure.host_missing})." if figure.host_missing else
                    f"Host ({figure.source}): outstanding I/Os at issue {_mode(figure.outstanding) if figure.outstanding else 'nothing recorded'}; "
                    f"I/O length {_mode(figure.io_length) if figure.io_length else 'nothing recorded'}; "
                    f"latency {_mode(figure.latency_us) if figure.latency_us else 'nothing recorded'}.")
            depth = (f"fio submitted depth {_mode(figure.guest_depth_pct)} of the time" if figure.guest_depth_pct
                     else "fio submitted depth not recorded")
            clat = ", ".join(f"{k} {_num(v)} us" for k, v in figure.guest_clat_us) or "not recorded"
            return f"{host} Guest: {depth}; completion latency {clat}."
        case RangeFigure():
            if figure.empty:
                return f"{NOTHING_TO_DRAW}: {figure.note or 'no range'}."
            return " ".join([*(_lane_text(lane) for lane in figure.lanes), figure.note]).strip()
        case TimelineFigure():
            if figure.empty:
                return f"{NOTHING_TO_DRAW}: {figure.note or 'no series'}."
            series = " ".join(f"{s.label}: " + ", ".join(
                f"{figure.value_text(c.value)} {'at' if k == 0 else 'from'} {seconds(c.t_s)} s"
                for k, c in enumerate(s.changes)) + "." for s in figure.series if s.changes)
            marks = ("; ".join(f"{m.label} at {seconds(m.t_s)} s" for m in figure.markers) + ".") if figure.markers else ""
            return " ".join(x for x in (f"Time in {figure.clock}, to {seconds(figure.end_s)} s.", series,
                                        f"Marked: {marks}" if marks else "", figure.note) if x)
        case _:
            assert_never(figure)


#: What a range or timeline chart without data says, drawn and in words.
NOTHING_TO_DRAW = "Nothing to draw"


def seconds(t_s: float) -> str:
    """A time to the millisecond, without trailing zeros: 0.004, 0.112, 6.07, 5."""
    return f"{t_s:.3f}".rstrip("0").rstrip(".") or "0"


def _lane_text(lane: RangeLane) -> str:
    """One lane in words: each range's size, and where it is when the lane knows."""
    if not lane.ranges:
        return f"{lane.label}: none."
    parts = [f"{r.label} {size_text(r.length_bytes)}" + (f" at {size_text(r.offset_bytes)}" if lane.placed else "")
             + (f" ({r.note})" if r.note else "") for r in lane.ranges]
    return f"{lane.label}{'' if lane.placed else ' (amounts)'}: {'; '.join(parts)}."


def _row_stories(rows: Sequence[str], columns: Sequence[str],
                 outcomes: Sequence[Sequence[str]]) -> tuple[dict[str, list[str]], list[str]]:
    """The grid's rows that kept one outcome in every run that had them, by outcome; and a
    sentence for each row that changed: its usual outcome and the runs of the others."""
    steady: dict[str, list[str]] = {}
    changed = []
    for name, row in zip(rows, outcomes, strict=True):
        present = [(c, o) for c, o in zip(columns, row, strict=True) if o != ABSENT]
        kinds = Counter(o for _, o in present)
        if len(kinds) == 1:
            steady.setdefault(present[0][1], []).append(name)
        elif kinds:
            common = kinds.most_common(1)[0][0]
            rare = "; ".join(f"{o} in {', '.join(c for c, x in present if x == o)}" for o in kinds if o != common)
            changed.append(f"{name}: {common} in {kinds[common]} run(s); {rare}.")
    return steady, changed


def grid_headline(rows: Sequence[str], columns: Sequence[str], outcomes: Sequence[Sequence[str]]) -> str:
    """The trend grid's news, short enough to read beside it: the newest run's counts and the rows
    whose outcome changed over the runs."""
    if not rows or not columns:
        return ""
    newest = [row[-1] for row in outcomes if row[-1] != ABSENT]
    _, changed = _row_stories(rows, columns, outcomes)
    news = (f"Changed over these runs: {' '.join(changed)}" if changed else
            f"No row changed its outcome over these {len(columns)} run(s).")
    return f"Newest run ({columns[-1]}): {counts_text(newest)}. {news}"


def grid_summary(rows: Sequence[str], columns: Sequence[str], outcomes: Sequence[Sequence[str]]) -> str:
    """The whole trend grid in words (its SVG description): the headline, then the rows that kept
    one outcome, grouped by it."""
    if not rows or not columns:
        return ""
    steady, _ = _row_stories(rows, columns, outcomes)
    kept = " ".join(f"{o.capitalize()} in every run that had them: {', '.join(names)}." for o, names in steady.items())
    return f"{grid_headline(rows, columns, outcomes)} {kept}".strip()


def series_summary(title: str, unit: str, columns: Sequence[str], medians: Sequence[float | None],
                   band: tuple[float, float] | None) -> str:
    """A metric's series in words: its range over the runs, the newest run's median, the noise
    band and the runs outside it."""
    shown = [(c, m) for c, m in zip(columns, medians, strict=True) if m is not None]
    if not shown:
        return f"{title}: not measured in these runs."
    values = [m for _, m in shown]
    out = (f"{title}, medians in {unit}: from {_num(min(values))} to {_num(max(values))} over {len(shown)} run(s); "
           f"newest ({shown[-1][0]}) {_num(shown[-1][1])}.")
    if band is not None:
        outside = [c for c, m in shown if not band[0] <= m <= band[1]]
        out += (f" Noise band {_num(band[0])} to {_num(band[1])}: "
                + (f"outside it: {', '.join(outside)}." if outside else "every run inside it."))
    return out
