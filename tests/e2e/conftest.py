"""End-to-end tests: run the suite as a user does (``python -m pytest suites ...``) on real guests."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest

from hypervisors.libvirt.qemulog import QEMU_LOG_DIR

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class SuiteRun:
    returncode: int
    output: str
    results: Path
    pid: int

    @property
    def left_behind(self) -> list[str]:
        """What this run left on the host: its domains (the suite names them vioconform-<pid>),
        its run directories (owner.pid) and libvirt's QEMU logs of its domains."""
        return left_behind_by(self.pid)

    def cases(self) -> dict[str, ET.Element]:
        root = ET.parse(self.results / "junit.xml").getroot()
        return {c.get("name", ""): c for c in root.iter("testcase")}

    @staticmethod
    def props(case: ET.Element) -> dict[str, str]:
        props = case.find("properties")
        return {} if props is None else {p.get("name", ""): p.get("value", "") for p in props}


def left_behind_by(pid: int) -> list[str]:
    domains = [d for d in active_vioconform_domains() if d in (f"vioconform-{pid}", f"vioconform-kvmprobe-{pid}")]
    run_dirs = [str(d) for d in Path("/tmp").glob("vioconform-run-*")
                if (d / "owner.pid").exists() and (d / "owner.pid").read_text().strip() == str(pid)]
    logs = [str(p) for p in (QEMU_LOG_DIR / f"vioconform-{pid}.log", QEMU_LOG_DIR / f"vioconform-kvmprobe-{pid}.log")
            if p.exists()]
    return domains + run_dirs + logs


def active_vioconform_domains() -> list[str]:
    out = subprocess.run(["virsh", "-c", "qemu:///system", "list", "--name"], capture_output=True, text=True).stdout
    return [n for n in out.split() if n.startswith("vioconform-")]


def run_suite_at(results: Path, *args: str, timeout: float = 900, env: dict[str, str] | None = None) -> SuiteRun:
    """Run the conformance suite in a subprocess with extra arguments (and ``env`` added to the
    environment); results go to ``results``."""
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "suites", "-p", "no:cacheprovider",
                             "--results-dir", str(results), *args],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, **(env or {})})
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.terminate()  # SIGTERM: the suite removes its guest as on Ctrl-C
        out, _ = proc.communicate(timeout=60)
        raise AssertionError(f"the suite did not finish in {timeout} s:\n{out[-3000:]}") from None
    return SuiteRun(proc.returncode, out, results, proc.pid)


@pytest.fixture
def run_suite(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Run the conformance suite in a subprocess with extra arguments; results go to a new
    directory in tmp_path for each run (the suite refuses a --results-dir holding earlier results)."""
    runs = itertools.count(1)

    def run(*args: str, timeout: float = 900, env: dict[str, str] | None = None) -> SuiteRun:
        n = next(runs)
        return run_suite_at(tmp_path / ("results" if n == 1 else f"results-{n}"), *args, timeout=timeout, env=env)

    return run
