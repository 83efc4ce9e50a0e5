"""One step of a bisect (``python -m reports.bisect``): test one candidate and say what it saw.

Two ways to test, each a subprocess, so a step's guest lives and ends with its own run:

- the suite itself (:class:`SuiteStep`): ``python -m pytest suites -k RULE --emulator BUILD`` (or
  ``--guest-kernel-deb DEB`` / ``--guest-kernel VERSION`` for a guest kernel) with the user's suite
  options, its results in the step's own directory; the verdict and the repeats' counts come from the
  run's JUnit file (the rule's cases: ``repeats`` and ``repeats_passed`` where it repeated);
- a reproducer bundle's replay (:class:`ReplayStep`): ``BUNDLE/replay --qemu BUILD [--repeats N] --out
  DIR``, whose exit code is the verdict (0 passes, 1 fails, 125 cannot test); where its output says
  ``K of N repeats failed`` those are the counts, else the replay's one verdict counts as one.

A build from a source tree (:class:`BuiltStep`) checks the commit out in a worktree of its own, runs the
user's build command there, and hands the built QEMU to one of the above; a build that fails is a skip.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from model.bisect import StepResult, Verdict

#: The checkout the suite runs from (``python -m pytest suites``).
ROOT = Path(__file__).resolve().parents[1]
#: The ``git bisect run`` convention the replay follows: 125 is "cannot test this one".
CANNOT_TEST = 125
#: What a replay prints about its repeats (issue 36: it "says how many of the repeats failed").
REPLAY_COUNTS = re.compile(r"\b(\d+) of (\d+) repeat(?:s|\(s\))? failed\b", re.IGNORECASE)
#: A step that has not ended after this long is stopped (SIGTERM: the suite ends its guest as on
#: Ctrl-C) and skipped. One step of one rule costs a guest boot and the rule: minutes under TCG.
DEFAULT_STEP_TIMEOUT_S = 3600.0
#: What a step writes its command's output to, in its directory.
LOG_NAME = "output.log"

class Terminated(KeyboardInterrupt):
    """SIGTERM to the bisect: unlike Ctrl-C, which the whole process group gets, the running step's
    child did not see it, so it is passed on (the suite ends its guest on SIGTERM as on Ctrl-C)."""


#: A step's test: the candidate (a QEMU path, a kernel) and the step's own new directory.
Tester = Callable[[str, Path], StepResult]


def rule_cases(junit: Path, rule: str) -> list[tuple[str, int, int]]:
    """(outcome, repeats failed, repeats) of each of ``rule``'s test cases in a suite run's JUnit file;
    outcome is passed, failed, error or skipped. OSError or ET.ParseError when the file is unreadable."""
    root = ET.parse(junit).getroot()
    found = []
    for case in root.iter("testcase"):
        if case.get("name", "").partition("[")[0] != rule:
            continue
        kind = next((k for k in ("failure", "error", "skipped") if case.find(k) is not None), "passed")
        props = {p.get("name", ""): p.get("value", "") for p in case.iterfind("properties/property")}
        outcome = {"failure": "failed"}.get(kind, kind)
        try:
            repeats, passed = int(props["repeats"]), int(props["repeats_passed"])
        except (KeyError, ValueError):  # one measurement: its own verdict
            repeats, passed = 1, 0 if outcome == "failed" else 1
        found.append((outcome, repeats - passed, repeats))
    return found


def suite_verdict(junit: Path, rule: str, returncode: int) -> StepResult:
    """A suite run's answer for ``rule``: FAIL when a case of it failed, PASS when every case passed,
    SKIP when none reached a verdict (an ERROR: the guest did not boot, the harness failed; or a SKIP),
    with the repeats of its cases summed."""
    try:
        cases = rule_cases(junit, rule)
    except (OSError, ET.ParseError) as e:
        return StepResult(Verdict.SKIP, 0, 0, f"the suite exited {returncode} and wrote no readable JUnit file: {e}")
    judged = [c for c in cases if c[0] in ("passed", "failed")]
    said = ", ".join(sorted({c[0] for c in cases if c not in judged})) or "no test case of it"
    if not judged:
        return StepResult(Verdict.SKIP, 0, 0, f"{rule} reached no verdict ({said}; the suite exited {returncode})")
    if len(judged) < len(cases) and not any(c[0] == "failed" for c in judged):
        return StepResult(Verdict.SKIP, 0, 0, f"{rule} passed on {len(judged)} of {len(cases)} configurations and "
                                              f"reached no verdict on the others ({said}): not a pass")
    verdict = Verdict.FAIL if any(c[0] == "failed" for c in judged) else Verdict.PASS
    return StepResult(verdict, sum(c[1] for c in judged), sum(c[2] for c in judged))


def _run_logged(cmd: Sequence[str], log: Path, timeout_s: float, cwd: Path | None = None,
                env: dict[str, str] | None = None) -> int | None:
    """Run ``cmd``, its stdout and stderr into ``log``; its exit code, or None after ``timeout_s``
    (it got SIGTERM, then SIGKILL a minute later)."""
    with log.open("w") as out:
        proc = subprocess.Popen(list(cmd), stdout=out, stderr=subprocess.STDOUT, cwd=cwd,
                                env={**os.environ, **(env or {})})
        try:
            return proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.terminate()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            return None
        except BaseException as e:  # Ctrl-C: the child got it too (one process group); wait for its clean-up
            if isinstance(e, Terminated):
                proc.terminate()
            proc.wait()
            raise


def candidate_option(candidate: str, kernels: bool) -> list[str]:
    """The suite option that puts ``candidate`` under test: ``--emulator PATH``; for a guest kernel a
    package file (``.deb``) is ``--guest-kernel-deb``, anything else a version apt has (``--guest-kernel``)."""
    if not kernels:
        return ["--emulator", candidate]
    return ["--guest-kernel-deb" if candidate.endswith(".deb") else "--guest-kernel", candidate]


@dataclass(frozen=True)
class SuiteStep:
    """The suite run on one candidate for one rule (``rule``: its name, ``queue-depth``)."""

    rule: str
    suite_options: tuple[str, ...] = ()
    repeats: int | None = None
    #: each step's run goes into this store under ``series`` (None: stored nowhere)
    store: str | None = None
    series: str = ""
    kernels: bool = False
    timeout_s: float = DEFAULT_STEP_TIMEOUT_S

    def command(self, candidate: str, results: Path) -> list[str]:
        stored = ["--store", self.store, "--series", self.series] if self.store else ["--store", "none"]
        return [sys.executable, "-m", "pytest", "suites", "-p", "no:cacheprovider", "-k", self.rule.replace("-", "_"),
                *candidate_option(candidate, self.kernels), "--results-dir", str(results), *stored,
                *(["--repeats", str(self.repeats)] if self.repeats else []), *self.suite_options]

    def __call__(self, candidate: str, step_dir: Path) -> StepResult:
        results = step_dir / "results"
        code = _run_logged(self.command(candidate, results), step_dir / LOG_NAME, self.timeout_s, cwd=ROOT)
        if code is None:
            return StepResult(Verdict.SKIP, 0, 0, f"the suite did not finish in {self.timeout_s:g} s")
        result = suite_verdict(results / "junit.xml", self.rule, code)
        return StepResult(result.verdict, result.failed, result.repeats, result.note or f"results in {results}")


def replay_counts(output: str, code: int) -> tuple[int, int]:
    """(repeats failed, repeats) of a replay: the last ``K of N repeat(s) FAILED`` it printed (replay/main.py's last line), else its
    exit code as one verdict (1 of 1 for a failure, 0 of 1 for a pass)."""
    said = REPLAY_COUNTS.findall(output)
    if said:
        failed, repeats = (int(x) for x in said[-1])
        if 0 <= failed <= repeats:
            return failed, repeats
    return (1 if code == 1 else 0), 1


@dataclass(frozen=True)
class ReplayStep:
    """A reproducer bundle's ``replay`` run on one QEMU build."""

    bundle: Path
    repeats: int | None = None
    timeout_s: float = DEFAULT_STEP_TIMEOUT_S

    def __call__(self, candidate: str, step_dir: Path) -> StepResult:
        log = step_dir / LOG_NAME
        cmd = [str(self.bundle.resolve() / "replay"), "--qemu", candidate, "--out", str(step_dir / "replay"),
               *(["--repeats", str(self.repeats)] if self.repeats else [])]
        code = _run_logged(cmd, log, self.timeout_s, cwd=step_dir)
        if code is None:
            return StepResult(Verdict.SKIP, 0, 0, f"the replay did not finish in {self.timeout_s:g} s")
        if code not in (0, 1):
            what = "cannot test" if code == CANNOT_TEST else "an exit code a replay does not give"
            return StepResult(Verdict.SKIP, 0, 0, f"the replay exited {code} ({what}; its output: {log})")
        failed, repeats = replay_counts(log.read_text(errors="replace"), code)
        return StepResult(Verdict.FAIL if code == 1 else Verdict.PASS, failed, repeats, f"output in {log}")


def commits_between(repo: Path, good: str, bad: str) -> list[str]:
    """The commits from ``good`` to ``bad`` in build order (first-parent history): good first, bad
    last. ValueError with git's own words when either is not a commit or good is no ancestor of bad."""
    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False)
        if done.returncode:
            raise ValueError(f"git {' '.join(args)} in {repo}: {done.stderr.strip() or done.stdout.strip()}")
        return done.stdout.strip()
    g, b = git("rev-parse", "--verify", f"{good}^{{commit}}"), git("rev-parse", "--verify", f"{bad}^{{commit}}")
    if subprocess.run(["git", "-C", str(repo), "merge-base", "--is-ancestor", g, b], check=False).returncode:
        raise ValueError(f"--good {good} is not an ancestor of --bad {bad} in {repo}: give the older, passing commit "
                         "as --good")
    return [g, *git("rev-list", "--first-parent", "--reverse", f"{g}..{b}").split()]


@dataclass(frozen=True)
class BuiltStep:
    """A commit of a source tree checked out in a worktree of its own under ``workdir``, built with
    ``build`` (a shell command run there), and tested on ``built`` (the built QEMU's path in the
    worktree) by ``test``. The worktree is removed after the step."""

    repo: Path
    build: str
    built: str
    test: Tester
    #: where the worktrees go: readable by the QEMU user libvirt runs the emulator as
    workdir: Path
    timeout_s: float = DEFAULT_STEP_TIMEOUT_S

    def __call__(self, commit: str, step_dir: Path) -> StepResult:
        tree = self.workdir / commit[:12]
        log = step_dir / "build.log"
        added = subprocess.run(["git", "-C", str(self.repo), "worktree", "add", "--detach", str(tree), commit],
                               capture_output=True, text=True, check=False)
        if added.returncode:
            return StepResult(Verdict.SKIP, 0, 0, f"git worktree add failed: {added.stderr.strip()}")
        try:
            code = _run_logged(["sh", "-c", self.build], log, self.timeout_s, cwd=tree)
            qemu = tree / self.built
            if code != 0:
                said = "did not finish" if code is None else f"exited {code}"
                return StepResult(Verdict.SKIP, 0, 0, f"the build {said} (its output: {log})")
            if not os.access(qemu, os.X_OK):
                return StepResult(Verdict.SKIP, 0, 0, f"the build made no executable {self.built} (its output: {log})")
            return self.test(str(qemu), step_dir)
        finally:
            subprocess.run(["git", "-C", str(self.repo), "worktree", "remove", "--force", str(tree)],
                           capture_output=True, check=False)
            shutil.rmtree(tree, ignore_errors=True)
