"""The results store on a real PostgreSQL server (Debian's, started privately by tests/pgserver.py):
the same store and compare tests the fast lane runs on SQLite, then a real suite run that writes
its run into PostgreSQL, and one whose store cannot be reached, which ends before any guest."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.suite_run import active_vioconform_domains, run_suite_at
from reports.store import Store
from tests.pgserver import PASSWORD, PgServer, create_database, private_postgres
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
from tests.unit.test_store import (  # noqa: F401 - collected here again, on PostgreSQL
    test_a_results_directory_round_trips,
    test_a_store_of_a_newer_schema_is_refused_and_left_alone,
    test_import_command,
    test_unusable_store_urls_are_one_clear_line,
)

_names = itertools.count(1)


@pytest.fixture(scope="module")
def pg() -> Iterator[PgServer]:
    with private_postgres() as server:
        yield server


@pytest.fixture
def store_url(pg: PgServer) -> str:
    """Overrides the fast lane's SQLite store: a new database on the private server per test."""
    return create_database(pg, f"t{next(_names)}")


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
