"""The trend page: the last N runs of one nightly series, from the results store.

    python -m reports.trend [--store URL] [--last N] [--run ID | --series NAME] [-o trend.html] [--all-metrics]

A series is one nightly job (model/across/series.py: ``--series NAME``, or derived from the hypervisor,
hosts, controllers, faults, disk and image name), followed across every change of QEMU, libvirt,
kernel, machine type, image or fio: those are its fingerprint (model/across/fingerprint.py), what
changed between its runs. The page shows:

- which series it is (its name and options), then what changed between its runs: one line per
  run whose fingerprint differs from the run before (``run 41 -> 42: qemu.version 7.2.22 ->
  8.0.0; unchanged: ...``), and the newest run's fingerprint;
- a verdict grid: one row per rule and configuration, one column per run, each cell coloured by
  its outcome and the outcome written in it (passed, failed, error, skipped, not run; empty where
  a run did not have it), and the grid in words beside it (reports/a11y.py);
- the key metrics as time series: each run's median with its repeats' min..max, and the noise
  band: the series' median +- the metric's minimum effect (model/across/run_to_run.py over the shown runs when
  there are 3 or more, else the measured table in model/across/moves.py). A point outside the band
  moved beyond the noise. Both mark each run whose fingerprint changed (a dashed line before it).

Without ``--run`` or ``--series`` the series is the newest complete run's. Exit code 2 on bad input (a store that
cannot be opened, a run id that does not exist, an empty store) and on a usage error (an ``-o``
path that is a directory, a device or the store's own file: refused before the store is opened),
with the reason.
"""

from __future__ import annotations

import argparse
import html
import itertools
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

from model.across.fingerprint import SERIES_OPTIONS, change_line, fingerprint
from model.across.moves import MIN_EFFECT, MIN_EFFECTS, MetricKey, Series, Spread
from model.across.run_to_run import run_to_run
from reports.a11y import grid_headline
from reports.html import scrolling
from reports.results import write_atomic
from reports.store.compare import check_output_arg, newest_run, series_arg
from reports.store.engine import Store, StoredRun, opened_store
from reports.store.store_error import StoreError
from reports.store.urls import default_url

#: The metrics drawn unless ``--all-metrics``: one or two per rule, the ones a regression moves.
KEY_METRICS = ("qd32_host_depth", "qd32_iops", "iops_scaling", "split_factor", "host_request_bytes_mean",
               "fio_iops", "buffered_request_bytes_median", "direct_request_bytes_median", "latency_host_p50_us",
               "misaligned_requests", "queues_used")


def _label(r: StoredRun) -> str:
    return f"{r.started:%m-%d %H:%M} #{r.id}" if r.started else f"#{r.id}"


def noise_bands(series: Sequence[dict[MetricKey, Series]], keys: Sequence[MetricKey]) -> dict[MetricKey, tuple[float, float]]:
    """Each metric's band: the median of the runs' medians +- its minimum effect (relative)."""
    effects = {(r.rule, r.config, r.name): r.min_effect for r in run_to_run(series)} if len(series) >= 3 else {}
    bands = {}
    for key in keys:
        medians = [Spread.of(s[key].values).median for s in series if key in s and s[key].values]
        if not medians:
            continue
        center = statistics.median(medians)
        effect = effects.get(key, MIN_EFFECTS.get(key[2], MIN_EFFECT))
        half = abs(center) * effect if center else effect
        bands[key] = (center - half, center + half)
    return bands


def fingerprint_changes(runs: Sequence[StoredRun]) -> list[tuple[int, str]]:
    """Each run (its index in ``runs``) whose fingerprint differs from the run before it, with the
    line that says what changed."""
    return [(i, change_line(a.id, b.id, a.fingerprint, b.fingerprint, a.revision, b.revision))
            for i, (a, b) in enumerate(itertools.pairwise(runs), 1)
            if fingerprint(a.fingerprint) != fingerprint(b.fingerprint)]


def trend_document(store: Store, runs: Sequence[StoredRun], all_metrics: bool = False) -> str:
    """The page for ``runs`` (oldest first, one series). matplotlib is imported here, when a page is
    drawn, not when the module loads: ``--help`` and a usage error answer without it (and without
    matplotlib's font cache, which its first import builds)."""
    from reports import charts

    esc = html.escape
    columns = [_label(r) for r in runs]
    changes = fingerprint_changes(runs)
    marks = [i for i, _ in changes]
    verdicts = [store.verdicts(r.id) for r in runs]
    keys = sorted({k for v in verdicts for k in v})
    grid = charts.verdict_grid_svg([f"{rule} [{config}]" for rule, config in keys], columns,
                                   [[v.get(k, "absent") for v in verdicts] for k in keys], marks)
    grid_words = grid_headline([f"{rule} [{config}]" for rule, config in keys], columns,
                               [[v.get(k, "absent") for v in verdicts] for k in keys])
    series = [store.series(r.id) for r in runs]
    metric_keys = sorted({k for s in series for k, v in s.items()
                          if v.direction != "parameter" and (all_metrics or k[2] in KEY_METRICS)})
    metrics = metric_charts(series, metric_keys, columns, marks) if len(runs) >= 2 else one_run_table(series[-1],
                                                                                                      metric_keys)
    last = runs[-1]
    ident = f"<tr><th>series</th><td>{esc(last.series)}</td></tr>"
    ident += "".join(f"<tr><th>{esc(k)}</th><td>{esc(last.options.get(k, '-'))}</td></tr>" for k in SERIES_OPTIONS)
    fp = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in fingerprint(last.fingerprint).items())
    changed = ("".join(f"<li>{esc(line)}</li>" for _, line in changes) if changes else
               f"<li>nothing: the {len(runs)} run(s) share one fingerprint</li>")
    note = ("" if len(runs) >= 2 else
            "<p class='note'>Only one run of this series is stored: there is no trend yet.</p>")
    band_note = ("run-to-run spread of these runs" if len(runs) >= 3
                 else "minimum effects measured on the reference host (docs/benchmarks.md, 'Run-to-run noise')")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>vioconform trend</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:80em}} table{{border-collapse:collapse}}
th{{text-align:left;color:#555;font-weight:normal;padding:2px 8px;font-size:13px}} td{{padding:2px 8px;font-size:13px}}
svg{{max-width:100%;height:auto}} .note{{background:#fff3e0;padding:6px}}
#metrics svg{{display:block;margin:0 0 8px}} .scroll{{overflow-x:auto;max-width:100%}}
h1,p,li{{overflow-wrap:anywhere}}
@media (max-width:50em){{body{{margin:0.5em}}}}</style></head>
<body><main><h1 id="title">vioconform trend: {len(runs)} run(s) of series {esc(last.series)}</h1>
<h2>What changed</h2><ul id="changes">{changed}</ul>
<p>Runs {esc(columns[0])} to {esc(columns[-1])}. A series is one job, followed across every change of its
fingerprint (QEMU, libvirt, kernels, machine type, image, fio); a dashed line in the charts marks each run whose
fingerprint changed.</p>
{scrolling("title", f'<table id="series">{ident}</table>')}{note}
<h2 id="fingerprint-title">Fingerprint of the newest run</h2>
{scrolling("fingerprint-title", f'<table id="fingerprint">{fp}</table>')}
<h2>Verdicts</h2><div id="grid">{grid}</div><p id="grid-summary">{esc(grid_words)}</p>
<h2 id="metrics-title">Key metrics</h2><p>One chart per metric, a line per rule and configuration: each run's median, its
repeats' min..max, and the line's noise band (shaded: the series' median +- the metric's minimum effect, from
the {band_note}). A point outside its band moved beyond the noise.</p>
<div id="metrics">{metrics or '<p>No metric with a direction was measured.</p>'}</div>
</main></body></html>
"""


def metric_charts(series: Sequence[dict[MetricKey, Series]], keys: Sequence[MetricKey], columns: Sequence[str],
                  marks: Sequence[int]) -> str:
    """One chart per metric name, a line per rule and configuration that measured it (its rule named
    in the line only where several rules record the metric)."""
    from reports.store.trend_charts import MetricLine, metric_svg

    bands = noise_bands(series, keys)
    out = []
    for name, group in itertools.groupby(sorted(keys, key=lambda k: (k[2], k[0], k[1])), key=lambda k: k[2]):
        members = list(group)
        one_rule = len({rule for rule, _, _ in members}) == 1
        lines = []
        for key in members:
            spreads = [Spread.of(s[key].values) if key in s and s[key].values else None for s in series]
            lines.append(MetricLine(key[1] if one_rule else f"{key[0]} [{key[1]}]",
                                    [sp.median if sp else None for sp in spreads],
                                    [sp.lo if sp else None for sp in spreads],
                                    [sp.hi if sp else None for sp in spreads], bands.get(key)))
        unit = next(s[members[0]].unit for s in series if members[0] in s)
        out.append(metric_svg(f"{members[0][0]}: {name}" if one_rule else name, unit, columns, lines, marks))
    return "".join(out)


def one_run_table(series: dict[MetricKey, Series], keys: Sequence[MetricKey]) -> str:
    """The one run's key metrics as a table: a single point is no trend to draw."""
    rows = "".join(f"<tr><td>{html.escape(rule)}</td><td>{html.escape(config)}</td><td>{html.escape(name)}</td>"
                   f"<td>{Spread.of(series[(rule, config, name)].values).median:g}</td>"
                   f"<td>{html.escape(series[(rule, config, name)].unit)}</td></tr>"
                   for rule, config, name in keys if (rule, config, name) in series and series[(rule, config, name)].values)
    return scrolling("metrics-title", '<table id="one-run"><tr><th scope="col">rule</th><th scope="col">configuration'
                     '</th><th scope="col">metric</th><th scope="col">median</th><th scope="col">unit</th></tr>'
                     f"{rows}</table>") if rows else ""


def series_runs(store: Store, ref: int | None, n: int, series: str | None = None) -> list[StoredRun]:
    """The last ``n`` complete runs of the series of run ``ref`` (default: the newest complete run,
    of ``series`` if given)."""
    run = store.run(ref) if ref is not None else newest_run(store, series)
    runs = store.last_runs(run, n, run)
    return runs or [run]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m reports.trend", description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", help=f"SQLAlchemy URL of the results store (default {default_url()})")
    ap.add_argument("--last", type=int, default=14, metavar="N", help="runs shown (default 14)")
    which = ap.add_mutually_exclusive_group()
    which.add_argument("--run", type=int, metavar="ID", help="a run of the series to show (default: the newest "
                       "complete run)")
    which.add_argument("--series", type=series_arg, metavar="NAME",
                       help="the series to show, by name (python -m reports.store list shows each run's)")
    ap.add_argument("-o", "--output", type=Path, default=Path("trend.html"), help="the page (default trend.html)")
    ap.add_argument("--all-metrics", action="store_true", help="every metric with a direction, not only the key ones")
    args = ap.parse_args(argv)
    if args.last < 1:
        ap.error("--last takes 1 or more")
    check_output_arg(ap, "-o", args.output, args.store)
    try:
        with opened_store(args.store) as store:
            store.check_outside_runs([("-o", args.output)])
            runs = series_runs(store, args.run, args.last, args.series)
            page = trend_document(store, runs, args.all_metrics)
    except StoreError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        write_atomic(args.output, page)
    except OSError as e:
        print(f"error: -o {args.output} not written: {e.strerror or e}", file=sys.stderr)
        return 2
    print(f"trend page: {args.output} ({len(runs)} run(s) of series {runs[-1].series}, up to run {runs[-1].id})")
    return 0

