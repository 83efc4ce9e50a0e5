"""The results store: every run's verdicts and every sample of its metrics, in SQL (SQLAlchemy Core).

    python -m reports.store [--store URL] import results/20261123-020000 [DIR...]
    python -m reports.store [--store URL] list

The command's end of the store (reports/store/__init__.py says what it holds)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from reports.store.engine import Store, opened_store
from reports.store.read import read_results_dir, started_from_text
from reports.store.store_error import StoreError
from reports.store.urls import default_url


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m reports.store", description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", help=f"SQLAlchemy URL of the store (default {default_url()})")
    sub = ap.add_subparsers(dest="command", required=True)
    imp = sub.add_parser("import", help="load results directories into the store")
    imp.add_argument("dirs", nargs="+", type=Path, metavar="DIR")
    sub.add_parser("list", help="the stored runs")
    args = ap.parse_args(argv)
    try:
        with opened_store(args.store, create=args.command == "import") as store:
            return _command(store, args)
    except StoreError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def _command(store: Store, args: argparse.Namespace) -> int:
    """``import`` or ``list`` on an open store; the exit code (2 when a directory could not be stored)."""
    status = 0
    if args.command == "import":
        for d in args.dirs:
            try:
                run = read_results_dir(d)
                run_id, new = store.add_run(run)
            except StoreError as e:
                print(f"error: {e}", file=sys.stderr)
                status = 2
                continue
            if not new:
                print(f"{d}: already stored as run {run_id} (not changed)")
                continue
            c = store.counts(run_id)
            unknown = store.unknown_metrics(run_id)
            origin = started_from_text(run.started_from)
            print(f"{d}: run {run_id}{'' if run.complete else ' (INCOMPLETE: never used as a baseline)'}: "
                  f"{c['verdicts']} verdicts, {c['metrics']} metrics, {c['samples']} samples"
                  + (f"; stored as parameters, not in model/across/metrics.py: {', '.join(unknown)}" if unknown else "")
                  + (f"; started {run.started:%Y-%m-%d %H:%M:%S} UTC, from {origin}" if origin else ""))
    else:
        stored = store.runs()
        if not stored:
            print(f"(no runs stored in {store.shown}; add some with python -m reports.store import DIR)")
        for r in stored:  # started is UTC; where it came from last (STARTED_FROM's keys; '-': before schema 4)
            print(f"{r.id}\t{r.started or '-'}\t{'complete' if r.complete else 'INCOMPLETE'}\t"
                  f"{r.options.get('hypervisor', '-')}\t{r.source or '-'}\t{r.series}\t{r.host or '-'}\t"
                  f"{r.started_from or '-'}")
    return status

