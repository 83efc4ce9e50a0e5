"""Everything a run creates follows --results-mode on every way out, SIGTERM included (real guest)."""

from __future__ import annotations

import os
import signal
import stat
import time
from pathlib import Path

from tests.e2e.conftest import active_vioconform_domains, left_behind_by, start_suite

#: The guest's domain shows up within seconds of the start; a loaded CI host needs more.
GUEST_START_TIMEOUT_S = 120.0


def test_sigterm_leaves_every_file_in_the_results_mode(tmp_path: Path) -> None:
    results = tmp_path / "results"
    old = os.umask(0o022)  # the usual umask: what a file made without an explicit mode gets
    try:
        proc = start_suite(results, "--controllers", "virtio-blk", "-k", "queue", "--results-mode", "0750")
    finally:
        os.umask(old)
    name = f"vioconform-{proc.pid}"
    deadline = time.monotonic() + GUEST_START_TIMEOUT_S
    while name not in active_vioconform_domains():
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate(timeout=60)[0][-3000:]
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    out = proc.communicate(timeout=120)[0]
    assert proc.returncode != 0, out
    logs = results / "logs"
    assert (logs / f"{name}.qemu.log").is_file(), out  # the guest's logs are kept on SIGTERM too
    wrong = []
    for root, dirs, files in os.walk(results):
        for d in dirs:
            if stat.S_IMODE(os.lstat(Path(root) / d).st_mode) != 0o750:
                wrong.append(f"{Path(root) / d}: {stat.S_IMODE(os.lstat(Path(root) / d).st_mode):04o}")
        for f in files:
            if stat.S_IMODE(os.lstat(Path(root) / f).st_mode) != 0o640:
                wrong.append(f"{Path(root) / f}: {stat.S_IMODE(os.lstat(Path(root) / f).st_mode):04o}")
    assert stat.S_IMODE(results.stat().st_mode) == 0o750
    assert wrong == [], "\n".join(wrong)
    assert {"junit.xml", "report.html"} <= {p.name for p in results.iterdir()}, out
    store = tmp_path / "vioconform.db"  # start_suite's store, made new by this run
    assert stat.S_IMODE(store.stat().st_mode) == 0o640, out
    assert left_behind_by(proc.pid) == [], out
