"""How the parallel guest lane shares out its tests (tox.ini: ``-n 3 --dist loadgroup``).

The guest tests spend a quarter of their time waiting, not computing: a 5 ms disk at queue depth 1,
SSH handshakes, a timeout a test provokes on purpose. Measured over one CI run on 2 workers (the
host's /proc/stat every 5 s): the 2 cores were busy 75 % of the time. A third worker fills that.

Work is handed out test by test, except for the modules in ``SHARED_MODULES``: their tests share
one expensive module fixture (a whole-suite guest run, a booted guest, a server), so one worker
runs each of them whole. pytest-xdist's own ``loadgroup`` (an ``xdist_group`` mark) cannot say
this here: it appends the group to each test's node id, which pytest 9.2 no longer lets a plugin
change, so every test stayed a group of its own (seen: the healthy whole-suite run made three
times). This file's scheduler does the grouping instead, by module path.

pytest-xdist starts the largest work units first (``--loadscope-reorder``, its default): the shared
modules, then the single tests, of which those marked ``long`` (a minute or more under CI load)
come first, so the run does not end with one long test alone on an otherwise idle machine.
"""

from __future__ import annotations

from typing import Any

import pytest

#: Modules whose tests share one expensive module-scoped fixture, and what it is.
SHARED_MODULES = {
    "tests/e2e/test_rules_guest.py": "the healthy whole-suite run and its baseline",
    "tests/e2e/test_repeats_baseline.py": "the healthy repeated run",
    "tests/e2e/test_fio_push.py": "a booted guest",
    "tests/e2e/test_trace_guest.py": "a booted, traced guest",
    "tests/e2e/test_custom_kernel.py": "the downloaded kernel packages",
    "tests/e2e/test_store_postgres.py": "a private PostgreSQL server",
}

#: Modules with a module-scoped fixture that costs little, made once per worker that runs the module.
CHEAP_MODULE_FIXTURES = {
    "tests/e2e/test_hypervisor_under_test.py": "a wrapper script around QEMU",
    "tests/e2e/test_image_boot.py": "the cached test image's path (guest.cache.build_lock serialises a first build)",
    "tests/e2e/test_remote_libvirt.py": "a loopback sshd",
    "tests/e2e/test_host_pool.py": "a loopback sshd",
    "tests/e2e/test_pages_browser.py": "axe-core's script, from npm into the cache (guest.cache.build_lock serialises a "
                                       "first install)",
}


def work_unit(nodeid: str) -> str:
    """The unit of work a test belongs to: its module if the module is shared, else the test."""
    module = nodeid.split("::", 1)[0]
    return module if module in SHARED_MODULES else nodeid


def long_first(item: pytest.Item) -> int:
    return 0 if item.get_closest_marker("long") else 1


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=long_first)  # stable: the order within each part is pytest's


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> object | None:
    """``--dist loadgroup``: xdist's scope scheduler with this file's work units."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]

    class ByWorkUnit(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return ByWorkUnit(config, log)
