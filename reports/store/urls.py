"""A store's URL and its secrets: the default store, the URLs refused (in-memory SQLite, a password
with an unencoded ``@``), how a URL is shown (its password masked), a SQLite store's file and the
files SQLite makes beside it, the new file's mode, and where libpq takes a PostgreSQL password from."""

from __future__ import annotations

import contextlib
import os
import urllib.parse
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError

from model.secret import password_holds_at, redact_url, register_url
from reports.results import DEFAULT_PARENT
from reports.store.store_error import StoreError

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


def create_sqlite_file(url: str, mode: int) -> os.stat_result | None:
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


def remove_if_unused(url: str, made: os.stat_result | None) -> None:
    """Remove the empty file :func:`create_sqlite_file` made for a store that could not be created
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
