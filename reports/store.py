"""The results store: every run's verdicts and every sample of its metrics, in SQL (SQLAlchemy Core).

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
:func:`read_results_dir` reads that, and refuses a JUnit file vioconform did not write (another
tool's); :meth:`Store.add_run` writes a run in one transaction, so a failure leaves nothing
half-written and nothing stored before is touched.

Every database error is a :class:`StoreError` that says what failed, what the database said and
what to do (:meth:`Store.failure`: a lock held past the busy timeout, a read-only or full store, a
missing table or column), never an SQLAlchemy traceback: the commands exit 2 on it and a run's end
says ``NOT STORED`` (exit 11). :func:`check_store`, the suite's check before any guest, writes a
probe run and rolls it back (:meth:`Store.check_writable`). No output may be one of the files
SQLite makes beside a store (:func:`store_side_files`) or lie in a stored run's results directory
(:meth:`Store.check_outside_runs`).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import re
import select
import sys
import time
import urllib.parse
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from model.across.fingerprint import OPTIONS_KEY, REVISION_KEY, SERIES_OPTIONS
from model.across.metrics import as_number, describe
from model.across.moves import Key, MetricKey, Series
from model.across.series import MAX_SERIES_CHARS, SERIES_KEY, series_problem, stored_series
from model.secret import password_holds_at, redact_url, register_url, scrub
from reports.results import DEFAULT_PARENT

#: 2 added ``runs.run_uid``; 3 added ``runs.series``; 4 added ``runs.host`` and ``runs.started_from``.
SCHEMA_VERSION = 4
#: Suite properties that are the run's options rather than what it measured against (the
#: ``options`` property, JSON, adds the rest of them).
OPTION_KEYS = SERIES_OPTIONS
#: Suite properties that say how the run ended: the ``complete`` column, not the fingerprint.
STATUS_KEYS = ("complete", "interrupted_by")
#: The suite property with the run's own identity (a UUID each run writes into its junit.xml):
#: the ``run_uid`` column, not the fingerprint.
RUN_ID_KEY = "vioconform_run_id"
#: What every JUnit file a vioconform run writes has (fixtures/finish.py, reports/junit.py): the
#: suite's name, the run's own properties and the test cases' class prefix.
SUITE_NAME = "vioconform"
RUN_KEYS = ("hypervisor", "controllers", "inject")
CASE_CLASS_PREFIX = "vioconform."

#: Seconds to open a connection to the store (TCP, TLS, authentication). A server on the LAN
#: answers in milliseconds; 10 s also covers a slow VPN, and a server that accepts connections
#: and never answers ends the run within the 30 s the suite allows for a bad input. As
#: hypervisors/libvirt/host_checks.py's CONNECT_TIMEOUT_S.
STORE_CONNECT_TIMEOUT_S = 10.0
#: Seconds one statement may run on a PostgreSQL store (its ``statement_timeout``). The largest
#: statement is a run's samples, inserted in batches of 1,000 rows: milliseconds on the private
#: server of the tests; 30 s is room for a loaded shared server, and a hung one ends the command.
STORE_STATEMENT_TIMEOUT_S = 30.0
#: Seconds a SQLite store waits for another process's write lock (its busy timeout). A run's
#: import holds it for milliseconds (tens of ms for the largest recorded run here); 10 s is room
#: for eight runs storing at once on a slow disk.
STORE_BUSY_TIMEOUT_S = 10.0
#: The PostgreSQL drivers that take libpq's connect_timeout and options (another driver, such as
#: pg8000, gets its defaults: no timeouts).
LIBPQ_DRIVERS = ("psycopg2", "psycopg")
#: First uses of a new store that each try to create its tables: the second and later ones wait
#: for the first (PostgreSQL: an advisory lock; SQLite: BEGIN IMMEDIATE) and find the tables made.
#: A retry covers what a lock cannot (a driver without them); 3 is plenty.
SCHEMA_CREATE_ATTEMPTS = 3
#: The PostgreSQL advisory lock key held while creating or upgrading the schema (any fixed
#: 64-bit number: "vioc" in ASCII).
SCHEMA_LOCK_KEY = 0x76696F63


class StoreError(Exception):
    """A store or a run that cannot be used; the message names the cause and the remedy."""


#: The environment variables libpq takes the password and the password file from.
PASSWORD_ENV = "PGPASSWORD"
PASSFILE_ENV = "PGPASSFILE"


def password_file() -> Path:
    """The password file libpq reads: ``$PGPASSFILE``, else ``~/.pgpass`` (``$HOME``'s)."""
    given = os.environ.get(PASSFILE_ENV)
    return Path(given) if given else Path(os.path.expanduser("~")) / ".pgpass"


#: What a database's error says (a pattern, matched ignoring case) and what to do about it; ``{busy}``
#: is :data:`STORE_BUSY_TIMEOUT_S`. SQLite says "database is locked", "attempt to write a readonly
#: database", "database or disk is full", "no such table: runs", "table runs has no column named
#: host"; PostgreSQL "canceling statement due to statement timeout", "permission denied for table
#: runs", "could not extend file ...: No space left on device", "relation "runs" does not exist",
#: "column "host" of relation "runs" does not exist" (not 'database "x" does not exist': that store
#: is no damaged one).
_REMEDIES = (
    (("database is locked", "table is locked", "lock timeout", "statement timeout", "could not obtain lock"),
     ("another process held the store's lock for longer than the {busy:g} s it is waited for (a run or an import "
      "storing at the same time, or a program that keeps a transaction open on it); try again once it is done")),
    (("readonly database", "read-only", "permission denied", "access denied"),
     ("the store cannot be written: its file or its file system is read-only, or the database user may not write "
      "to it; give a store you can write to")),
    (("disk is full", "no space left", "could not extend file", "disk quota"),
     "the disk that holds the store is full; free space there, or give a store on another disk"),
    (("no such table", "no such column", "has no column", r"(relation|column) \S+ (of relation \S+ )?does not exist"),
     ("a table or column vioconform writes is missing: the store is damaged (changed by hand, or by another "
      "program); restore it from a backup, or give another store")),
    (("unable to open database file", "disk i/o error"),
     ("SQLite cannot write the store's files there (a directory it may not create files in, or something other "
      "than a file where it keeps its journal, the store's path with -journal added)")),
)


def _connect_remedy(url: sa.engine.URL, error: str) -> str:
    """What to do about a store that cannot be opened or written: for a PostgreSQL server that
    asked for a password, where libpq looks for one (the URL, PGPASSWORD, the password file) and
    what it found; for a store that is locked, read-only, full or damaged, that; else the general
    checks. Never the password itself."""
    if url.get_backend_name() != "postgresql" or not ("no password supplied" in error
                                                      or "password authentication failed" in error):
        return next((remedy.format(busy=STORE_BUSY_TIMEOUT_S) for patterns, remedy in _REMEDIES
                     if any(re.search(pattern, error, re.IGNORECASE) for pattern in patterns)),
                    "check the URL, that the database is reachable and that you may write to it")
    passfile = password_file()
    shown_file = f"${PASSFILE_ENV} ({passfile})" if os.environ.get(PASSFILE_ENV) else f"~/.pgpass ({passfile})"
    line = f"{url.host or 'localhost'}:{url.port or 5432}:{url.database or '*'}:{url.username or '*'}:PASSWORD"
    try:
        loose = passfile.is_file() and passfile.stat().st_mode & 0o077
    except OSError:
        loose = False
    if "no password supplied" in error:
        found = (f"; {shown_file} is ignored: it has group or world access (chmod 600 it)" if loose else
                 f"; {shown_file} has no line for it" if passfile.is_file() else "")
        return (f"the server asks for a password and none was given: set {PASSWORD_ENV}, or add the line {line} to "
                f"{shown_file}, mode 0600 (either keeps the password off the command line){found}")
    given = ("the URL" if url.password is not None else PASSWORD_ENV if os.environ.get(PASSWORD_ENV) else shown_file)
    return (f"the server refused the password in {given} for user {url.username or '(default)'}: correct it (a URL "
            f"without a password takes it from {PASSWORD_ENV}, else from {shown_file})")


def default_url(parent: Path = DEFAULT_PARENT) -> str:
    return f"sqlite:///{parent / 'vioconform.db'}"


def in_memory(url: str) -> bool:
    """Whether ``url`` is an in-memory SQLite database (``sqlite://``, ``sqlite:///:memory:``,
    ``sqlite:///file::memory:?...``, ``?mode=memory``): gone when the process ends."""
    try:
        u = sa.engine.make_url(url)
    except (SQLAlchemyError, ValueError, TypeError):
        return False
    if u.get_backend_name() != "sqlite":
        return False
    db = u.database or ""
    return (db in ("", ":memory:") or ":memory:" in db or u.query.get("mode") == "memory" or "mode=memory" in db
            or u.query.get("vfs") == "memdb")


def shown_url(url: str) -> str:
    """``url`` as messages show it: a password in it (``postgresql://user:PASSWORD@host/db``,
    ``?password=PASSWORD``) as ``***`` (model.secret.redact_url, as every URL the suite prints)."""
    return redact_url(url)


def checked_url(url: str) -> str:
    """``url``, its passwords registered for the report redaction; StoreError for a password
    holding an unencoded ``@``, which no parser can tell from the host's ``@``."""
    register_url(url)
    if password_holds_at(url):
        raise StoreError(f"store {shown_url(url)}: the password in the URL holds an unencoded '@'; percent-encode "
                         "each '@' in it as %40, or leave the password out of the URL and give it in PGPASSWORD or "
                         "~/.pgpass")
    return url


#: The mode a new SQLite store file gets: the owner's alone, like the results (--results-mode widens it).
STORE_FILE_MODE = 0o600


#: The largest run id a store can hold: ``runs.id`` is an SQL INTEGER, 32 bits in PostgreSQL (64 in
#: SQLite), numbered from 1.
MAX_RUN_ID = 2**31 - 1


def parse_run_id(text: str) -> int | None:
    """``text`` as a stored run's id (``"12"`` -> 12), or None when it is not one: only ASCII digits
    name a run, as ``list`` prints them. ``str.isdigit`` is also true for ``"²"``, which ``int()``
    refuses, and for ``"٣"``, which it reads as 3: neither is an id anyone was shown. The one place
    run ids given by people are read (``--baseline``, ``reports.compare``)."""
    return int(text) if text.isascii() and text.isdigit() else None


#: How SQLAlchemy's SQLite driver reads ``?uri=true`` (sqlalchemy.util.asbool's true words).
SQLITE_TRUE = ("true", "yes", "on", "y", "t", "1")


def sqlite_file(url: str) -> Path | None:
    """The database file of a SQLite store URL (``sqlite:///results/vioconform.db`` ->
    ``results/vioconform.db``; ``sqlite:///file:x.db?uri=true`` -> ``x.db``); None for another
    database or an in-memory one."""
    try:
        u = sa.engine.make_url(url)
    except (SQLAlchemyError, ValueError, TypeError):
        return None
    if u.get_backend_name() != "sqlite" or not u.database or in_memory(url):
        return None
    if u.database.startswith("file:") and str(u.query.get("uri", "")).lower() in SQLITE_TRUE:
        # a SQLite URI filename (file:x.db, file:///abs/x.db, %-escapes): the file it opens
        parts = urllib.parse.urlsplit(u.database)
        path = urllib.parse.unquote(parts.path)
        return Path(path) if path and parts.netloc in ("", "localhost") else None
    return Path(u.database)


#: The files SQLite makes beside a database file ``F`` while it writes, and deletes when done:
#: ``F-journal`` (the rollback journal), ``F-wal`` and ``F-shm`` (write-ahead logging). An output
#: written there is deleted, or read back as a journal, by the next write to the store.
SQLITE_SIDE_FILES = {"-journal": "rollback journal", "-wal": "write-ahead log", "-shm": "write-ahead log index"}


def store_side_files(url: str | None) -> list[tuple[str, Path]]:
    """The files SQLite makes and deletes beside the store at ``url`` (:data:`SQLITE_SIDE_FILES`),
    named for messages; none for another database or no store. No output may be one of them."""
    path = sqlite_file(url) if url is not None else None
    if path is None:
        return []
    return [(f"the store's {what} (SQLite creates and deletes it beside {path.name} while it writes)",
             path.with_name(path.name + suffix)) for suffix, what in SQLITE_SIDE_FILES.items()]


def _create_sqlite_file(url: str, mode: int) -> os.stat_result | None:
    """Create a SQLite store's file with ``mode`` before SQLite does (it would use the umask, 0644
    here: every user could read every run). An empty file is an empty database. An existing file
    keeps its mode; a file that cannot be made is left for SQLite to report. Returns the new
    file's stat (None when none was made), so that a store that could not be made removes it."""
    path = sqlite_file(url)
    if path is not None and not path.exists():
        with contextlib.suppress(OSError):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
            try:
                os.fchmod(fd, mode)  # open's mode passes through the umask
                return os.fstat(fd)
            finally:
                os.close(fd)
    return None


def _remove_if_unused(url: str, made: os.stat_result | None) -> None:
    """Remove the empty file :func:`_create_sqlite_file` made for a store that could not be created
    (a full disk): a failed first use leaves nothing. Only while it is that file, still empty, and
    no journal beside it says that another process is creating the tables in it at this moment."""
    path = sqlite_file(url)
    if made is None or path is None:
        return
    with contextlib.suppress(OSError):
        now = path.stat()
        if (now.st_ino, now.st_dev, now.st_size) != (made.st_ino, made.st_dev, 0):
            return
        if any(path.with_name(path.name + s).exists() for s in SQLITE_SIDE_FILES):
            return
        path.unlink()


metadata = sa.MetaData()
meta_table = sa.Table("meta", metadata, sa.Column("key", sa.String(64), primary_key=True),
                      sa.Column("value", sa.String(256), nullable=False))
runs = sa.Table(
    "runs", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_uid", sa.String(64), nullable=True),
    sa.Column("series", sa.String(MAX_SERIES_CHARS), nullable=True),
    sa.Column("source", sa.String(1024), unique=True, nullable=True),
    sa.Column("started", sa.DateTime, nullable=True),
    sa.Column("finished", sa.DateTime, nullable=True),
    sa.Column("host", sa.String(256), nullable=True),
    sa.Column("started_from", sa.String(32), nullable=True),
    sa.Column("fingerprint", sa.Text, nullable=False),
    sa.Column("options", sa.Text, nullable=False),
    sa.Column("revision", sa.String(128), nullable=False),
    sa.Column("complete", sa.Boolean, nullable=False),
    sa.Index("ix_runs_run_uid", "run_uid", unique=True),
    sa.Index("ix_runs_series", "series"))
#: The columns of ``runs`` added after schema version 1, and the version that added each.
RUN_COLUMNS_SINCE = {"run_uid": 2, "series": 3, "host": 4, "started_from": 4}
#: The tables of every schema version; a store whose ``meta`` names a version and lacks one is damaged.
TABLES = ("meta", "runs", "verdicts", "metrics", "samples")
verdicts = sa.Table(
    "verdicts", metadata,
    sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id"), primary_key=True),
    sa.Column("rule", sa.String(128), primary_key=True),
    sa.Column("config", sa.String(512), primary_key=True),
    sa.Column("outcome", sa.String(16), nullable=False),
    sa.Column("message", sa.Text, nullable=False))
metrics = sa.Table(
    "metrics", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id"), nullable=False),
    sa.Column("rule", sa.String(128), nullable=False),
    sa.Column("config", sa.String(512), nullable=False),
    sa.Column("name", sa.String(256), nullable=False),
    sa.Column("unit", sa.String(32), nullable=False),
    sa.Column("direction", sa.String(16), nullable=False),
    sa.Column("known", sa.Boolean, nullable=False),
    sa.UniqueConstraint("run_id", "rule", "config", "name"))
samples = sa.Table(
    "samples", metadata,
    sa.Column("metric_id", sa.Integer, sa.ForeignKey("metrics.id"), primary_key=True),
    sa.Column("repeat", sa.Integer, primary_key=True),
    sa.Column("value", sa.Float, nullable=True),
    sa.Column("text", sa.Text, nullable=True))


@dataclass
class RunData:
    """One run as read from a results directory (or built by a test), before it is stored."""

    fingerprint: dict[str, str]
    options: dict[str, str] = field(default_factory=dict)
    revision: str = ""
    complete: bool = True
    started: dt.datetime | None = None
    finished: dt.datetime | None = None
    source: str | None = None
    #: The run's own identity (its ``vioconform_run_id``); None for runs written before run ids
    run_uid: str | None = None
    #: The run's series (model/across/series.py); "": derived from ``options`` and ``fingerprint`` when stored
    series: str = ""
    #: The machine the run ran on (its JUnit suite's ``hostname``); None when not recorded
    host: str | None = None
    #: Where ``started`` came from (a key of :data:`STARTED_FROM`)
    started_from: str | None = None
    verdicts: dict[Key, tuple[str, str]] = field(default_factory=dict)  # (outcome, message)
    #: (rule, config, property name as written, e.g. "qd1_iops.r2") -> value as written
    properties: dict[tuple[str, str, str], str] = field(default_factory=dict)


def _outcome(case: ET.Element) -> tuple[str, str]:
    for tag, outcome in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
        el = case.find(tag)
        if el is not None:
            message = el.get("message") or ""
            if outcome == "skipped" and message.startswith("not run"):
                outcome = "not run"
            return outcome, message
    return "passed", ""


#: Where a run's start was read from (``runs.started_from``), and how ``import`` and ``list`` say it.
#: A run writes its start (UTC) as its JUnit suite's ``timestamp``; a JUnit file without one (written
#: before, or by hand) falls back to its results directory's name, the local time of the machine that
#: ran it (``results/<YYYYmmdd-HHMMSS>``), read in this machine's time zone (``TZ``), then to the
#: file's modification time (the run's end) less the run's duration.
STARTED_FROM = {
    "timestamp": "the JUnit file's timestamp",
    "directory name": "the results directory's name, read as local time ({tz}): the JUnit file has no timestamp",
    "file time": "junit.xml's modification time less the run's duration: the JUnit file has no timestamp and the "
                 "directory's name is no date",
}


def started_from_text(source: str | None) -> str:
    """How ``import`` says where a run's start came from ("" for the run's own timestamp)."""
    zone = os.environ.get("TZ") or time.tzname[0]  # the zone as the user set it, else the system's name for it
    return "" if source in (None, "timestamp") else STARTED_FROM.get(source, source).format(tz=zone)


def _utc(moment: dt.datetime) -> dt.datetime:
    """``moment`` as the store keeps it: naive UTC (an aware time converted; a naive one is taken as UTC)."""
    return moment.astimezone(dt.UTC).replace(tzinfo=None) if moment.tzinfo is not None else moment


def _started(directory: Path, suite: ET.Element, junit: Path, duration_s: float) -> tuple[dt.datetime, str]:
    """The run's start (naive UTC) and where it came from (a key of :data:`STARTED_FROM`): the suite's
    ``timestamp``, else the directory's name (local time), else the JUnit file's modification time
    less ``duration_s``."""
    stamp = suite.get("timestamp")
    if stamp:
        with contextlib.suppress(ValueError):
            return _utc(dt.datetime.fromisoformat(stamp)), "timestamp"
    try:
        local = dt.datetime.strptime(directory.name[:15], "%Y%m%d-%H%M%S")
        return _utc(local.astimezone()), "directory name"  # a naive time's astimezone() reads it as local time
    except (ValueError, OverflowError, OSError):
        end = dt.datetime.fromtimestamp(junit.stat().st_mtime, dt.UTC)
        return _utc(end - dt.timedelta(seconds=duration_s)), "file time"


def read_results_dir(directory: Path, junit: Path | None = None) -> RunData:
    """A results directory's run, from its ``junit.xml`` (or ``junit``, where ``--junit-xml`` put
    it); StoreError with the reason otherwise."""
    junit = junit or directory / "junit.xml"
    if not junit.is_file():
        raise StoreError(f"{directory}: no junit.xml in it: not a vioconform results directory "
                         f"(give the directory a run wrote, e.g. results/20261123-020000)")
    try:
        root = ET.parse(junit).getroot()
    except ET.ParseError as e:
        raise StoreError(f"{junit}: not readable XML ({e}); the run may have been killed while writing it") from None
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    if suite is None:
        raise StoreError(f"{junit}: no <testsuite> element: not a JUnit file vioconform wrote")
    props = {p.get("name", ""): p.get("value", "") for p in suite.findall("properties/property")}
    foreign = _not_vioconform(suite, props)
    if foreign:
        raise StoreError(f"{junit}: not a vioconform run ({foreign}); only results directories a vioconform run "
                         f"wrote are stored (give one such as results/20261123-020000)")
    given_series = props.get(SERIES_KEY) or None
    problem = series_problem(given_series) if given_series is not None else None
    if problem is not None:
        raise StoreError(f"{junit}: its series {given_series!r} cannot name a series ({problem}); nothing was "
                         f"stored: correct the series property, or remove it to store the run in its default series")
    complete = props.get("complete", "true") == "true"
    try:
        duration_s: float | None = float(suite.get("time") or 0)
    except ValueError:
        duration_s = None
    started, started_from = _started(directory, suite, junit, duration_s or 0.0)
    finished = started + dt.timedelta(seconds=duration_s) if duration_s is not None else None
    options = {k: props[k] for k in OPTION_KEYS if k in props}
    try:
        more = json.loads(props.get(OPTIONS_KEY) or "{}")
    except json.JSONDecodeError:
        more = {"unreadable": props[OPTIONS_KEY]}
    if isinstance(more, dict):
        options.update({str(k): v if isinstance(v, str) else json.dumps(v) for k, v in more.items() if k not in options})
    fingerprint = {k: v for k, v in props.items()
                   if k not in (*OPTION_KEYS, *STATUS_KEYS, REVISION_KEY, OPTIONS_KEY, RUN_ID_KEY, SERIES_KEY)}
    run = RunData(fingerprint=fingerprint, options=options, revision=props.get(REVISION_KEY, ""),
                  complete=complete, started=started, finished=finished, source=str(directory.resolve()),
                  host=suite.get("hostname") or None, started_from=started_from,
                  run_uid=props.get(RUN_ID_KEY) or None,
                  series=stored_series(options, fingerprint, given_series))
    for case in suite.iter("testcase"):
        name = case.get("name") or ""
        if case.get("classname") == "vioconform.run":  # run[incomplete]: the complete flag says it
            run.complete = False
            continue
        rule, _, config = name.partition("[")
        key = (rule, config.removesuffix("]"))
        run.verdicts[key] = _outcome(case)
        for p in case.findall("properties/property"):
            run.properties[(*key, p.get("name") or "")] = p.get("value") or ""
    return run


def _not_vioconform(suite: ET.Element, props: dict[str, str]) -> str:
    """Why a JUnit suite is not one a vioconform run wrote ("" when it is): another tool's JUnit
    file (pytest's own, a CI tool's) must not become a complete run and a trend's series."""
    name = suite.get("name") or ""
    if name != SUITE_NAME:
        return f"its test suite is named {name!r}, not {SUITE_NAME!r}"
    missing = [k for k in RUN_KEYS if k not in props]
    if missing:
        return f"it has no {', '.join(missing)} suite propert{'y' if len(missing) == 1 else 'ies'}"
    other = next((c for c in suite.iter("testcase") if not (c.get("classname") or "").startswith(CASE_CLASS_PREFIX)),
                 None)
    if other is not None:
        return (f"its test case {other.get('classname') or ''}.{other.get('name') or ''} is not a vioconform rule "
                f"(class {CASE_CLASS_PREFIX}*)")
    if suite.find("testcase") is None:
        return "it has no test case"
    return ""


@dataclass(frozen=True)
class StoredRun:
    id: int
    source: str | None
    started: dt.datetime | None
    finished: dt.datetime | None
    fingerprint: dict[str, str]
    options: dict[str, str]
    revision: str
    complete: bool
    run_uid: str | None = None
    #: The job the run belongs to (model/across/series.py)
    series: str = ""
    #: The machine it ran on; where ``started`` came from (None: stored before schema 4)
    host: str | None = None
    started_from: str | None = None


def _pg_wait(conn: Any) -> None:
    """psycopg2's wait callback (its "green" mode): every wait for the server is a select() here,
    so Ctrl-C and SIGTERM (KeyboardInterrupt) end it at once, and a server that does not answer
    ends it after :data:`STORE_CONNECT_TIMEOUT_S` while connecting (libpq's connect_timeout does
    not apply to this mode), or after the statement timeout and that again for a statement."""
    import psycopg2
    from psycopg2 import extensions

    connecting = conn.status == extensions.STATUS_SETUP
    limit = STORE_CONNECT_TIMEOUT_S if connecting else STORE_STATEMENT_TIMEOUT_S + STORE_CONNECT_TIMEOUT_S
    deadline = time.monotonic() + limit
    while True:
        state = conn.poll()
        if state == extensions.POLL_OK:
            return
        left = deadline - time.monotonic()
        if left <= 0:
            raise psycopg2.OperationalError(
                f"the server did not answer within {limit:g} s "
                + ("while connecting (is it a PostgreSQL server, and does it accept connections?)" if connecting
                   else "(a statement; the server or the network hangs)"))
        if state == extensions.POLL_READ:
            select.select([conn.fileno()], [], [], left)
        elif state == extensions.POLL_WRITE:
            select.select([], [conn.fileno()], [], left)
        else:
            raise psycopg2.OperationalError(f"unexpected poll state {state} from psycopg2")


def _create_engine(url: str) -> sa.Engine:
    """The engine of ``url`` with every wait bounded: SQLite's busy timeout; PostgreSQL's connect
    and statement timeouts, and psycopg2's waits in Python (interruptible, see :func:`_pg_wait`)."""
    u = sa.engine.make_url(url)
    connect_args: dict[str, object] = {}
    if u.get_backend_name() == "sqlite":
        connect_args["timeout"] = STORE_BUSY_TIMEOUT_S
    elif u.get_backend_name() == "postgresql" and u.get_driver_name() in LIBPQ_DRIVERS:
        given = u.query.get("options")
        options = " ".join([*([given] if isinstance(given, str) else given or ()),
                            f"-c statement_timeout={int(STORE_STATEMENT_TIMEOUT_S * 1000)}"])
        connect_args.update(connect_timeout=int(STORE_CONNECT_TIMEOUT_S), options=options)
        if u.get_driver_name() == "psycopg2":
            from psycopg2 import extensions

            extensions.set_wait_callback(_pg_wait)
    return sa.create_engine(url, pool_pre_ping=True, connect_args=connect_args)


class Store:
    """A results store at a SQLAlchemy URL. ``create``: the schema is created (or brought up to
    date) on first use; without it (the commands that only read) a store that does not exist yet
    is an error naming it, and an older schema is read as it is."""

    def __init__(self, url: str, mode: int = STORE_FILE_MODE, create: bool = True) -> None:
        """``mode``: a new SQLite file's mode (the results' file mode). ``create``: False for the
        commands that only read, which never create a store."""
        self.url = checked_url(url)
        self.shown = shown = shown_url(url)
        if in_memory(url):
            raise StoreError(f"store {shown} is an in-memory database: it would keep nothing after the run; give a "
                             f"file, e.g. sqlite:///results/vioconform.db")
        try:
            self.engine = _create_engine(url)
        except (SQLAlchemyError, ImportError, ValueError) as e:
            raise StoreError(f"store {shown}: {e.__class__.__name__}: {_first_line(e)}; give a SQLAlchemy URL such as "
                             f"sqlite:///results/vioconform.db (and install the database's driver)") from None
        if self.engine.dialect.name == "sqlite":
            path = sqlite_file(url) or Path(self.engine.url.database or "")
            if not create and not path.is_file():
                self.engine.dispose()
                raise StoreError(f"store {shown}: {path} does not exist ({'is a directory' if path.is_dir() else 'no such file'}); "
                                 "check the path (this command only reads a store: a run or python -m reports.store "
                                 "import creates one)")
            if not path.parent.is_dir():
                self.engine.dispose()
                raise StoreError(f"store {shown}: the directory {path.parent} does not exist; create it or give "
                                 f"another --store")
        made = _create_sqlite_file(url, mode) if create else None
        #: The schema version of the store's tables (older than :data:`SCHEMA_VERSION`: a store
        #: opened to read, read as it is)
        self.version = SCHEMA_VERSION
        try:
            with self.engine.connect() as conn:
                version = _schema_version(conn, shown)
            if version is not None and version > SCHEMA_VERSION:
                raise StoreError(f"store {shown} has schema version {version}, written by a newer vioconform "
                                 f"(this one reads version {SCHEMA_VERSION}); update vioconform to use it. "
                                 f"Nothing in it was changed.")
            if version is None and not create:
                raise StoreError(f"store {shown} holds no vioconform results (it has no vioconform tables); check "
                                 f"the URL (this command only reads a store: a run or python -m reports.store import "
                                 f"creates them)")
            if version != SCHEMA_VERSION:
                if create:
                    self._create_or_upgrade()
                elif version is not None:
                    self.version = version
        except SQLAlchemyError as e:
            self.engine.dispose()
            _remove_if_unused(url, made)
            said = _first_line(e)
            raise StoreError(f"store {shown} cannot be opened: {said}; {_connect_remedy(self.engine.url, said)}") \
                from None
        except BaseException:
            self.engine.dispose()
            _remove_if_unused(url, made)
            raise

    def failure(self, e: SQLAlchemyError, what: str) -> StoreError:
        """The StoreError for a database error while reading or writing the open store: ``what``
        failed, what the database said, and what to do (a lock held too long, a read-only or full
        store, a missing table or column)."""
        said = _first_line(e)
        return StoreError(f"store {self.shown}: {what} ({said}); {_connect_remedy(self.engine.url, said)}")

    @contextlib.contextmanager
    def connect(self) -> Iterator[sa.Connection]:
        """A connection to read with; a database error in the block is a StoreError (:meth:`failure`)."""
        try:
            with self.engine.connect() as conn:
                yield conn
        except SQLAlchemyError as e:
            raise self.failure(e, "it could not be read") from None

    def check_writable(self) -> None:
        """StoreError unless a run could be stored now: a row goes into each table a run's write
        fills, in a transaction rolled back at once, so nothing is kept and no run id is used up
        (the rows carry their own ids, the largest an id can be). Finds a read-only file, file
        system or database user, a write lock another process holds past the busy timeout, a
        missing table or column, and a disk too full for SQLite's journal."""
        probe = MAX_RUN_ID
        try:
            with self.engine.connect() as conn, conn.begin() as transaction:
                conn.execute(runs.insert().values(id=probe, series="probe", fingerprint="{}", options="{}",
                                                  revision="", complete=False, host="", started_from=""))
                conn.execute(verdicts.insert().values(run_id=probe, rule="probe", config="", outcome="", message=""))
                conn.execute(metrics.insert().values(id=probe, run_id=probe, rule="probe", config="", name="probe",
                                                     unit="", direction="", known=False))
                conn.execute(samples.insert().values(metric_id=probe, repeat=0, value=0.0, text=None))
                transaction.rollback()
        except SQLAlchemyError as e:
            raise self.failure(e, "a run could not be stored in it") from None

    def _create_or_upgrade(self) -> None:
        """Create the tables (or add version 2's column to a version 1 store) in one transaction,
        holding a lock so that first uses at the same time wait for each other (PostgreSQL: an
        advisory lock, as eight parallel first uses otherwise collide on its catalog; SQLite:
        BEGIN IMMEDIATE, its write lock). A failure is retried: another process may have made
        the tables meanwhile."""
        for attempt in range(1, SCHEMA_CREATE_ATTEMPTS + 1):
            try:
                with self.engine.begin() as conn:
                    if conn.dialect.name == "postgresql":
                        conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": SCHEMA_LOCK_KEY})
                    elif conn.dialect.name == "sqlite":
                        conn.exec_driver_sql("BEGIN IMMEDIATE")
                    version = _schema_version(conn, self.shown)
                    if version is None:
                        metadata.create_all(conn)
                        conn.execute(meta_table.insert().values(key="schema_version", value=str(SCHEMA_VERSION)))
                    elif version < SCHEMA_VERSION:
                        _upgrade(conn)
                    elif version > SCHEMA_VERSION:  # a newer vioconform made it meanwhile
                        raise StoreError(f"store {self.shown} has schema version {version}, written by a newer "
                                         f"vioconform (this one reads version {SCHEMA_VERSION}); update vioconform "
                                         f"to use it. Nothing in it was changed.")
                self.version = SCHEMA_VERSION
                return
            except (sa.exc.OperationalError, sa.exc.IntegrityError, sa.exc.ProgrammingError):
                if attempt == SCHEMA_CREATE_ATTEMPTS:
                    raise

    def close(self) -> None:
        self.engine.dispose()

    def add_run(self, run: RunData) -> tuple[int, bool]:
        """Store ``run`` in one transaction; (its id, True) — or (the id stored before, False)
        when the same run was stored already (nothing is rewritten): the same run id (a copy of
        its results directory too), or, for a run without one, the same source directory."""
        if self.version != SCHEMA_VERSION:  # an older store opened to read, now written to
            try:
                self._create_or_upgrade()
            except SQLAlchemyError as e:
                raise self.failure(e, "it could not be brought up to date to store the run") from None
        existing = self._same_run(run)
        if existing is not None:
            return existing, False
        try:
            with self.engine.begin() as conn:
                run_id = _insert(conn, runs.insert().values(
                    run_uid=run.run_uid, series=run.series or stored_series(run.options, run.fingerprint),
                    source=run.source, started=run.started, finished=run.finished, host=run.host,
                    started_from=run.started_from,
                    fingerprint=json.dumps(run.fingerprint, sort_keys=True),
                    options=json.dumps(run.options, sort_keys=True), revision=run.revision,
                    complete=run.complete))
                if run.verdicts:
                    conn.execute(verdicts.insert(), [
                        {"run_id": run_id, "rule": k[0], "config": k[1], "outcome": o, "message": m}
                        for k, (o, m) in sorted(run.verdicts.items())])
                ids: dict[tuple[str, str, str], int] = {}
                rows = []
                # A repeated metric is written as NAME.rK and, for people, NAME (their median): the
                # samples are the repeats, the median is not one more.
                repeated = {(rule, config, describe(prop).name) for (rule, config, prop) in run.properties
                            if describe(prop).repeat > 0}
                for (rule, config, prop), value in sorted(run.properties.items()):
                    info = describe(prop)
                    mk = (rule, config, info.name)
                    if info.repeat == 0 and mk in repeated:
                        continue
                    if mk not in ids:
                        ids[mk] = _insert(conn, metrics.insert().values(
                            run_id=run_id, rule=rule, config=config, name=info.name, unit=info.unit,
                            direction=info.direction, known=info.known))
                    number = as_number(value)
                    rows.append({"metric_id": ids[mk], "repeat": info.repeat, "value": number,
                                 "text": None if number is not None else value})
                if rows:
                    conn.execute(samples.insert(), rows)
        except IntegrityError as e:
            existing = self._same_run(run)  # stored by another process meanwhile
            if existing is not None:
                return existing, False
            taken = self.run_by_source(run.source) if run.source is not None else None
            if taken is not None:
                raise StoreError(f"store {self.shown}: {run.source} was stored before as run {taken}, a different run "
                                 f"(another run id): the directory was used again; move this run's results to a "
                                 f"new directory and import that") from None
            raise StoreError(f"store {self.shown}: the run could not be stored ({_first_line(e)}); nothing of it "
                             f"was written") from None
        except SQLAlchemyError as e:
            raise self.failure(e, "the run could not be stored, and nothing of it was written") from None
        return run_id, True

    def _same_run(self, run: RunData) -> int | None:
        """The id of ``run`` if it is stored: by its run id, else (a run written before run ids) by its source."""
        if run.run_uid is not None:
            return self.run_by_uid(run.run_uid)
        return self.run_by_source(run.source) if run.source is not None else None

    def run_by_uid(self, run_uid: str) -> int | None:
        if self.version < RUN_COLUMNS_SINCE["run_uid"]:
            return None
        with self.connect() as conn:
            row = conn.execute(sa.select(runs.c.id).where(runs.c.run_uid == run_uid)).first()
        return None if row is None else int(row[0])

    def import_dir(self, directory: Path) -> tuple[int, bool]:
        return self.add_run(read_results_dir(directory))

    def run_by_source(self, source: str) -> int | None:
        with self.connect() as conn:
            row = conn.execute(sa.select(runs.c.id).where(runs.c.source == source)).first()
        return None if row is None else int(row[0])

    def _runs_columns(self) -> list[sa.Column[Any]]:
        """The columns of ``runs`` this store has (an older store read as it is lacks the newer ones)."""
        return [c for c in runs.columns if RUN_COLUMNS_SINCE.get(c.name, 1) <= self.version]

    def run(self, run_id: int) -> StoredRun:
        row = None
        if abs(run_id) <= MAX_RUN_ID:  # a larger number names no run, and the driver would raise
            with self.connect() as conn:
                row = conn.execute(sa.select(*self._runs_columns()).where(runs.c.id == run_id)).first()
        if row is None:
            raise StoreError(f"store {self.shown} has no run {run_id}; list its runs with "
                             f"python -m reports.store --store {self.shown} list")
        return _stored(row)

    def check_outside_runs(self, outputs: Sequence[tuple[str, Path | None]]) -> None:
        """StoreError for an output (``("--junit", path)``; None: not given) that is, or lies in,
        the results directory of a stored run: it would replace that run's junit.xml or report.html,
        its record (``reports.compare --junit``, ``reports.trend -o``, the suite's outputs)."""
        given = [(what, path.absolute(), path.resolve()) for what, path in outputs if path is not None]
        if not given:
            return
        with self.connect() as conn:
            sources = conn.execute(sa.select(runs.c.id, runs.c.source).where(runs.c.source.is_not(None))
                                   .order_by(runs.c.id)).all()
        for run_id, source in sources:
            held = Path(source)
            for what, path, real in given:
                if any(p.is_relative_to(held) for p in (path, real)) or real.is_relative_to(held.resolve()):
                    raise StoreError(f"{what} {path} is inside the results directory of run {run_id} ({source}), a "
                                     f"stored run: writing it there would replace that run's files (its record); "
                                     f"give {what} a path outside every stored run's results directory")

    def runs(self) -> list[StoredRun]:
        with self.connect() as conn:
            return [_stored(r) for r in conn.execute(sa.select(*self._runs_columns())
                                                     .order_by(runs.c.started, runs.c.id))]

    def series_runs(self, series: str) -> list[StoredRun]:
        """The complete runs of ``series``, oldest first (by start)."""
        return [r for r in self.runs() if r.complete and r.series == series]

    def last_runs(self, like: StoredRun, n: int, before: StoredRun | None = None) -> list[StoredRun]:
        """The last ``n`` complete runs of ``like``'s series (model/across/series.py: whatever their
        fingerprints), oldest first, up to and including ``before``."""
        same = self.series_runs(like.series)
        if before is not None:
            same = same[:next((i + 1 for i, r in enumerate(same) if r.id == before.id), len(same))]
        return same[-n:] if n > 0 else []

    def verdicts(self, run_id: int) -> dict[Key, str]:
        with self.connect() as conn:
            rows = conn.execute(sa.select(verdicts.c.rule, verdicts.c.config, verdicts.c.outcome)
                                .where(verdicts.c.run_id == run_id))
            return {(r.rule, r.config): r.outcome for r in rows}

    def series(self, run_id: int) -> dict[MetricKey, Series]:
        """Every numeric metric of a run with all its samples, by repeat."""
        q = (sa.select(metrics.c.rule, metrics.c.config, metrics.c.name, metrics.c.unit, metrics.c.direction,
                       samples.c.repeat, samples.c.value)
             .join(samples, samples.c.metric_id == metrics.c.id)
             .where(metrics.c.run_id == run_id, samples.c.value.is_not(None))
             .order_by(metrics.c.rule, metrics.c.config, metrics.c.name, samples.c.repeat))
        out: dict[MetricKey, Series] = {}
        with self.connect() as conn:
            for r in conn.execute(q):
                key = (r.rule, r.config, r.name)
                prev = out.get(key)
                values = (*(prev.values if prev else ()), float(r.value))
                out[key] = Series(r.unit, r.direction, values)
        return out

    def unknown_metrics(self, run_id: int) -> list[str]:
        """Names of the run's properties model.across.metrics has no entry for (stored as parameters)."""
        with self.connect() as conn:
            rows = conn.execute(sa.select(metrics.c.name).distinct()
                                .where(metrics.c.run_id == run_id, metrics.c.known.is_(False)).order_by(metrics.c.name))
            return [r[0] for r in rows]

    def counts(self, run_id: int) -> dict[str, int]:
        """How many verdicts, metrics and samples a run has."""
        with self.connect() as conn:
            n_verdicts = conn.execute(sa.select(sa.func.count()).select_from(verdicts)
                                      .where(verdicts.c.run_id == run_id)).scalar_one()
            n_metrics = conn.execute(sa.select(sa.func.count()).select_from(metrics)
                                     .where(metrics.c.run_id == run_id)).scalar_one()
            n_samples = conn.execute(sa.select(sa.func.count()).select_from(samples)
                                     .join(metrics, samples.c.metric_id == metrics.c.id)
                                     .where(metrics.c.run_id == run_id)).scalar_one()
        return {"verdicts": int(n_verdicts), "metrics": int(n_metrics), "samples": int(n_samples)}


def _insert(conn: sa.Connection, stmt: sa.Insert) -> int:
    """Execute an INSERT of one row; the new row's integer primary key."""
    key = conn.execute(stmt).inserted_primary_key
    if key is None:
        raise StoreError("the database returned no id for a new row")
    return int(key[0])


def _first_line(e: BaseException) -> str:
    """The error's first line, any registered password in it masked (a driver may quote its DSN)."""
    return scrub(str(getattr(e, "orig", None) or e).splitlines()[0])


def _stored(row: sa.Row[tuple[object, ...]]) -> StoredRun:
    """A row of ``runs``; its series derived as the upgrade stores it where the store has none yet."""
    m = row._mapping
    fingerprint, options = json.loads(m["fingerprint"]), json.loads(m["options"])
    return StoredRun(int(m["id"]), m["source"], m["started"], m["finished"], fingerprint, options, m["revision"],
                     bool(m["complete"]), m.get("run_uid"), m.get("series") or stored_series(options, fingerprint),
                     m.get("host"), m.get("started_from"))


def _schema_version(conn: sa.Connection, shown: str) -> int | None:
    """The store's schema version; None when it has no vioconform tables (or a ``meta`` table
    without the version: a first use that stopped half-way, on a database without
    transactional DDL). StoreError for a damaged store: a version that is no whole number from 1
    (``abc``, ``''``, ``3.0``, ``-1``), or a version this vioconform knows without every table of
    :data:`TABLES`."""
    have = set(sa.inspect(conn).get_table_names())
    if "meta" not in have:
        return None
    row = conn.execute(sa.select(meta_table.c.value).where(meta_table.c.key == "schema_version")).first()
    if row is None:
        return None
    text = str(row[0])
    if not (text.isascii() and text.isdigit() and int(text) >= 1):
        raise StoreError(f"store {shown} is damaged: its meta table's schema_version is {text!r}, not a schema "
                         f"version (a whole number from 1; this vioconform writes {SCHEMA_VERSION}). Nothing in it "
                         f"was changed; restore it from a backup, or give another store")
    missing = [t for t in TABLES if t not in have]
    if missing and int(text) <= SCHEMA_VERSION:  # a newer version's tables are its own: refused as newer
        raise StoreError(f"store {shown} is damaged: it has vioconform's meta table (schema version {text}) but no "
                         f"{', '.join(missing)} table{'s' if len(missing) > 1 else ''}. Nothing in it was changed; "
                         f"restore it from a backup, or give another store")
    return int(text)


def _upgrade(conn: sa.Connection) -> None:
    """An older store brought up to :data:`SCHEMA_VERSION` in the caller's transaction, each step
    skipped where done. Version 1 -> 2: ``runs.run_uid`` and its unique index. 2 -> 3:
    ``runs.series``, each stored run's the default derived from its stored options and fingerprint
    (model.across.series.stored_series, as a results directory without a series is stored), and its index.
    3 -> 4: ``runs.host`` and ``runs.started_from``, empty for the runs stored before (their start
    came from whatever the store then read: the directory's name, read as UTC, or the file's time)."""
    have = {c["name"] for c in sa.inspect(conn).get_columns("runs")}
    if "run_uid" not in have:
        conn.execute(sa.text("ALTER TABLE runs ADD COLUMN run_uid VARCHAR(64)"))
    conn.execute(sa.text("CREATE UNIQUE INDEX IF NOT EXISTS ix_runs_run_uid ON runs (run_uid)"))
    if "series" not in have:
        conn.execute(sa.text(f"ALTER TABLE runs ADD COLUMN series VARCHAR({MAX_SERIES_CHARS})"))
    unnamed = conn.execute(sa.select(runs.c.id, runs.c.options, runs.c.fingerprint).where(runs.c.series.is_(None)))
    named = [{"run": r.id, "name": stored_series(json.loads(r.options), json.loads(r.fingerprint))} for r in unnamed]
    if named:
        conn.execute(runs.update().where(runs.c.id == sa.bindparam("run")).values(series=sa.bindparam("name")), named)
    conn.execute(sa.text("CREATE INDEX IF NOT EXISTS ix_runs_series ON runs (series)"))
    for name, kind in (("host", "VARCHAR(256)"), ("started_from", "VARCHAR(32)")):
        if name not in have:
            conn.execute(sa.text(f"ALTER TABLE runs ADD COLUMN {name} {kind}"))
    conn.execute(meta_table.update().where(meta_table.c.key == "schema_version").values(value=str(SCHEMA_VERSION)))


@contextlib.contextmanager
def opened_store(url: str | None, create: bool = False) -> Iterator[Store]:
    """The store at ``url`` (default :func:`default_url`) for the commands (store, compare, trend),
    closed when the block ends. ``create=False``, the commands that only read, never creates one. A
    StoreError, opening it or in the block, is the caller's to report: each command's exit 2."""
    store = Store(url or default_url(), create=create)
    try:
        yield store
    except SQLAlchemyError as e:  # a query of the command's own (reports.compare's): the same clear error
        raise store.failure(e, "it could not be read") from None
    finally:
        store.close()


def check_store(url: str, mode: int = STORE_FILE_MODE) -> None:
    """Open the store at ``url`` once (creating its tables on first use, a new SQLite file with
    ``mode``), check that a run can be written into it (:meth:`Store.check_writable`) and close it:
    run before any guest starts, so an unreachable, read-only, locked, damaged or too new store
    ends the run before it costs anything. The default store's directory (``results/``) is
    created, private (0700), when missing."""
    if url == default_url() and not DEFAULT_PARENT.exists():
        DEFAULT_PARENT.mkdir(mode=0o700, parents=True, exist_ok=True)
    store = Store(url, mode)
    try:
        store.check_writable()
    finally:
        store.close()


def check_outside_runs(url: str, outputs: Sequence[tuple[str, Path | None]]) -> None:
    """:meth:`Store.check_outside_runs` on the store at ``url`` (which must exist: the suite's
    preflight has just made it)."""
    store = Store(url, create=False)
    try:
        store.check_outside_runs(outputs)
    finally:
        store.close()


def store_results(url: str, directory: Path, junit: Path | None = None,
                  mode: int = STORE_FILE_MODE) -> tuple[int, bool]:
    """Store the run whose results ``directory`` (and JUnit file) were just written: (run id, True),
    or the id of the run stored from that directory before and False. StoreError otherwise."""
    store = Store(url, mode)
    try:
        return store.add_run(read_results_dir(directory, junit))
    finally:
        store.close()


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


if __name__ == "__main__":
    sys.exit(main())
