"""The results store on a real PostgreSQL server (Debian's, started privately by tests/pgserver.py):
the same store and compare tests the fast lane runs on SQLite, then a real suite run that writes
its run into PostgreSQL, and one whose store cannot be reached, which ends before any guest."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from bench.suite_run import active_vioconform_domains, run_suite_at
from reports import store as store_module
from reports.store import Store, StoreError, connection
from tests.pgserver import PASSWORD, USER, PgServer, create_database, private_postgres
from tests.unit.test_compare_recorded import (  # noqa: F401 - collected here again, on PostgreSQL
    test_io_breakup_is_an_io_size_regression,
    test_tcq_off_is_a_queue_depth_regression,
    test_two_healthy_runs_are_no_change,
)
from tests.unit.test_compare_runs import (  # noqa: F401 - collected here again, on PostgreSQL
    test_a_regression_is_exact_and_exits_non_zero_with_junit,
    test_bad_input_is_one_line_and_exit_2,
    test_fixes_errors_and_single_samples,
    test_last_n_nights_flaky_and_fingerprints,
    test_two_healthy_runs_compare_as_no_change,
)
from tests.unit.test_series import (  # noqa: F401 - collected here again, on PostgreSQL
    test_runs_of_two_series_are_compared_only_after_saying_so,
    test_two_runs_of_one_series_on_two_qemu_builds_compare_with_last_2,
    test_two_runs_of_one_series_stored_at_once_are_both_stored,
)
from tests.unit.test_store import (  # noqa: F401 - collected here again, on PostgreSQL
    healthy,
    test_a_results_directory_round_trips,
    test_a_store_of_a_newer_schema_is_refused_and_left_alone,
    test_import_command,
    test_unusable_store_urls_are_one_clear_line,
    write_run,
)
from tests.unit.test_store_safety import PARALLEL_FIRST_USES, first_uses_at_once

ROOT = Path(__file__).resolve().parents[2]
_names = itertools.count(1)


@pytest.fixture(scope="module")
def pg() -> Iterator[PgServer]:
    with private_postgres() as server:
        yield server


@pytest.fixture
def store_url(pg: PgServer) -> str:
    """Overrides the fast lane's SQLite store: a new database on the private server per test, its
    tables made as a run's first use makes them."""
    url = create_database(pg, f"t{next(_names)}")
    Store(url).close()
    return url


def test_a_suite_run_is_stored_in_postgresql(pg: PgServer, tmp_path: Path) -> None:
    url = create_database(pg, "suite")
    run = run_suite_at(tmp_path / "r", "--controllers", "virtio-blk", "-k", "limits", "--store", url)
    assert run.returncode == 0, run.output[-3000:]
    assert "stored:    run 1 in postgresql://vioconform:***@127.0.0.1" in run.output, run.output[-3000:]
    assert PASSWORD not in run.output
    store = Store(url)
    try:
        (stored,) = store.runs()
        assert stored.complete and stored.source == str((tmp_path / "r").resolve())
        assert store.verdicts(stored.id) == {("limits", "libvirt:virtio-blk:latency5ms"): "passed"}
        assert store.counts(stored.id)["samples"] > 0
    finally:
        store.close()


def test_an_unreachable_store_ends_the_run_before_any_guest(pg: PgServer, tmp_path: Path) -> None:
    t0 = time.monotonic()
    url = f"postgresql://vioconform:{PASSWORD}@127.0.0.1:{pg.port}/no_such_database"
    run = run_suite_at(tmp_path / "r", "--controllers", "virtio-blk", "-k", "limits", "--store", url)
    assert run.returncode == 4, run.output[-3000:]
    assert "--store: store postgresql://vioconform:***@127.0.0.1" in run.output and "cannot be opened" in run.output
    assert PASSWORD not in run.output and "PASSED" not in run.output
    assert f"vioconform-{run.pid}" not in active_vioconform_domains()
    assert time.monotonic() - t0 < 60


def test_first_uses_at_once_of_a_new_database_all_succeed(pg: PgServer, capsys: pytest.CaptureFixture[str]) -> None:
    """Eight first uses of a fresh database at the same instant: without a lock, some of them failed
    (duplicate key on pg_type_typname_nsp_index, or relation "meta" already exists: CREATE TABLE
    racing CREATE TABLE)."""
    for attempt in range(3):  # three fresh databases: a race that loses rarely still shows
        url = create_database(pg, f"parallel{attempt}")
        if attempt == 0:  # a command that only reads creates nothing, and says what it found
            assert store_module.main(["--store", url, "list"]) == 2
            assert "holds no vioconform results (it has no vioconform tables)" in capsys.readouterr().err
        for done in first_uses_at_once(url, PARALLEL_FIRST_USES):
            assert done.returncode == 0, done.stdout
        engine = sa.create_engine(url)
        try:
            with engine.connect() as conn:
                rows = [tuple(r) for r in conn.execute(sa.text("SELECT key, value FROM meta"))]
            assert rows == [("schema_version", str(store_module.SCHEMA_VERSION))]
        finally:
            engine.dispose()


def test_a_store_its_user_may_only_read_is_refused_before_any_guest(pg: PgServer, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """The preflight's probe run finds a database user without the right to write (the run was only
    refused when it ended), and, rolled back, uses up no run id."""
    url = create_database(pg, "readonly")
    Store(url).close()
    engine = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(sa.text("CREATE ROLE reader LOGIN PASSWORD 'r3ader-pw'"))
            conn.execute(sa.text("GRANT SELECT ON ALL TABLES IN SCHEMA public TO reader"))
    finally:
        engine.dispose()
    reader = url.replace(f"{USER}:{PASSWORD}@", "reader:r3ader-pw@")
    with pytest.raises(StoreError, match=r": a run could not be stored in it \(permission denied for table runs\); "
                                         r"the store cannot be written"):
        store_module.check_store(reader)
    night = write_run(tmp_path, "20261120-020000", healthy())
    assert store_module.main(["--store", reader, "import", str(night)]) == 2
    err = capsys.readouterr().err
    assert "permission denied for table runs" in err and "r3ader-pw" not in err and err.count("\n") == 1, err
    store_module.check_store(url)  # its owner may write
    store = Store(url)
    try:
        assert store.import_dir(night) == (1, True)  # the probes left no run and no gap in the ids
    finally:
        store.close()


def test_every_connection_carries_the_statement_timeout(pg: PgServer) -> None:
    url = create_database(pg, "timeouts")
    store = Store(url + "?options=-c%20work_mem%3D4MB")  # the URL's own options are kept beside it
    try:
        with store.engine.connect() as conn:
            shown = conn.execute(sa.text("SHOW statement_timeout")).scalar_one()
            assert conn.execute(sa.text("SHOW work_mem")).scalar_one() == "4MB"
        assert shown == f"{connection.STORE_STATEMENT_TIMEOUT_S:.0f}s"
        # a statement past it ends with the server's reason, not a hang
        with pytest.raises(sa.exc.OperationalError, match="canceling statement due to statement timeout"), \
                store.engine.connect() as conn:
            conn.execute(sa.text("SET statement_timeout = '200ms'"))
            conn.execute(sa.text("SELECT pg_sleep(5)"))
    finally:
        store.close()


def _without_pg_env(**more: str) -> dict[str, str]:
    """This process's environment without libpq's own variables (PGPASSWORD, PGPASSFILE, ...), and ``more``."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("PG")}, **more}


def _cli(module: str, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120, check=False)


def test_the_store_password_comes_from_pgpassword_or_pgpass(pg: PgServer, tmp_path: Path) -> None:
    """A password-protected role and a URL without the password: PGPASSWORD works, a ~/.pgpass in
    the HOME works, neither is one line naming both; no password is printed anywhere."""
    url = create_database(pg, "secrets").replace(f":{PASSWORD}@", "@")
    assert PASSWORD not in url
    home = tmp_path / "home"
    home.mkdir()
    nights = [write_run(tmp_path, f"2026112{n}-020000", healthy()) for n in (0, 1)]
    outputs = []
    # PGPASSWORD
    done = _cli("reports.store", _without_pg_env(HOME=str(home), PGPASSWORD=PASSWORD), "--store", url, "import",
                str(nights[0]))
    outputs.append(done.stdout + done.stderr)
    assert done.returncode == 0 and f"{nights[0]}: run 1" in done.stdout, done.stderr
    # ~/.pgpass in the HOME, no PGPASSWORD
    pgpass = home / ".pgpass"
    pgpass.write_text(f"127.0.0.1:{pg.port}:*:{USER}:{PASSWORD}\n")
    pgpass.chmod(0o600)
    for module, args in (("reports.store", ["import", str(nights[1])]), ("reports.compare", ["--last", "2"]),
                         ("reports.trend", ["-o", str(tmp_path / "t.html")])):
        done = _cli(module, _without_pg_env(HOME=str(home)), "--store", url, *args)
        outputs.append(done.stdout + done.stderr)
        assert done.returncode == 0, (module, done.stdout, done.stderr)
    # neither: one line naming both, within seconds
    pgpass.unlink()
    t0 = time.monotonic()
    done = _cli("reports.store", _without_pg_env(HOME=str(home)), "--store", url, "list")
    outputs.append(done.stdout + done.stderr)
    assert done.returncode == 2 and time.monotonic() - t0 < 60
    assert done.stderr == (
        f"error: store {url} cannot be opened: fe_sendauth: no password supplied; the server asks for a password and "
        f"none was given: set PGPASSWORD, or add the line 127.0.0.1:{pg.port}:secrets:{USER}:PASSWORD to ~/.pgpass "
        f"({pgpass}), mode 0600 (either keeps the password off the command line)\n")
    # a password file others may read is ignored by libpq: said so
    pgpass.write_text(f"127.0.0.1:{pg.port}:*:{USER}:{PASSWORD}\n")
    pgpass.chmod(0o644)
    done = _cli("reports.store", _without_pg_env(HOME=str(home)), "--store", url, "list")
    outputs.append(done.stdout + done.stderr)
    assert done.returncode == 2 and f"~/.pgpass ({pgpass}) is ignored: it has group or world access (chmod 600 it)" \
        in done.stderr, done.stderr
    # a wrong PGPASSWORD: refused, and neither password shown
    done = _cli("reports.store", _without_pg_env(HOME=str(home), PGPASSWORD="not-the-pg-s3cret"), "--store", url, "list")
    outputs.append(done.stdout + done.stderr)
    assert done.returncode == 2 and "the server refused the password in PGPASSWORD for user vioconform" in done.stderr
    assert not any(PASSWORD in o or "not-the-pg-s3cret" in o for o in outputs), outputs


def test_a_suite_run_takes_the_store_password_from_pgpassword(pg: PgServer, tmp_path: Path) -> None:
    """--store without a password: the run stores with PGPASSWORD; without it (and no password file)
    the run ends before any guest, exit 4, with the line naming PGPASSWORD and ~/.pgpass."""
    url = create_database(pg, "suite_pgpassword").replace(f":{PASSWORD}@", "@")
    nofile = str(tmp_path / "no-pgpass")
    t0 = time.monotonic()
    refused = run_suite_at(tmp_path / "r0", "--controllers", "virtio-blk", "-k", "limits", "--store", url,
                           env={"PGPASSWORD": "", "PGPASSFILE": nofile})
    assert refused.returncode == 4, refused.output[-3000:]
    assert "fe_sendauth: no password supplied; the server asks for a password and none was given: set PGPASSWORD, " \
           f"or add the line 127.0.0.1:{pg.port}:suite_pgpassword:{USER}:PASSWORD to $PGPASSFILE ({nofile})" \
           in refused.output, refused.output[-3000:]
    assert time.monotonic() - t0 < 60 and f"vioconform-{refused.pid}" not in active_vioconform_domains()
    run = run_suite_at(tmp_path / "r", "--controllers", "virtio-blk", "-k", "limits", "--store", url,
                       env={"PGPASSWORD": PASSWORD, "PGPASSFILE": nofile})
    assert run.returncode == 0, run.output[-3000:]
    assert f"stored:    run 1 in {url}" in run.output, run.output[-3000:]
    assert PASSWORD not in run.output + refused.output
