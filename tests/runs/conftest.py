"""Fixtures of the whole-session runs: the fast lane's new SQLite store."""

from tests.unit.conftest import store_url

__all__ = ["store_url"]
