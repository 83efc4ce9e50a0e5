"""A PostgreSQL store's password comes from PGPASSWORD or the password file (libpq reads them when
the URL has none): the store passes no password of its own to the driver, and a server that asks
for one nobody gave is one line naming where it is looked for, never the password.
tests/e2e/test_store_postgres.py checks the same against a real server."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from reports.store.connection import connect_remedy, create_engine

URL = "postgresql://nightly@db.example.com:5433/vioconform"
NO_PASSWORD = "fe_sendauth: no password supplied"
REFUSED = 'FATAL:  password authentication failed for user "nightly"'


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.delenv("PGPASSFILE", raising=False)
    return tmp_path


def test_a_url_without_a_password_leaves_the_password_to_libpq() -> None:
    engine = create_engine(URL)
    try:
        _, params = engine.dialect.create_connect_args(engine.url)
        assert "password" not in params and engine.url.password is None
    finally:
        engine.dispose()


def test_no_password_names_pgpassword_and_the_password_file(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    u = sa.engine.make_url(URL)
    said = connect_remedy(u, NO_PASSWORD)
    assert said == (f"the server asks for a password and none was given: set PGPASSWORD, or add the line "
                    f"db.example.com:5433:vioconform:nightly:PASSWORD to ~/.pgpass ({home / '.pgpass'}), mode 0600 "
                    "(either keeps the password off the command line)")
    (home / ".pgpass").write_text("other:5432:*:someone:x\n")
    (home / ".pgpass").chmod(0o600)
    assert connect_remedy(u, NO_PASSWORD).endswith(f"; ~/.pgpass ({home / '.pgpass'}) has no line for it")
    (home / ".pgpass").chmod(0o640)
    assert connect_remedy(u, NO_PASSWORD).endswith(
        f"; ~/.pgpass ({home / '.pgpass'}) is ignored: it has group or world access (chmod 600 it)")
    monkeypatch.setenv("PGPASSFILE", str(home / "pw"))
    assert f"to $PGPASSFILE ({home / 'pw'}), mode 0600" in connect_remedy(u, NO_PASSWORD)


def test_a_refused_password_says_whose_it_was_never_what(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert connect_remedy(sa.engine.make_url(URL), REFUSED).startswith(
        f"the server refused the password in ~/.pgpass ({home / '.pgpass'}) for user nightly: correct it (a URL "
        f"without a password takes it from PGPASSWORD, else from ~/.pgpass ({home / '.pgpass'}))")
    monkeypatch.setenv("PGPASSWORD", "pg-s3cret-in-env")
    said = connect_remedy(sa.engine.make_url(URL), REFUSED)
    assert said.startswith("the server refused the password in PGPASSWORD for user nightly") and "s3cret" not in said
    in_url = connect_remedy(sa.engine.make_url("postgresql://nightly:pg-s3cret@db/v"), REFUSED)
    assert in_url.startswith("the server refused the password in the URL") and "s3cret" not in in_url


def test_other_failures_keep_the_general_remedy(home: Path) -> None:
    general = "check the URL, that the database is reachable and that you may write to it"
    assert connect_remedy(sa.engine.make_url(URL), "could not connect to server: Connection refused") == general
    assert connect_remedy(sa.engine.make_url("sqlite:///x.db"), NO_PASSWORD) == general
