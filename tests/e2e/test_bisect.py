"""Bisect on real guests: a row of QEMU builds (wrappers of the host's QEMU; from one point on they add
virtio-scsi's cmd_per_lun=1, which fails the limits rule, as tests/e2e/test_qemu_build.py's build does) is
bisected with the suite as the step, and the same row as commits of a git repository through the user's
own ``git bisect run`` with ``python -m reports.bisect --one``. One rule (limits: one guest boot and a
few reads, no repeats) on one controller, so each step is one short run."""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import HOST_QEMU, ROOT, orphaned_domains, qemu_wrapper

#: What the broken builds add: the device advertises a queue depth of 1 (limits fails, blamed on the hypervisor).
BREAKS = "-global virtio-scsi-pci.cmd_per_lun=1"
SUITE = ("--", "--controllers", "virtio-scsi")


@pytest.fixture
def four_builds() -> Iterator[list[Path]]:
    """Two healthy builds, then two broken ones."""
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(qemu_wrapper(f"qemu-{n}", BREAKS if n >= 2 else "")) for n in range(4)]


@pytest.mark.long
def test_a_row_of_builds_is_bisected_to_the_first_broken_one(four_builds: list[Path], tmp_path: Path) -> None:
    listing = tmp_path / "builds.txt"
    listing.write_text("".join(f"{b}\n" for b in four_builds))
    store = tmp_path / "bisect.db"
    done = subprocess.run([sys.executable, "-m", "reports.bisect", "--builds", str(listing), "--rule", "limits",
                           "--store", f"sqlite:///{store}", "--out", str(tmp_path / "out"), *SUITE],
                          cwd=ROOT, capture_output=True, text=True, timeout=3600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert f"first bad build: {four_builds[2]}" in lines and f"last good build: {four_builds[1]}" in lines
    steps = [line for line in lines if line.startswith("step ")]
    # the ends, the middle (1, then 2), and the culprit and the build before it confirmed
    assert [s.split(":")[0] for s in steps] == [
        f"step 1 (bad end) {four_builds[3]}", f"step 2 (good end) {four_builds[0]}", f"step 3 (bisect) {four_builds[1]}",
        f"step 4 (bisect) {four_builds[2]}", f"step 5 (confirm) {four_builds[2]}", f"step 6 (confirm) {four_builds[1]}"]
    assert "bad: failed 1 of 1, as often as the bad end (1 of 1)" in steps[3], steps
    assert "good: passed: 0 of 1 repeat failed" in steps[2], steps
    with contextlib.closing(sqlite3.connect(store)) as db:
        assert db.execute("SELECT series, count(*) FROM runs GROUP BY series").fetchall() == [("bisect_limits", 6)]
    assert orphaned_domains() == []


@contextlib.contextmanager
def source_tree() -> Iterator[tuple[Path, list[str]]]:
    """A git repository of four commits whose build (``sh build.sh``) makes build/qemu-system-x86_64: a
    wrapper of the host's QEMU, broken from the third commit on. In a directory the QEMU user can read."""
    repo = Path(tempfile.mkdtemp(prefix="vioconform-bisect-src-", dir="/var/tmp"))
    try:
        repo.chmod(0o755)

        def git(*args: str) -> str:
            return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                                  check=True).stdout.strip()
        git("init", "-q", "-b", "main")
        git("config", "user.email", "t@example.org")
        git("config", "user.name", "t")
        commits = []
        for n in range(4):
            extra = f" {BREAKS}" if n >= 2 else ""
            (repo / "build.sh").write_text(
                f"mkdir -p build && printf '#!/bin/bash\\nexec {HOST_QEMU} \"$@\"{extra}\\n' > build/qemu-system-x86_64"
                " && chmod 755 build build/qemu-system-x86_64\n")
            (repo / "version").write_text(f"{n}\n")
            git("add", "build.sh", "version")
            git("commit", "-qm", f"commit {n}")
            commits.append(git("rev-parse", "HEAD"))
        yield repo, commits
    finally:
        shutil.rmtree(repo, ignore_errors=True)


@pytest.mark.long
def test_git_bisect_run_with_one_step_names_the_first_broken_commit(tmp_path: Path) -> None:
    with source_tree() as (repo, commits):
        step = (f'sh build.sh || exit 125; cd {ROOT} && exec {sys.executable} -m reports.bisect --rule limits '
                f'--one "$OLDPWD/build/qemu-system-x86_64" --out "{tmp_path}/step-$(git -C "$OLDPWD" rev-parse --short '
                f'HEAD)" {" ".join(SUITE)}')
        subprocess.run(["git", "-C", str(repo), "bisect", "start", commits[3], commits[0]], check=True,
                       capture_output=True)
        done = subprocess.run(["git", "-C", str(repo), "bisect", "run", "sh", "-c", step], capture_output=True,
                              text=True, timeout=3600, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"{commits[2]} is the first bad commit" in done.stdout, done.stdout
        tested = sorted(p.name for p in tmp_path.glob("step-*"))
        assert 1 <= len(tested) <= 2, tested  # git bisect re-checks no end: the two middle commits at most
    assert orphaned_domains() == []
