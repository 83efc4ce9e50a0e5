"""Connecting to a store with every wait bounded, and what a database's error means for the user."""

from __future__ import annotations

import os
import re
import select
import time
from typing import Any

import sqlalchemy as sa

from reports.store.urls import PASSFILE_ENV, PASSWORD_ENV, password_file

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


def connect_remedy(url: sa.engine.URL, error: str) -> str:
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


def create_engine(url: str) -> sa.Engine:
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

