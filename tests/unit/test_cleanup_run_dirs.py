"""Run directories record their owner; the next run sweeps those of dead owners and nothing else."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from hypervisors.cleanup import OWNER_FILE, RUN_DIR_PREFIX, CleanupStack, make_run_dir, sweep_run_dirs


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_sweep_removes_only_dead_owners_dirs(tmp_path: Path) -> None:
    dead, alive, unowned, other = (tmp_path / f"{RUN_DIR_PREFIX}{n}" for n in ("dead", "alive", "unowned", "x"))
    for d in (dead, alive, unowned):
        d.mkdir()
        (d / "dut1.img").write_bytes(b"\0")
    (dead / OWNER_FILE).write_text(f"{_dead_pid()}\n")
    (alive / OWNER_FILE).write_text(f"{os.getpid()}\n")
    other.with_name("somebody-else").mkdir()
    assert sweep_run_dirs(tmp_path) == [dead]
    assert not dead.exists() and alive.exists() and unowned.exists()
    assert (tmp_path / "somebody-else").exists()


def test_make_run_dir_records_its_owner_and_cleanup_removes_it() -> None:
    stack = CleanupStack()
    path = make_run_dir(stack)
    assert (path / OWNER_FILE).read_text().strip() == str(os.getpid())
    stack.run()
    assert not path.exists()
