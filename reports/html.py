"""A one-file HTML report: verdict table, and per configuration the pictures of its verdict.

The pictures come from the verdict's typed figures (``model.judging.figures``), never from the
names of its JUnit properties. For the queue-depth rule the picture is the whole story at a
glance: for each offered depth, three bars: what the workload offered, what the guest block
layer held (aqu-sz) and what the host saw. A healthy guest has three similar bars; the Solaris
TCQ signature is a tall guest bar over a host bar of about 1. Beside it, each measured window as
vscsiStats shows it: the host's histograms (outstanding I/Os at issue, I/O length, latency) next
to the guest's own view. The other rules draw labelled pairs, the expected or guest side against
the host side; the lifecycle rules their two sides over the disk's bytes (discard: the ranges the
guest discarded over what the host counted and freed) or over time (resize: the size each side
showed; hotplug: the disk present on each side). A failed verdict names the layer at fault (its ``blame`` column and the line over
its section: model/blame.py). matplotlib draws them (reports/charts.py) as inline SVG: no JavaScript, no external
files. The header names what was measured: QEMU, machine, accelerator, libvirt, host kernel (or
vCenter and ESXi), image and guest kernel.

At the top, a rule x configuration grid of the verdicts, each cell linking to its section. The page
reads without colour and without sight (reports/a11y.py): every outcome is a word on its
colour-blind-safe colour, every chart has a title, a description and a visible caption in words,
and the page has a language and a viewport for phones and zoom.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePath
from typing import assert_never

from model.judging.figures import DepthFigure, Figure, HistogramFigure, PairFigure, RangeFigure, TimelineFigure
from reports.a11y import OUTCOME_FILLS, TEXT, badge, badge_css, chart_summary, counts_text
from reports.records import Record, RunStatus, section_id
from reports.results import DEFAULT_DIR_MODE, file_mode, write_atomic
from reports.run_header import RunHeader, header_html


def chart(figure: Figure) -> str:
    """One figure as inline SVG, drawn by reports/charts.py (empty when it has nothing to draw).
    matplotlib is imported here, on the first chart, not when the plugin loads: it is most of a
    run's start-up time (about 1.3 s of the plugin's 2.7 s import), and xdist workers never draw."""
    from reports import charts

    match figure:
        case DepthFigure():
            return charts.depth_svg(figure)
        case PairFigure():
            return charts.pair_svg(figure)
        case HistogramFigure():
            return charts.histogram_svg(figure)
        case RangeFigure():
            return charts.range_svg(figure)
        case TimelineFigure():
            return charts.timeline_svg(figure)
        case _:
            assert_never(figure)


def figure_html(figure: Figure) -> str:
    """A chart with its summary in words as a visible caption (empty when it has nothing to draw);
    drawn once, where :func:`draw_ahead` drew it before."""
    ahead = _drawn.get(id(figure))
    if ahead is not None and ahead[0] is figure:
        return ahead[1]
    svg = chart(figure)
    return f"<figure>{svg}<figcaption>{html.escape(chart_summary(figure))}</figcaption></figure>" if svg else ""


#: What :func:`draw_ahead` drew: each figure (kept, so its id stays its own) and its HTML, by id.
_drawn: dict[int, tuple[Figure, str]] = {}


def draw_ahead(figures: Iterable[Figure]) -> None:
    """Draw ``figures`` now, for the report that follows (matplotlib takes 0.1-0.4 s a chart under TCG's
    load, 30 of them for the default suite): the session draws them in a thread while its guest is torn
    down, and :func:`figure_html` then finds them drawn. Not for two threads at once (pyplot keeps
    global state): the report waits for this to end."""
    for figure in figures:
        if id(figure) not in _drawn:
            _drawn[id(figure)] = (figure, figure_html(figure))


def incomplete_banner(status: RunStatus | None) -> str:
    """A banner, in the failed colour, over the verdicts of a run that did not reach every verdict."""
    if status is None or status.complete:
        return ""
    return (f'<p id="incomplete" role="alert" style="background:{OUTCOME_FILLS["failed"]};color:{TEXT};padding:8px;'
            f'font-weight:bold">{html.escape(status.banner())}</p>')


def verdict_grid(recs: list[Record]) -> str:
    """The verdicts at a glance: one row per rule, one column per configuration, each cell the
    outcome's badge linking to its section (``#<rule>--<configuration>``, reports.records.section_id), a dash where the rule did not run on
    that configuration; a sentence with the counts above it."""
    if not recs:
        return ""
    esc = html.escape
    rules = list(dict.fromkeys(r.rule for r in recs))
    configs = list(dict.fromkeys(r.config for r in recs))
    cells: dict[tuple[str, str], list[str]] = {}
    for r in recs:
        cells.setdefault((r.rule, r.config), []).append(
            badge(r.outcome or "error", "a", f' href="#{section_id(r.rule, r.config)}"'))
    # a configuration's name may break after each colon: many columns fit a phone's width
    head = "".join(f'<th scope="col">{esc(c).replace(":", ":<wbr>")}</th>' for c in configs)
    body = "".join(f'<tr><th scope="row">{esc(rule)}</th>'
                   + "".join(f"<td>{' '.join(cells[(rule, c)])}</td>" if (rule, c) in cells else
                             '<td class="none">&ndash;<span class="vh"> not run on this configuration</span></td>'
                             for c in configs) + "</tr>" for rule in rules)
    return (f'<h2 id="grid-title">Verdicts by rule and configuration</h2>'
            f'<p id="counts">{len(recs)} verdict(s): {counts_text([r.outcome or "error" for r in recs])}.</p>'
            + scrolling("grid-title", f'<table id="verdict-grid" aria-labelledby="grid-title"><thead><tr>'
                                      f'<th scope="col">rule</th>{head}</tr></thead><tbody>{body}</tbody></table>'))


#: The header's "measured on" line: the run's fingerprint entries a reader asks for first.
HEADER_KEYS = (("QEMU", "qemu.version"), ("machine", "qemu.machine"), ("accelerator", "qemu.accel"),
               ("emulator", "qemu.emulator"), ("libvirt", "libvirt.version"), ("host kernel", "host.kernel"),
               ("vCenter", "vcenter.version"), ("vCenter build", "vcenter.build"), ("ESXi", "esxi.version"),
               ("ESXi build", "esxi.build"), ("image", "image"), ("guest", "guest.os_release"),
               ("guest kernel", "guest.kernel"), ("fio", "fio_version"), ("vioconform", "vioconform_revision"))


def measured_on(properties: Mapping[str, str]) -> str:
    """What this run measured, in the header: the hypervisor build, machine, image and guest."""
    items = [(label, properties[key]) for label, key in HEADER_KEYS if properties.get(key)]
    if not items:
        return ""
    cells = "".join(f"<tr><th>{html.escape(label)}</th><td>{html.escape(value)}</td></tr>" for label, value in items)
    return ('<h2 id="measured-title">Measured on</h2>'
            + scrolling("measured-title", f'<table id="measured-on" class="env">{cells}</table>'))


def what_was_tested(properties: Mapping[str, str]) -> str:
    """"What was tested": the run's suite properties as two tables. The run's own (image, guest OS,
    kernel, options) as name and value; each controller's (``disk.<controller>.<what>``: its driver,
    the driver's version, the boot settings) with one column per controller, so two controllers,
    or two reports side by side, compare row by row. Plain data: the keys are docs/reference.md's."""
    general = [(k, v) for k, v in properties.items() if not k.startswith("disk.")]
    per: dict[str, dict[str, str]] = {}
    for k, v in properties.items():
        if k.startswith("disk.") and k.count(".") >= 2:
            _, controller, what = k.split(".", 2)
            per.setdefault(controller, {})[what] = v
    if not general and not per:
        return ""
    esc = html.escape
    out = [('<section id="tested"><h2 id="tested-title">What was tested</h2><div class="scroll" role="region" '
            'tabindex="0" aria-labelledby="tested-title"><table>')]
    out += [f"<tr><td>{esc(k)}</td><td>{esc(v)}</td></tr>" for k, v in general]
    out.append("</table>")
    if per:
        controllers = list(per)
        rows = list(dict.fromkeys(w for c in controllers for w in sorted(per[c], key=_row_order)))
        out.append("<table><tr><th></th>" + "".join(f"<th>{esc(c)}</th>" for c in controllers) + "</tr>")
        for w in rows:
            values = [per[c].get(w, "") for c in controllers]
            differ = len(set(values)) > 1  # controllers differ here: said in words, and tinted
            mark = ' style="background:#fff3e0"' if differ else ""
            cells = "".join(f"<td{mark}>{esc(v)}</td>" for v in values)
            out.append(f"<tr><td>{esc(w)}{' <em>(differs)</em>' if differ else ''}</td>{cells}</tr>")
        out.append("</table>")
    out.append("</div></section>")
    return "".join(out)


def scrolling(labelled_by: str, content: str) -> str:
    """``content`` (a table) in a region that scrolls sideways where the screen is narrower than it,
    focusable so that a keyboard scrolls it too, named by the heading ``labelled_by``."""
    return f'<div class="scroll" role="region" tabindex="0" aria-labelledby="{labelled_by}">{content}</div>'


def _row_order(what: str) -> tuple[int, str]:
    """Drivers first, then the disk under test's boot settings, then the scratch disk's."""
    return (2 if what.startswith("scratch.") else 1 if what.startswith("boot.") or what == "kernel_name" else 0, what)


def reproducer_link(path: str) -> str:
    """A test's reproducer bundle, linked relative to the report (the bundles are in its directory's
    ``reproducers/``): the directory and its ``.tar.gz``; "" for none."""
    if not path:
        return ""
    p = PurePath(path)
    rel = html.escape(f"{p.parent.name}/{p.name}", quote=True)
    return (f'<p class="reproducer">reproducer: <a href="{rel}/README.md">{html.escape(p.name)}</a> '
            f'(<a href="{rel}.tar.gz">.tar.gz</a>; replay it with its <code>replay</code>)</p>')


def report_document(records: Iterable[Record], title: str = "vioconform report", subtitle: str = "",
                    status: RunStatus | None = None, properties: Mapping[str, str] | None = None,
                    header: RunHeader | None = None) -> str:
    recs = list(records)
    rows, sections = [], []
    for r in recs:
        outcome = r.outcome or "error"  # an undecided record is never a pass
        first = html.escape(r.headline)
        anchor = section_id(r.rule, r.config)
        blamed = (f'<td class="blame" title="{html.escape(r.blame_reason)}">{html.escape(r.blame or "unknown")}</td>'
                  if outcome == "failed" else "<td></td>")
        rows.append(f"<tr><td>{badge(outcome)}</td><td>{html.escape(r.rule)}</td><td>{html.escape(r.config)}</td>"
                    f'{blamed}<td class="message">{first}</td></tr>')
        charts = "".join(figure_html(f) for f in r.verdict.figures) if r.verdict else ""
        props = "".join(f"<tr><td>{html.escape(k)}</td><td>{html.escape(str(v))}</td></tr>"
                        for k, v in sorted(r.measured().items()))
        blame = (f'<p class="blame"><strong>blame: {html.escape(r.blame or "unknown")}</strong>: '
                 f"{html.escape(r.blame_reason)}</p>" if outcome == "failed" else "")
        details = f"<pre>{html.escape(r.message)}</pre>" if outcome in ("failed", "error") else ""
        sections.append(f'<section id="{anchor}"><h2>{badge(outcome)} {html.escape(r.rule)} — '
                        f"{html.escape(r.config)}</h2>{blame}{reproducer_link(r.reproducer)}"
                        f"{charts}{details}<details><summary>measured numbers</summary>"
                        f"<table>{props}</table></details></section>")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)}</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:72em;color:{TEXT}}} table{{border-collapse:collapse}}
td{{border-bottom:1px solid #ddd;padding:2px 8px;font-size:13px}} pre{{background:#f6f6f6;padding:8px;white-space:pre-wrap}}
section{{margin-top:2em}} table.env th{{text-align:left;font-size:13px;padding:2px 8px;color:#555}}
#verdict-grid th,#verdict-grid td{{border:1px solid #ddd;padding:4px 8px;font-size:13px;text-align:left}}
figure{{margin:1em 0}} figcaption{{font-size:13px;color:#333;max-width:60em}}
.vh{{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap}}
svg{{max-width:100%;height:auto}} .scroll{{overflow-x:auto;max-width:100%}} h1,h2,p,dd{{overflow-wrap:anywhere}}
@media (max-width:40em){{body{{margin:0.5em}} #verdicts tr:first-child{{position:absolute;width:1px;height:1px;
overflow:hidden;clip:rect(0 0 0 0)}} #verdicts tr{{display:block;border-bottom:1px solid #ddd;padding:4px 0}}
#verdicts td{{display:inline-block;border:0}} #verdicts td.message{{display:block;overflow-wrap:anywhere}}
#verdicts td.blame::before{{content:"blame: "}}}}
#run{{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:0 0 1em}} #run dt{{font-weight:bold}}
#run dd{{margin:0}}
{badge_css()}</style></head>
<body><main><h1>{html.escape(title)}</h1>{incomplete_banner(status)}<p>{html.escape(subtitle)}</p>{header_html(header)}
{verdict_grid(recs)}
{measured_on(properties or {})}
<h2>Verdicts</h2><table id="verdicts"><tr><th scope="col">verdict</th><th scope="col">rule</th>
<th scope="col">configuration</th><th scope="col">blame</th><th scope="col">message</th></tr>{''.join(rows)}</table>
{what_was_tested(properties or {})}
{''.join(sections)}
</main></body></html>
"""


def write_html(records: Iterable[Record], path: Path, subtitle: str = "", status: RunStatus | None = None,
               mode: int = file_mode(DEFAULT_DIR_MODE), properties: Mapping[str, str] | None = None,
               header: RunHeader | None = None) -> Path:
    """Write the report atomically (see :func:`reports.results.write_atomic`)."""
    return write_atomic(path, report_document(records, subtitle=subtitle, status=status, properties=properties,
                                              header=header), mode)
