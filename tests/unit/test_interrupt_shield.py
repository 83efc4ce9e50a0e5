"""Ctrl-C pressed again and again: the first starts the run's orderly end, each later one is noted and
never raised, so the rule's own undo, the results, the store and the cleanup all finish (exit 2, the run
stored as incomplete). Before, the second SIGINT cut the undo or the teardown short: a traceback, exit 130,
no report, and what the cleanup had not removed yet left behind."""

from __future__ import annotations

import signal
import sqlite3
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

from hypervisors.cleanup import install_signal_handlers, restore_signal_handlers
from tests.libvirt_python import needs_libvirt
from tests.runs.test_gate_plugin import _run

#: A hot-plug rule Ctrl-C'd seven times: once in its measurement, three times while it undoes what it
#: did (the disk it plugged), three times while the session's cleanup (the guest's removal) runs.
RULES = textwrap.dedent('''
    import os
    import signal
    import time
    from pathlib import Path

    import pytest

    def ctrl_c(times):
        for _ in range(times):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)

    @pytest.fixture(scope="session")
    def guest():
        yield
        ctrl_c(3)
        Path(os.environ["DONE"], "guest-removed").write_text("")

    @pytest.mark.rule("limits")
    def test_limits(record, guest):
        pass

    @pytest.mark.rule("hotplug")
    def test_hotplug(record, guest):
        try:
            ctrl_c(1)
        finally:
            ctrl_c(3)
            Path(os.environ["DONE"], "disk-detached").write_text("")

    @pytest.mark.rule("resize")
    def test_resize(record, guest):
        pass
''')


@needs_libvirt  # the run it starts loads the libvirt backend
def test_seven_ctrl_c_end_the_run_as_one_does(tmp_path: Path) -> None:
    done = tmp_path / "done"
    done.mkdir()
    db = tmp_path / "x.db"
    proc = _run(tmp_path, "--results-dir", str(tmp_path / "out"), "--store", f"sqlite:///{db}", rules=RULES,
                foreground=True, env={"DONE": str(done)})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out  # interrupted (pytest's), not 130
    assert sorted(p.name for p in done.iterdir()) == ["disk-detached", "guest-removed"], out
    assert "Traceback" not in out and "KeyboardInterrupt" in out, out
    assert "rules/test_rules.py:11: KeyboardInterrupt" in out, out  # where it landed (os.kill), not the handler
    # said as each came (stderr, unless pytest captured it then), and counted in the summary
    assert "vioconform: SIGINT noted: the run is already ending" in out, out
    assert "noted:     6 more SIGINT while the run was ending; the guest was removed and the results written" in out
    table = out.split("vioconform verdicts")[1]
    assert "RUN INCOMPLETE: interrupted by SIGINT; 1 rule test did not finish; 1 rule test not run" in table, table
    assert "exit code: 2 (interrupted)" in table
    suite = ET.parse(tmp_path / "out" / "junit.xml").getroot()
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert (props["complete"], props["interrupted_by"]) == ("false", "SIGINT")
    assert (tmp_path / "out" / "report.html").is_file()
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT complete FROM runs").fetchall() == [(0,)]


def test_a_run_that_was_not_interrupted_gives_the_handlers_back() -> None:
    """pytest run in-process (a test of the plugin) leaves the process as it found it: its Ctrl-C raises."""
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        install_signal_handlers()
        assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler
        restore_signal_handlers()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGINT, before[0])
        signal.signal(signal.SIGTERM, before[1])
