"""Killed runs' empty results directories: the next run removes them, and nothing else (a directory
with data, a live run's, another machine's, one no run marked)."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

from fixtures.abandoned import PROBE_PREFIX, RESULTS_OWNER_FILE, claim, owner_here, release, sweep_abandoned_results
from tests.runs.test_gate_plugin import _run


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def _marked(d: Path, pid: int, host: str | None = None) -> Path:
    d.mkdir(parents=True)
    (d / RESULTS_OWNER_FILE).write_text(f"pid={pid} host={host or socket.gethostname()}\n")
    return d


def test_the_sweep_removes_only_dead_runs_empty_skeletons(tmp_path: Path) -> None:
    dead = _dead_pid()
    empty = _marked(tmp_path / "20261120-020000", dead)
    skeleton = _marked(tmp_path / "20261120-020001", dead)
    (skeleton / "logs" / "gw0").mkdir(parents=True)
    (skeleton / f"{PROBE_PREFIX}abc").touch()
    with_data = _marked(tmp_path / "20261120-020002", dead)
    (with_data / "logs").mkdir()
    (with_data / "logs" / "console.log").write_text("boot\n")
    with_empty_output = _marked(tmp_path / "20261120-020003", dead)
    (with_empty_output / "junit.xml").touch()  # a file the run made: not the skeleton, whatever its size
    _marked(tmp_path / "20261120-020004", os.getpid())  # a live run's
    _marked(tmp_path / "20261120-020005", dead, host="another-machine")
    unmarked = tmp_path / "20261120-020006"
    unmarked.mkdir()
    link = _marked(tmp_path / "20261120-020007", dead)
    (link / "logs").symlink_to(with_data / "logs")
    (tmp_path / "notes.txt").write_text("mine")
    assert sweep_abandoned_results(tmp_path) == [empty, skeleton]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "20261120-020002", "20261120-020003", "20261120-020004", "20261120-020005", "20261120-020006",
        "20261120-020007", "notes.txt"]
    assert (with_data / "logs" / "console.log").read_text() == "boot\n"
    assert sweep_abandoned_results(tmp_path / "missing") == []


def test_a_run_marks_its_directory_while_it_runs(tmp_path: Path) -> None:
    claim(tmp_path, 0o600)
    assert owner_here(tmp_path) == os.getpid()
    assert (tmp_path / RESULTS_OWNER_FILE).stat().st_mode & 0o777 == 0o600
    release(tmp_path)
    assert owner_here(tmp_path) is None and not any(tmp_path.iterdir())


def test_a_killed_runs_empty_results_directory_goes_with_the_next_run(tmp_path: Path) -> None:
    killed = tmp_path / "runs" / "killed"
    proc = _run(tmp_path, "--results-dir", str(killed), "--store", "none", "-k", "stopped",
                env={"GATE_SIGNAL": "SIGKILL"})
    assert proc.returncode == -9, proc.stdout + proc.stderr
    assert [p.name for p in killed.iterdir()] == [RESULTS_OWNER_FILE]  # what SIGKILL leaves: the empty directory
    kept = tmp_path / "runs" / "killed-with-data"
    proc = _run(tmp_path, "--results-dir", str(kept), "--store", "none", "-k", "stopped",
                env={"GATE_SIGNAL": "SIGKILL"})
    (kept / "raw.txt").write_text("measured")  # as a rule's raw file
    # the next run, given the killed run's --results-dir: swept first, then used; the one with data stays
    proc = _run(tmp_path, "--results-dir", str(killed), "--store", "none", "-k", "passes")
    assert proc.returncode == 0 and (killed / "junit.xml").is_file(), proc.stdout + proc.stderr
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["killed", "killed-with-data"]
    assert (kept / "raw.txt").read_text() == "measured"
    assert RESULTS_OWNER_FILE not in [p.name for p in killed.iterdir()]  # released at the end
