"""The real vioconform plugin (tests/runs/test_gate_plugin.py's small rules, no guest) and the
results store: an in-memory store refused, a store that never answers ended by its timeout or at
once by SIGTERM, and a run's own identity in its JUnit file."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from reports.store import RUN_ID_KEY, Store, main
from tests.runs.test_gate_plugin import ROOT, _run
from tests.silentserver import SilentServer
from tests.unit.test_store_safety import SIGNAL_BOUND_S


def test_an_in_memory_store_is_a_usage_error(tmp_path: Path) -> None:
    proc = _run(tmp_path, "--results-dir", str(tmp_path / "out"), "--store", "sqlite://")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 4, out
    assert "--store: store sqlite:// is an in-memory database: it would keep nothing after the run" in out, out
    assert "PASSED" not in out and "stored:" not in out
    assert not (tmp_path / "out").exists()


def test_sigterm_while_the_store_does_not_answer_ends_the_run_at_once(tmp_path: Path, silent_tcp: SilentServer) -> None:
    _run(tmp_path, "--collect-only", "-q")  # writes the conftest and the rules
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "rules", "-p", "no:cacheprovider", "--rootdir",
                             str(tmp_path), "-o", "pythonpath=.", "-p", "tests.long_store_wait",
                             "--results-dir", str(tmp_path / "out"),
                             "--store", f"postgresql://u:pw@127.0.0.1:{silent_tcp.port}/v"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={"PYTHONPATH": f"{ROOT}:{tmp_path}", "PATH": "/usr/bin:/bin"})
    try:
        deadline = time.monotonic() + 60
        # the run waits for the store once the silent server has its connection
        while not silent_tcp.accepted:
            assert proc.poll() is None and time.monotonic() < deadline, "the run never connected to the store"
            time.sleep(0.1)
        time.sleep(0.5)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
        took = time.monotonic() - t0
        assert took < SIGNAL_BOUND_S, f"{took:.1f} s:\n{out}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 2 and "KeyboardInterrupt" in out and "PASSED" not in out, out
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_run_writes_its_identity_and_a_copy_of_its_results_is_the_same_run(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    proc = _run(tmp_path, "--results-dir", str(tmp_path / "out"), "--store", f"sqlite:///{db}", "-k", "passes")
    assert proc.returncode == 0 and "stored:    run 1 in" in proc.stdout, proc.stdout + proc.stderr
    suite = ET.parse(tmp_path / "out" / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    run_uid = props[RUN_ID_KEY]
    assert run_uid and len(run_uid) == 36
    shutil.copytree(tmp_path / "out", tmp_path / "copy")
    assert main(["--store", f"sqlite:///{db}", "import", str(tmp_path / "copy")]) == 0
    store = Store(f"sqlite:///{db}")
    try:
        (run,) = store.runs()
        assert run.run_uid == run_uid and RUN_ID_KEY not in run.fingerprint
    finally:
        store.close()


#: A plugin for the gate's run: the store's write is where SIGTERM arrives (a store slow to answer).
SIGTERM_IN_STORE = '''
import os, signal, time
from reports import store

def add_run(self, run):
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(30)

store.Store.add_run = add_run
'''


def test_sigterm_while_the_run_is_stored_is_named_and_the_exit_is_not_clean(tmp_path: Path) -> None:
    (tmp_path / "sigterm_in_store.py").write_text(SIGTERM_IN_STORE)
    t0 = time.monotonic()
    proc = _run(tmp_path, "--results-dir", str(tmp_path / "out"), "--store", f"sqlite:///{tmp_path / 's.db'}",
                "-k", "passes", "-p", "sigterm_in_store")
    out = proc.stdout + proc.stderr
    assert time.monotonic() - t0 < 30 and proc.returncode == 11, out  # the results not stored
    assert f"NOT STORED: SIGTERM while the run was being stored in sqlite:///{tmp_path / 's.db'}" in out, out
    assert (tmp_path / "out" / "junit.xml").is_file() and "Traceback" not in out
