"""The results store: every run's verdicts and every sample of its metrics, in SQL (SQLAlchemy Core); and
what reads it: compare, trend and --baseline.

    python -m reports.store [--store URL] import results/20261123-020000 [DIR...]
    python -m reports.store [--store URL] list

The default store is ``sqlite:///results/vioconform.db`` (beside the runs' directories); any
SQLAlchemy URL is accepted (``postgresql://user@host/vioconform`` to share one across hosts,
with the driver installed), except an in-memory SQLite store, which would keep nothing. A
PostgreSQL password is best left out of the URL: libpq (psycopg2) then takes it from
``PGPASSWORD`` or from the password file (``~/.pgpass``, mode 0600, lines
``host:port:database:user:password``; ``PGPASSFILE`` names another), so no password is typed on
a command line; a server that asks for one none of them gives is an error naming both. A run
and ``import`` create the store on first use (safe when several start at once); the commands
that only read (``list``, reports.trend, reports.compare) never create one.

Every connection is bounded: :data:`STORE_CONNECT_TIMEOUT_S` to connect,
:data:`STORE_STATEMENT_TIMEOUT_S` per statement on PostgreSQL (``statement_timeout``), and
:data:`STORE_BUSY_TIMEOUT_S` waiting for another writer's lock on SQLite; a PostgreSQL wait
ends at once on Ctrl-C or SIGTERM. Tables:

- ``meta``: ``schema_version`` (a store written by a newer vioconform is refused, never altered;
  an older one is brought up to date by the first command that writes, and read as it is: its
  runs' series are then derived as the upgrade would store them; a version that is no whole number
  from 1, or a version without every table, is a damaged store, refused and never altered);
- ``runs``: id, run_uid (the run's own identity, the ``vioconform_run_id`` JUnit property a run
  writes; unique: a copy of its results directory imported again is the same run), source (the
  results directory, unique: importing it again returns the same run; the identity of runs
  written before run ids), series (the job the run belongs to, model/across/series.py: its ``series``
  suite property; a run written before series were recorded, and every run of a store upgraded
  from schema 2, gets the default series derived from its options and fingerprint), started,
  finished (naive UTC: the JUnit suite's ``timestamp``, else :data:`STARTED_FROM`'s fallbacks),
  started_from (which), host (the suite's ``hostname``), fingerprint (JSON: what was tested, the
  JUnit suite properties), options (JSON:
  hypervisor, controllers, inject and the ``options`` property's), revision (vioconform's, when
  recorded), complete (an interrupted run is stored but never used as a baseline);
- ``verdicts``: run, rule, config, outcome (passed / failed / error / skipped / not run: a
  conformance failure, a harness error and a skip are different words), message;
- ``metrics``: run, rule, config, name, unit, direction (higher-better / lower-better /
  parameter, from model.across.metrics), known (False: a property model.across.metrics has no entry for);
- ``samples``: metric, repeat, value (a number) or text (a property that is not a number).

A results directory holds ``junit.xml`` (reports/junit.py): suite properties, one case
per rule and configuration (``rule[config]``), the measured numbers as the case's properties.
:func:`read_results_dir` reads that (``import``), and refuses a JUnit file vioconform did not write (another
tool's); a run hands its own :class:`RunData` over at its end (:func:`store_run`: reports/run_data.py builds
it with the JUnit file, the same as reading that file back would give); :meth:`Store.add_run` writes a run in one transaction, so a failure leaves nothing
half-written and nothing stored before is touched.

Every database error is a :class:`StoreError` that says what failed, what the database said and
what to do (:meth:`Store.failure`: a lock held past the busy timeout, a read-only or full store, a
missing table or column), never an SQLAlchemy traceback: the commands exit 2 on it and a run's end
says ``NOT STORED`` (exit 11). :func:`check_store`, the suite's check before any guest, writes a
probe run and rolls it back (:meth:`Store.check_writable`). No output may be one of the files
SQLite makes beside a store (:func:`store_side_files`) or lie in a stored run's results directory
(:meth:`Store.check_outside_runs`).

The package, by job: store_error.py (StoreError), urls.py (the URL and its secrets), connection.py
(bounded waits, what a database's error means), schema.py (the tables, their version, the upgrade in
place), read.py (a results directory's JUnit file read back), engine.py (:class:`Store`), commands.py
(``python -m reports.store``); and what reads the store: compare.py and comparison.py (``python -m
reports.compare``: two runs or more compared), tested.py (``--tested``), trend.py and trend_charts.py
(``python -m reports.trend``), baseline.py (``--baseline RUN`` resolved). This module names what the rest of the suite uses of it.
"""

from reports.store.commands import main
from reports.store.engine import (
    Store,
    StoredRun,
    check_outside_runs,
    check_store,
    opened_store,
    store_results,
    store_run,
)
from reports.store.read import RUN_ID_KEY, RunData, read_results_dir
from reports.store.schema import SCHEMA_VERSION, parse_run_id
from reports.store.store_error import StoreError
from reports.store.urls import checked_url, default_url, in_memory, shown_url, sqlite_file, store_side_files

__all__ = ["RUN_ID_KEY", "SCHEMA_VERSION", "RunData", "Store", "StoreError", "StoredRun", "check_outside_runs",
           "check_store", "checked_url", "default_url", "in_memory", "main", "opened_store", "parse_run_id",
           "read_results_dir", "shown_url", "sqlite_file", "store_results", "store_run", "store_side_files"]
