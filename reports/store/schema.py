"""The store's tables, its schema version and the upgrade of an older store in place."""

from __future__ import annotations

import json

import sqlalchemy as sa

from model.across.series import MAX_SERIES_CHARS, stored_series
from reports.store.store_error import StoreError

#: 2 added ``runs.run_uid``; 3 added ``runs.series``; 4 added ``runs.host`` and ``runs.started_from``.
SCHEMA_VERSION = 4
#: First uses of a new store that each try to create its tables: the second and later ones wait
#: for the first (PostgreSQL: an advisory lock; SQLite: BEGIN IMMEDIATE) and find the tables made.
#: A retry covers what a lock cannot (a driver without them); 3 is plenty.
SCHEMA_CREATE_ATTEMPTS = 3
#: The PostgreSQL advisory lock key held while creating or upgrading the schema (any fixed
#: 64-bit number: "vioc" in ASCII).
SCHEMA_LOCK_KEY = 0x76696F63


#: The largest run id a store can hold: ``runs.id`` is an SQL INTEGER, 32 bits in PostgreSQL (64 in
#: SQLite), numbered from 1.
MAX_RUN_ID = 2**31 - 1


def parse_run_id(text: str) -> int | None:
    """``text`` as a stored run's id (``"12"`` -> 12), or None when it is not one: only ASCII digits
    name a run, as ``list`` prints them. ``str.isdigit`` is also true for ``"²"``, which ``int()``
    refuses, and for ``"٣"``, which it reads as 3: neither is an id anyone was shown. The one place
    run ids given by people are read (``--baseline``, ``reports.compare``)."""
    return int(text) if text.isascii() and text.isdigit() else None




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



def schema_version(conn: sa.Connection, shown: str) -> int | None:
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


def upgrade(conn: sa.Connection) -> None:
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


