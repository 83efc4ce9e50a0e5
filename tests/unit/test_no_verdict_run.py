"""A run in which no rule reached a verdict (every rule an ERROR: a guest that never came up) is
incomplete everywhere, so it is never stored as a complete run nor taken as a ``--baseline``."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.runs.test_gate_plugin import _cases, _kind, _message, _run


def test_a_run_of_errors_is_incomplete_and_stored_so(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    proc = _run(tmp_path, "--results-dir", str(tmp_path / "out"), "--store", f"sqlite:///{db}", "-k", "fio_error")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 10, out  # a harness error and no rule failed (reports/exitcodes.py)
    assert "RUN INCOMPLETE: no rule reached a verdict (1 rule test ended in ERROR, none passed or failed)." in out
    cases = _cases(tmp_path / "out" / "junit.xml")
    assert _kind(cases["fio-error"]) == "error"
    assert _message(cases["run"], "error").startswith("RUN INCOMPLETE: no rule reached a verdict")
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT id, complete FROM runs").fetchall() == [(1, 0)]
    # one verdict among the errors: complete
    proc = _run(tmp_path, "--results-dir", str(tmp_path / "out2"), "--store", f"sqlite:///{db}", "-k",
                "fio_error or passes")
    assert proc.returncode == 10 and "RUN INCOMPLETE" not in proc.stdout, proc.stdout + proc.stderr
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT id, complete FROM runs").fetchall() == [(1, 0), (2, 1)]
