"""End-to-end tests: run the suite as a user does (``python -m pytest suites ...``) on real guests.

The run and its JUnit file are read by bench/suite_run.py, which the benchmarks share.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import secrets
import shlex
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import libvirt
import pytest

from bench.suite_run import (
    ROOT,
    SuiteRun,
    active_vioconform_domains,
    ctrl_c_once_the_guest_runs,
    left_behind_by,
    run_dirs_of,
    run_suite_at,
    start_suite,
)
from hypervisors.libvirt.leftovers import owner_here

__all__ = ["ROOT", "Apart", "SuiteRun", "active_vioconform_domains", "ctrl_c_once_the_guest_runs", "left_behind_by",
           "orphaned_domains", "run_dirs_of", "run_suite_at", "start_suite"]

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


@dataclass(frozen=True)
class Apart:
    """What a test that leaves a killed run's leftovers on purpose gives its runs, so that it can run
    beside other tests (tox's parallel lane) and they neither sweep its leftovers nor count them as
    leaks: another host name (a UTS namespace: the suite leaves another machine's domains alone)
    and a $TMPDIR of its own (the local run directories)."""

    machine: str
    tmpdir: Path

    @property
    def env(self) -> dict[str, str]:
        return {"TMPDIR": str(self.tmpdir)}


@pytest.fixture
def apart() -> Iterator[Apart]:
    # not in pytest's tmp_path: QEMU's user must reach the run directory (pytest's base is root's, 0700)
    top = Path(tempfile.mkdtemp(prefix="vioconform-test-apart-", dir="/var/tmp"))
    top.chmod(0o755)
    # a host name takes letters, digits and hyphens only (mkdtemp's names may hold "_": hostname refused one)
    yield Apart(f"vioconform-apart-{os.getpid()}-{secrets.token_hex(3)}", top)
    shutil.rmtree(top, ignore_errors=True)


def orphaned_domains() -> list[str]:
    """Running vioconform domains of this machine and of this process or of a process that is gone:
    what a run leaked. (Other runs' guests may be up on a shared machine; their owners are alive.
    Another machine's domains are its own: ``Apart``'s runs make some.)"""
    conn = libvirt.open("qemu:///system")
    try:
        out = []
        for dom in conn.listAllDomains(libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE):
            if not dom.name().startswith("vioconform-"):
                continue
            pid = owner_here(dom)
            if pid is not None and (pid == os.getpid() or not Path(f"/proc/{pid}").exists()):
                out.append(dom.name())
        return out
    finally:
        conn.close()


#: The host's QEMU, which the wrappers below run.
HOST_QEMU = "/usr/bin/qemu-system-x86_64"


@contextlib.contextmanager
def qemu_wrapper(name: str, extra_args: str = "", rewrite: tuple[tuple[str, str], ...] = ()) -> Iterator[Path]:
    """An emulator script ``name`` that runs the host's QEMU with ``extra_args`` after libvirt's, each
    of libvirt's arguments with every (text, replacement) of ``rewrite`` replaced in it: a QEMU build
    that does other than its command line says. libvirt runs it as the QEMU user, so it lives in a
    directory that user can read (not pytest's root-only tmp_path); removed afterwards."""
    d = Path(tempfile.mkdtemp(prefix="vioconform-emulator-"))
    try:
        d.chmod(0o755)
        w = d / name
        subs = "".join(f"; a=${{a//{shlex.quote(old)}/{shlex.quote(new)}}}" for old, new in rewrite)
        w.write_text(f'#!/bin/bash\nargs=()\nfor a in "$@"; do :{subs}; args+=("$a"); done\n'
                     f'exec {HOST_QEMU} "${{args[@]}}"{" " + extra_args if extra_args else ""}\n')
        w.chmod(0o755)
        yield w
    finally:
        shutil.rmtree(d)
