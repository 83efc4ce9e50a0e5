"""End-to-end tests: run the suite as a user does (``python -m pytest suites ...``) on real guests.

The run and its JUnit file are read by bench/suite_run.py, which the benchmarks share.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Callable
from pathlib import Path

import libvirt
import pytest

from bench.suite_run import (
    ROOT,
    SuiteRun,
    active_vioconform_domains,
    ctrl_c_once_the_guest_runs,
    left_behind_by,
    run_suite_at,
    start_suite,
)
from hypervisors.libvirt.leftovers import METADATA_NS

__all__ = ["ROOT", "SuiteRun", "active_vioconform_domains", "ctrl_c_once_the_guest_runs", "left_behind_by",
           "orphaned_domains", "run_suite_at", "start_suite"]

RunSuite = Callable[..., SuiteRun]


@pytest.fixture
def run_suite(tmp_path: Path) -> RunSuite:
    """Run the conformance suite in a subprocess with extra arguments; results go to a new
    directory in tmp_path for each run (the suite refuses a --results-dir holding earlier results)."""
    runs = itertools.count(1)

    def run(*args: str, timeout: float = 900, env: dict[str, str] | None = None) -> SuiteRun:
        n = next(runs)
        return run_suite_at(tmp_path / ("results" if n == 1 else f"results-{n}"), *args, timeout=timeout, env=env)

    return run


def orphaned_domains() -> list[str]:
    """Running vioconform domains of this process or of a process that is gone: what a run leaked.
    (Other runs' guests may be up on a shared machine; their owners are alive.)"""
    conn = libvirt.open("qemu:///system")
    try:
        out = []
        for dom in conn.listAllDomains(libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE):
            if not dom.name().startswith("vioconform-"):
                continue
            try:
                meta = dom.metadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT, METADATA_NS)
            except libvirt.libvirtError:  # gone since the listing: another run's guest that ended
                continue
            m = re.search(r"pid=['\"](\d+)['\"]", meta)
            if m and (int(m.group(1)) == os.getpid() or not Path(f"/proc/{m.group(1)}").exists()):
                out.append(dom.name())
        return out
    finally:
        conn.close()
