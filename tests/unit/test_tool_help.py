"""Every command-line tool of the project answers ``--help`` without doing any work.

The tools are found, not listed: every module with an ``if __name__ == "__main__":`` block in the
project's packages (``python -m PACKAGE.MODULE``) and in tests/data (scripts that re-record test
data). Each runs with ``--help`` in a directory of its own, with HOME and XDG_CACHE_HOME pointing
into the test's directory: it must exit 0 within :data:`HELP_TIMEOUT_S`, print its usage, and
create nothing (no image build, no cache, no store, no results directory), nor touch the files
beside it (the data scripts write their data there).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.libvirt_python import AVAILABLE, REASON

ROOT = Path(__file__).resolve().parents[2]
#: Where the tools live: the packages a user runs with ``python -m``, and the data recorders.
PACKAGES = ("bench", "fixtures", "guest", "hypervisors", "images", "measure", "model", "reports", "suites", "transport")
DATA_SCRIPTS = ROOT / "tests" / "data"
MAIN_GUARD = 'if __name__ == "__main__":'
#: Seconds a tool may take to print its help: the slowest import here (reports.compare, pyVmomi's
#: record tools, bench.time_to_verdict) takes 0.5-1 s on an idle machine; 20 s leaves room for a
#: loaded CI host and catches a tool that starts its work instead (the test image's build takes minutes).
HELP_TIMEOUT_S = 20.0


def module_tools() -> list[str]:
    """``python -m`` names of every module with a main guard in the project's packages."""
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if MAIN_GUARD in path.read_text():
                parts = path.relative_to(ROOT).with_suffix("").parts
                found.append(".".join(parts[:-1] if parts[-1] == "__main__" else parts))  # a package's command
    return found


def script_tools() -> list[str]:
    """tests/data's scripts (run as files), relative to the repository."""
    return [str(p.relative_to(ROOT)) for p in sorted(DATA_SCRIPTS.rglob("*.py")) if MAIN_GUARD in p.read_text()]


def everything_under(directory: Path) -> dict[str, int]:
    """Every file and directory under ``directory`` with its modification time (ns)."""
    return {str(p.relative_to(directory)): p.stat().st_mtime_ns for p in directory.rglob("*")}


def run_help(command: list[str], tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
    sandbox = tmp_path / "sandbox"
    for d in ("home", "cache", "cwd"):
        (sandbox / d).mkdir(parents=True)
    env = {**os.environ, "HOME": str(sandbox / "home"), "XDG_CACHE_HOME": str(sandbox / "cache"),
           "PYTHONPATH": str(ROOT), "MPLCONFIGDIR": str(sandbox / "cache" / "matplotlib")}
    try:
        done = subprocess.run([sys.executable, *command, "--help"], check=False, cwd=sandbox / "cwd", env=env,
                              text=True, capture_output=True, timeout=HELP_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{' '.join(command)} --help did not answer within {HELP_TIMEOUT_S:.0f} s: it does work "
                    "instead of printing its help")
    return done, sandbox


def check(done: subprocess.CompletedProcess[str], sandbox: Path, name: str) -> None:
    assert done.returncode == 0, f"{name} --help exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    assert done.stdout.startswith("usage:"), f"{name} --help printed no usage:\n{done.stdout[:500]}"
    assert not done.stderr.strip(), f"{name} --help wrote to stderr:\n{done.stderr}"
    made = sorted(p for p in everything_under(sandbox) if p not in ("home", "cache", "cwd"))
    assert not made, f"{name} --help created {made}: it must answer without doing any work"


@pytest.mark.parametrize("module", module_tools())
def test_module_answers_help_without_work(module: str, tmp_path: Path) -> None:
    done, sandbox = run_help(["-m", module], tmp_path)
    if not AVAILABLE and "No module named 'libvirt'" in done.stderr:
        pytest.skip(f"{module}: {REASON}")  # the libvirt backend's tools, in tox -e unit
    check(done, sandbox, f"python -m {module}")


@pytest.mark.parametrize("script", script_tools())
def test_data_script_answers_help_without_work(script: str, tmp_path: Path) -> None:
    beside = everything_under((ROOT / script).parent)
    done, sandbox = run_help([str(ROOT / script)], tmp_path)
    check(done, sandbox, script)
    assert everything_under((ROOT / script).parent) == beside, f"{script} --help changed the files beside it"


def test_the_tools_are_found() -> None:
    """The discovery finds the tools the docs name (a guard written another way would hide one)."""
    assert {"bench.testimage", "images.build", "images.fio_static", "reports.compare",
            "reports.store", "reports.trend", "bench.rules", "hypervisors.libvirt.record"} <= set(module_tools())
    assert "tests/data/record_qemu.py" in script_tools()
