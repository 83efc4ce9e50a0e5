"""The project's tests never touch a user's results, and how the parallel guest lane shares out its tests (tox.ini: ``-n 3 --dist loadgroup``).

The guest tests spend a quarter of their time waiting, not computing: a 5 ms disk at queue depth 1,
SSH handshakes, a timeout a test provokes on purpose. Measured over one CI run on 2 workers (the
host's /proc/stat every 5 s): the 2 cores were busy 75 % of the time. A third worker fills that.

Work is handed out test by test, except for the modules in ``SHARED_MODULES``: their tests share
one expensive module fixture (a whole-suite guest run, a booted guest, a server), so one worker
runs each of them whole. pytest-xdist's own ``loadgroup`` (an ``xdist_group`` mark) cannot say
this here: it appends the group to each test's node id, which pytest 9.2 no longer lets a plugin
change, so every test stayed a group of its own (seen: the healthy whole-suite run made three
times). This file's scheduler does the grouping instead, by module path.

The work units are handed out longest first (tests/lane_order.py: by the time each took in the
lane, not by pytest-xdist's count of tests in a unit), so the run does not end with one long test
alone on an otherwise idle machine.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.lane_order import longest_first

#: Modules whose tests share one expensive module-scoped fixture, and what it is.
SHARED_MODULES = {
    "tests/e2e/test_rules_guest.py": "the healthy whole-suite run and its baseline, and the run of six faults (and "
                                     "the bundles both write, replayed)",
    "tests/e2e/test_controllers.py": "the healthy run of queue-depth and alignment beyond the default controllers",
    "tests/e2e/test_opt_in_healthy.py": "the healthy run of the rules outside the default suite",
    "tests/e2e/test_repeats_baseline.py": "the healthy repeated run",
    "tests/e2e/test_qemu_build.py": "a nightly series' two runs: the host's QEMU, then a QEMU build under test",
    "tests/e2e/test_fio_push.py": "a booted guest",
    "tests/e2e/test_trace_guest.py": "a booted, traced guest",
    "tests/e2e/test_custom_kernel.py": "the downloaded kernel packages",
    "tests/e2e/test_settings_kept.py": "a booted 6.12 guest",
    "tests/e2e/test_store_postgres.py": "a private PostgreSQL server",
    "tests/e2e/test_readme_commands.py": "a copy of the checkout and the .tox/suite tox makes in it",
    "tests/structure/test_throwaway_rule.py": "a copy of the tree with a made-up rule in it",
}

#: Modules with a module-scoped fixture that costs little, made once per worker that runs the module.
CHEAP_MODULE_FIXTURES = {
    "tests/e2e/test_image_boot.py": "the cached test image's path (images.cache.build_lock serialises a first build)",
    "tests/e2e/test_remote_libvirt.py": "a loopback sshd",
    "tests/e2e/test_host_pool.py": "a loopback sshd",
    "tests/e2e/test_pages_browser.py": "axe-core's script, from npm into the cache (images.cache.build_lock serialises a "
                                       "first install)",
}


def work_unit(nodeid: str) -> str:
    """The unit of work a test belongs to: its module if the module is shared, else the test."""
    module = nodeid.split("::", 1)[0]
    return module if module in SHARED_MODULES else nodeid


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    longest_first(items, work_unit)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> object | None:
    """``--dist loadgroup``: xdist's scope scheduler with this file's work units."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]

    config.option.loadscopereorder = False  # the collection's order is already longest first

    class ByWorkUnit(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return ByWorkUnit(config, log)


# --- a user's results stay untouched ---------------------------------------------------------------
#
# A run without --results-dir and --store writes into results/ of its working directory, which is
# the checkout under tox. Every test gives each run its own (bench/suite_run.py start_suite does it
# for the guest tests); ``results_untouched`` proves it: the session fails if the checkout's
# results/ changed while it ran.

ROOT = Path(__file__).resolve().parents[1]
#: Files whose content is compared, not only their size and mtime: the results stores (SQLite
#: rewrites pages in place, so a store can change with its size and, within the mtime's
#: granularity, its mtime unchanged).
HASHED_SUFFIXES = (".db",)


@dataclass(frozen=True)
class Entry:
    """One file or directory under a watched results/ as the session found it."""

    kind: str  # "file", "dir" or "link"
    size_bytes: int
    mtime_ns: int
    sha256: str  # of a store's content (HASHED_SUFFIXES); "" for anything else

    def describe(self) -> str:
        return f"{self.kind}, {self.size_bytes} bytes, mtime {self.mtime_ns}" + (
            f", sha256 {self.sha256[:12]}" if self.sha256 else "")


#: A results/ directory's entries by path relative to it; None when it does not exist.
Snapshot = dict[str, Entry] | None


def _entry(path: Path) -> Entry:
    st = path.lstat()
    if path.is_symlink():
        return Entry("link", st.st_size, st.st_mtime_ns, "")
    if path.is_dir():
        return Entry("dir", 0, st.st_mtime_ns, "")
    digest = ""
    if path.name.endswith(HASHED_SUFFIXES):
        h = hashlib.sha256()
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        digest = h.hexdigest()
    return Entry("file", st.st_size, st.st_mtime_ns, digest)


def snapshot(results: Path) -> Snapshot:
    """Every entry under ``results`` (itself included, as "."): kind, size, mtime, a store's sha256.
    A directory's mtime changes when an entry is made or removed in it, even one removed again
    (a store's journal)."""
    if not results.is_dir():
        return None
    out = {".": _entry(results)}
    for top, dirs, files in os.walk(results):
        for name in dirs + files:
            p = Path(top, name)
            out[p.relative_to(results).as_posix()] = _entry(p)
    return out


def changes(before: Snapshot, after: Snapshot) -> list[str]:
    """What differs between two snapshots of one results/ directory, one line each, each starting
    with the path relative to it ("." for the directory itself); [] if nothing."""
    if before is None or after is None:
        return [] if before == after else [". created" if before is None else ". removed"]
    out = []
    for rel in sorted(before.keys() | after.keys()):
        was, now = before.get(rel), after.get(rel)
        if was is None and now is not None:
            out.append(f"{rel} added: {now.describe()}")
        elif was is not None and now is None:
            out.append(f"{rel} removed: was {was.describe()}")
        elif was is not None and now is not None and was != now:
            out.append(f"{rel} changed: {was.describe()} -> {now.describe()}")
    return out


def watched_results() -> list[Path]:
    """The results/ directories a run without --results-dir or --store would write to: the checkout's,
    and the working directory's (the same one under tox)."""
    return sorted({ROOT / "results", Path.cwd().absolute() / "results"})


@pytest.fixture(scope="session", autouse=True)
def results_untouched() -> Iterator[None]:
    """Fails the session (an error at the teardown of its last test) when the checkout's results/
    changed while its tests ran: a test ran the suite or a reports command on the user's default
    store or results directory instead of its own."""
    watched = watched_results()
    before = {d: snapshot(d) for d in watched}
    yield
    found = [f"  {d}: {line}" for d in watched for line in changes(before[d], snapshot(d))]
    if found:
        pytest.fail("a test wrote into a user's results directory (each test must give every run its own "
                    "--results-dir and --store under its tmp_path; see tests/conftest.py):\n" + "\n".join(found),
                    pytrace=False)
