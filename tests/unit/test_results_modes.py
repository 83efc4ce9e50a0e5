"""Everything a run creates follows --results-mode, which never lets group or others write (anyone
who can rewrite junit.xml changes the gate's verdict): the results, the guest's logs, the store."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest

from fixtures import finish
from fixtures.guest import keep_logs
from fixtures.state import RESULTS_KEY
from reports.results import ResultsDir, parse_mode
from reports.store import Store, check_store
from tests.unit.suite_options import errors, run_suite_options

pytest_plugins = ["pytester"]


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


@contextlib.contextmanager
def umask(mask: int) -> Iterator[None]:
    """The umask most users have (022): what a file made without an explicit mode would get."""
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


@pytest.mark.parametrize(("given", "who", "safe"), [("0777", "group and others", "0755"), ("0775", "group", "0755"),
                                                    ("0757", "others", "0755"), ("0770", "group", "0750"),
                                                    ("0722", "group and others", "0700")])
def test_modes_that_let_others_write_are_refused_with_a_safe_one(given: str, who: str, safe: str) -> None:
    with pytest.raises(ValueError, match=f"--results-mode {given} lets {who} write the results .* use {safe},"):
        parse_mode(given)
    assert parse_mode(safe) == int(safe, 8)


def test_the_suite_refuses_a_world_writable_results_mode(pytester: pytest.Pytester) -> None:
    result = run_suite_options(pytester, "--results-mode", "0777")
    assert result.ret == 4 and "--results-mode 0777 lets group and others write" in errors(result), errors(result)
    assert not (pytester.path / "res").exists()


def test_a_new_store_file_gets_the_results_file_mode(tmp_path: Path) -> None:
    with umask(0o022):
        check_store(f"sqlite:///{tmp_path / 'default.db'}")
        Store(f"sqlite:///{tmp_path / 'group.db'}", 0o640).close()
        (tmp_path / "theirs.db").touch(mode=0o644)  # an existing store keeps the mode its owner gave it
        Store(f"sqlite:///{tmp_path / 'theirs.db'}", 0o600).close()
    assert _mode(tmp_path / "default.db") == 0o600 and _mode(tmp_path / "group.db") == 0o640
    assert _mode(tmp_path / "theirs.db") == 0o644
    store = Store(f"sqlite:///{tmp_path / 'default.db'}")  # an empty file made for it is a database
    assert store.runs() == []
    store.close()


def test_kept_logs_get_the_results_mode_when_they_are_made(tmp_path: Path) -> None:
    run_dir, results = tmp_path / "run", tmp_path / "results"
    run_dir.mkdir()
    results.mkdir(mode=0o750)
    (run_dir / "console.log").write_text("boot\n")
    (run_dir / "vioconform-1.qemu.log").write_text("qemu\n")
    with umask(0o022):
        keep_logs(run_dir, results, "kvm7/gw0", 0o750)
    for d in (results / "logs", results / "logs" / "kvm7", results / "logs" / "kvm7" / "gw0"):
        assert _mode(d) == 0o750, d
    for f in ("console.log", "vioconform-1.qemu.log"):
        kept = results / "logs" / "kvm7" / "gw0" / f
        assert _mode(kept) == 0o640 and kept.read_text() == (run_dir / f).read_text()


def test_what_is_written_after_the_results_gets_the_mode_at_the_end(tmp_path: Path) -> None:
    """On SIGTERM pytest tears the guest down (and keeps its logs) after pytest_sessionfinish: the
    last hook gives them the results mode too."""
    results = ResultsDir(tmp_path, tmp_path / "junit.xml", 0o700)
    with umask(0o022):
        (tmp_path / "logs").mkdir()
        (tmp_path / "logs" / "vm.qemu.log").write_text("late")
    config = pytest.Stash()
    config[RESULTS_KEY] = results

    class Config:
        stash = config

    finish.pytest_unconfigure(cast(pytest.Config, Config()))
    assert _mode(tmp_path / "logs") == 0o700 and _mode(tmp_path / "logs" / "vm.qemu.log") == 0o600
