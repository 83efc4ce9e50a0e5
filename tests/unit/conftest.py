"""Fixtures of the fast lane."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from reports.store import Store
from tests.silentserver import SilentServer, silent_server


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    """A new, empty results store: SQLite in the test's directory, its tables made as a run's first
    use makes them (the commands that only read never create a store). tests/e2e/test_store_postgres.py
    runs the same store and compare tests against a real PostgreSQL server by overriding this."""
    url = f"sqlite:///{tmp_path / 'vioconform.db'}"
    Store(url).close()
    return url


@pytest.fixture
def silent_tcp() -> Iterator[SilentServer]:
    """A server on loopback that accepts connections and never answers (tests/silentserver.py)."""
    with silent_server() as server:
        yield server
