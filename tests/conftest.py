"""Ordering for the parallel guest lane (tox.ini: ``-n 3 --dist loadgroup``).

pytest-xdist hands out work in collection order. Run last, one long unit of work leaves the other
workers idle while it finishes: the modules whose tests share one guest run (``xdist_group``) and
the tests marked ``long`` (a minute or more under CI load) go first, the short tests fill in after.
"""

from __future__ import annotations

import pytest


def long_first(item: pytest.Item) -> int:
    return 0 if item.get_closest_marker("xdist_group") or item.get_closest_marker("long") else 1


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=long_first)  # stable: the order within each part is pytest's
