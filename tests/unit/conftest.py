"""Fixtures of the fast lane."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    """A new, empty results store: SQLite in the test's directory. tests/e2e/test_store_postgres.py
    runs the same store and compare tests against a real PostgreSQL server by overriding this."""
    return f"sqlite:///{tmp_path / 'vioconform.db'}"
