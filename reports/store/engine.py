"""The store's engine: :class:`Store` (a run written in one transaction, the runs and their metrics read
back) and the suite's calls on it (check, store a run's results)."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from model.across.metrics import as_number, describe
from model.across.moves import Key, MetricKey, Series
from model.across.series import stored_series
from reports.results import DEFAULT_PARENT
from reports.store.connection import connect_remedy, create_engine
from reports.store.read import RunData, read_results_dir
from reports.store.schema import (
    MAX_RUN_ID,
    RUN_COLUMNS_SINCE,
    SCHEMA_CREATE_ATTEMPTS,
    SCHEMA_LOCK_KEY,
    SCHEMA_VERSION,
    meta_table,
    metadata,
    metrics,
    runs,
    samples,
    schema_version,
    upgrade,
    verdicts,
)
from reports.store.store_error import StoreError, first_line
from reports.store.urls import (
    STORE_FILE_MODE,
    checked_url,
    create_sqlite_file,
    default_url,
    in_memory,
    remove_if_unused,
    shown_url,
    sqlite_file,
)


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
            self.engine = create_engine(url)
        except (SQLAlchemyError, ImportError, ValueError) as e:
            raise StoreError(f"store {shown}: {e.__class__.__name__}: {first_line(e)}; give a SQLAlchemy URL such as "
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
        made = create_sqlite_file(url, mode) if create else None
        #: The schema version of the store's tables (older than :data:`SCHEMA_VERSION`: a store
        #: opened to read, read as it is)
        self.version = SCHEMA_VERSION
        try:
            with self.engine.connect() as conn:
                version = schema_version(conn, shown)
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
            remove_if_unused(url, made)
            said = first_line(e)
            raise StoreError(f"store {shown} cannot be opened: {said}; {connect_remedy(self.engine.url, said)}") \
                from None
        except BaseException:
            self.engine.dispose()
            remove_if_unused(url, made)
            raise

    def failure(self, e: SQLAlchemyError, what: str) -> StoreError:
        """The StoreError for a database error while reading or writing the open store: ``what``
        failed, what the database said, and what to do (a lock held too long, a read-only or full
        store, a missing table or column)."""
        said = first_line(e)
        return StoreError(f"store {self.shown}: {what} ({said}); {connect_remedy(self.engine.url, said)}")

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
                    version = schema_version(conn, self.shown)
                    if version is None:
                        metadata.create_all(conn)
                        conn.execute(meta_table.insert().values(key="schema_version", value=str(SCHEMA_VERSION)))
                    elif version < SCHEMA_VERSION:
                        upgrade(conn)
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
            raise StoreError(f"store {self.shown}: the run could not be stored ({first_line(e)}); nothing of it "
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



def _stored(row: sa.Row[tuple[object, ...]]) -> StoredRun:
    """A row of ``runs``; its series derived as the upgrade stores it where the store has none yet."""
    m = row._mapping
    fingerprint, options = json.loads(m["fingerprint"]), json.loads(m["options"])
    return StoredRun(int(m["id"]), m["source"], m["started"], m["finished"], fingerprint, options, m["revision"],
                     bool(m["complete"]), m.get("run_uid"), m.get("series") or stored_series(options, fingerprint),
                     m.get("host"), m.get("started_from"))


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


def store_run(url: str, run: RunData | Callable[[], RunData], mode: int = STORE_FILE_MODE) -> tuple[int, bool]:
    """Store ``run`` (or what it gives, once the store is open) in the store at ``url``: (run id, True), or
    the id of the same run stored before and False. StoreError otherwise."""
    store = Store(url, mode)
    try:
        return store.add_run(run if isinstance(run, RunData) else run())
    finally:
        store.close()


def store_results(url: str, directory: Path, junit: Path | None = None,
                  mode: int = STORE_FILE_MODE) -> tuple[int, bool]:
    """Store the run whose results ``directory`` (and JUnit file) were written, read back from its JUnit file
    (:func:`store_run`)."""
    return store_run(url, lambda: read_results_dir(directory, junit), mode)

