"""docs/ci-recipes.md's recipes do what they promise for every exit code, with no CI system at hand.

Each recipe's steps are read from the page: the Jenkins pipelines' ``sh`` steps and the GitLab jobs'
``before_script`` and ``script``. Every step is checked with ``sh -n`` (``bash -n`` for GitLab). The
conformance step, the one that runs the suite and ``reports.compare``, is then run as its CI system
runs it (Jenkins: ``sh -xe`` on the script; GitLab: bash after ``set -eo pipefail``) in a temporary
checkout whose ``.venv/bin/python`` is a stand-in: it records its arguments and exits with the code
the test gives the suite and ``compare``. The step's exit code goes through the recipe's own mapping
(Jenkins: its ``unstable``/``error`` lines; GitLab: ``allow_failure: exit_codes``) to a build result,
which must follow the policy of docs/reference.md's exit codes: a rule that FAILED (1) or a regression
marks a nightly build unstable and fails a gate; any other code (2 interrupted, 4 usage, 10 harness
error, 11 not stored, 12 nothing judged, pytest's own) fails the build, and ``compare`` runs only after a run that
reached its verdicts and was stored.

No YAML parser is needed (none is a dependency): the GitLab jobs are read by their indentation.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "ci-recipes.md"
#: The store's password as the CI system would set it: it must reach the suite in PGPASSWORD and
#: appear on no command line.
PASSWORD = "s3cret-store-pw"
#: Every code the suite can exit with (reports/exitcodes.py), and compare's (0, 1 regression, 2 error).
SUITE_CODES = (0, 1, 2, 3, 4, 5, 6, 10, 11, 12)
COMPARE_CODES = (0, 1, 2)
#: Seconds one recipe step may take with the stand-in python: a handful of shell built-ins and two
#: tiny processes take milliseconds; the bound only catches a step that waits for something.
STEP_TIMEOUT_S = 30.0

FAKE_PYTHON = """#!/bin/sh
printf '%s\\n' "$*" >> "$FAKE_LOG"
if [ -n "${PGPASSWORD:-}" ]; then echo "PGPASSWORD=$PGPASSWORD" >> "$FAKE_ENV"; fi
case "$*" in
  "-m pytest suites"*) exit "$FAKE_SUITE_RC" ;;
  "-m reports.compare"*) exit "$FAKE_COMPARE_RC" ;;
esac
echo "stand-in python: unexpected call: $*" >&2
exit 97
"""


@dataclass(frozen=True)
class Recipe:
    system: str  # "jenkins" or "gitlab"
    kind: str  # "nightly" or "gate"
    text: str  # the pipeline or the job, as written on the page
    setup: tuple[str, ...]  # the steps before the conformance step
    step: str  # the conformance step's shell script

    @property
    def name(self) -> str:
        return f"{self.system}-{self.kind}"


def fenced(lang: str) -> list[str]:
    """The page's fenced code blocks in ``lang``."""
    return re.findall(rf"^```{lang}\n(.*?)^```", PAGE.read_text(), re.MULTILINE | re.DOTALL)


def kind_of(text: str) -> str:
    return "gate" if "--image" in text else "nightly"


def jenkins_recipes() -> list[Recipe]:
    out = []
    for block in fenced("groovy"):
        steps = re.findall(r"sh\(returnStatus: true, script: '''\n(.*?)'''\)", block, re.DOTALL)
        assert len(steps) == 1, f"a Jenkins recipe needs exactly one sh(returnStatus: true, ...) step:\n{block}"
        setup = tuple(re.findall(r"^\s*sh '([^']*)'$", block, re.MULTILINE))
        out.append(Recipe("jenkins", kind_of(steps[0]), block, setup, steps[0]))
    return out


def yaml_items(text: str, key: str) -> list[str]:
    """The items of a job's list ``key`` (``before_script``, ``script``): plain ``- item`` lines or
    ``- |`` block scalars, dedented, read by indentation."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == f"{key}:")
    indent = len(lines[start]) - len(lines[start].lstrip())
    items: list[str] = []
    i = start + 1
    while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > indent):
        line = lines[i]
        if line.strip() == "- |":
            dash = len(line) - len(line.lstrip())
            body = []
            i += 1
            while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > dash):
                body.append(lines[i])
                i += 1
            cut = min(len(b) - len(b.lstrip()) for b in body if b.strip())
            items.append("\n".join(b[cut:] for b in body).strip("\n") + "\n")
            continue
        if line.strip().startswith("- "):
            items.append(line.strip()[2:])
        i += 1
    return items


def gitlab_recipes() -> list[Recipe]:
    out = []
    for block in fenced("yaml"):
        script = yaml_items(block, "script")
        assert len(script) == 1, f"a GitLab recipe's script is one block:\n{block}"
        out.append(Recipe("gitlab", kind_of(script[0]), block, tuple(yaml_items(block, "before_script")),
                          script[0]))
    return out


def recipes() -> list[Recipe]:
    return jenkins_recipes() + gitlab_recipes()


def test_the_page_has_both_recipes_for_both_systems() -> None:
    assert sorted(r.name for r in recipes()) == ["gitlab-gate", "gitlab-nightly", "jenkins-gate", "jenkins-nightly"]


def test_no_step_swallows_an_exit_code() -> None:
    text = PAGE.read_text()
    code = "\n".join(fenced("groovy") + fenced("yaml"))
    for swallow in ("|| true", "|| :", "set +e", "|| exit 0", "catchError"):
        assert swallow not in code, f"a recipe on {PAGE.name} swallows an exit code with {swallow!r}"
    assert "allow_failure: true" not in text


@pytest.mark.parametrize("recipe", recipes(), ids=lambda r: r.name)
def test_every_shell_step_parses(recipe: Recipe, tmp_path: Path) -> None:
    shell = "bash" if recipe.system == "gitlab" else "sh"
    for n, step in enumerate((*recipe.setup, recipe.step)):
        path = tmp_path / f"step{n}.sh"
        path.write_text(step)
        done = subprocess.run([shell, "-n", str(path)], capture_output=True, text=True, timeout=STEP_TIMEOUT_S,
                              check=False)
        assert done.returncode == 0, f"{recipe.name}: {shell} -n fails on:\n{step}\n{done.stderr}"
    assert recipe.setup, f"{recipe.name}: no set-up step (scripts/setup-host.sh, the virtual environment)"
    assert any("scripts/setup-host.sh" in s for s in recipe.setup)
    if recipe.system == "jenkins":
        # Groovy reads escapes (a backslash-newline joins lines) inside ''': the shell must hold none.
        assert "\\" not in recipe.step, f"{recipe.name}: a backslash in a Groovy ''' string changes the shell"


@dataclass(frozen=True)
class Build:
    result: str  # "SUCCESS", "UNSTABLE", "FAILURE"
    step_exit: int
    calls: tuple[tuple[str, ...], ...]
    environment: str
    output: str


def build_result(recipe: Recipe, step_exit: int) -> str:
    """What the CI system makes of the step's exit code, by the recipe's own mapping."""
    if recipe.system == "jenkins":
        mapping = re.search(r"if \(rc == 1\) \{ (unstable|error)\(.*\n\s*else if \(rc != 0\) \{ error\(", recipe.text)
        assert mapping, f"{recipe.name}: no 'if (rc == 1) {{ unstable|error(...) }} else if (rc != 0) {{ error(...) }}'"
        if step_exit == 0:
            return "SUCCESS"
        return "UNSTABLE" if step_exit == 1 and mapping.group(1) == "unstable" else "FAILURE"
    allowed = re.search(r"^  allow_failure:\n    exit_codes: \[([\d, ]*)\]$", recipe.text, re.MULTILINE)
    codes = {int(c) for c in allowed.group(1).split(",")} if allowed else set()
    if step_exit == 0:
        return "SUCCESS"
    return "UNSTABLE" if step_exit in codes else "FAILURE"  # GitLab: "passed with warnings"


def run_build(recipe: Recipe, tmp: Path, suite_rc: int, compare_rc: int, build: int = 41,
              step: str | None = None) -> Build:
    """The conformance step in a fresh checkout under ``tmp``, as the CI system runs it."""
    checkout = tmp / f"checkout-{build}-{suite_rc}-{compare_rc}"
    venv_bin = checkout / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    fake_bin = tmp / "bin"  # a python on PATH too: a step that missed .venv must not reach a real one
    fake_bin.mkdir(exist_ok=True)
    for where in (venv_bin / "python", fake_bin / "python", fake_bin / "python3"):
        where.write_text(FAKE_PYTHON)
        where.chmod(0o755)
    log, env_log = checkout / "calls.log", checkout / "env.log"
    env = {"PATH": f"{fake_bin}:/usr/bin:/bin", "HOME": str(tmp), "PGPASSWORD": PASSWORD,
           "FAKE_LOG": str(log), "FAKE_ENV": str(env_log), "FAKE_SUITE_RC": str(suite_rc),
           "FAKE_COMPARE_RC": str(compare_rc), "LC_ALL": "C"}
    script = checkout / "step.sh"
    if recipe.system == "jenkins":
        env.update(BUILD_NUMBER=str(build), IMAGE="/srv/images/candidate.qcow2", WORKSPACE=str(checkout))
        script.write_text(step if step is not None else recipe.step)
        argv = ["sh", "-xe", str(script)]
    else:
        env.update(CI_JOB_ID=str(build), CI_PROJECT_DIR=str(checkout))
        script.write_text("set -eo pipefail\n" + (step if step is not None else recipe.step))
        argv = ["bash", str(script)]
    done = subprocess.run(argv, cwd=checkout, env=env, capture_output=True, text=True, timeout=STEP_TIMEOUT_S,
                          check=False)
    calls = tuple(tuple(shlex.split(line)) for line in log.read_text().splitlines()) if log.exists() else ()
    environment = env_log.read_text() if env_log.exists() else ""
    return Build(build_result(recipe, done.returncode), done.returncode, calls, environment,
                 done.stdout + done.stderr)


def expected_result(kind: str, suite_rc: int, compare_rc: int) -> str:
    """The policy (docs/reference.md, exit codes; issue 25 Must 6): what the build must say."""
    if suite_rc not in (0, 1) or compare_rc not in (0, 1):
        return "FAILURE"  # interrupted, usage, harness error, not stored, pytest's own; compare could not compare
    if suite_rc == 0 and compare_rc == 0:
        return "SUCCESS"
    return "UNSTABLE" if kind == "nightly" else "FAILURE"  # a FAILED rule or a regression


def option(call: tuple[str, ...], name: str) -> str:
    return call[call.index(name) + 1]


CASES = [(s, c) for s in SUITE_CODES for c in (COMPARE_CODES if s in (0, 1) else (0,))]


@pytest.mark.parametrize("recipe", recipes(), ids=lambda r: r.name)
def test_the_build_result_follows_every_exit_code(recipe: Recipe, tmp_path: Path) -> None:
    wrong = []
    for suite_rc, compare_rc in CASES:
        b = run_build(recipe, tmp_path, suite_rc, compare_rc)
        want = expected_result(recipe.kind, suite_rc, compare_rc)
        if b.result != want:
            wrong.append(f"suite {suite_rc}, compare {compare_rc}: {b.result} (step exit {b.step_exit}), "
                         f"expected {want}\n{b.output}")
        suite = [c for c in b.calls if c[:3] == ("-m", "pytest", "suites")]
        compare = [c for c in b.calls if c[:2] == ("-m", "reports.compare")]
        assert len(suite) == 1, f"{recipe.name}: the suite ran {len(suite)} times:\n{b.output}"
        if suite_rc in (0, 1):
            assert len(compare) == 1, f"{recipe.name}: suite {suite_rc}: compare ran {len(compare)} times"
            # this build's run, by its results directory, against the previous one in the same store
            assert option(compare[0], "--last") == "2"
            assert option(suite[0], "--results-dir") in compare[0]
            assert option(compare[0], "--store") == option(suite[0], "--store")
        else:
            assert not compare, f"{recipe.name}: compare ran after exit {suite_rc}: no stored verdicts to compare"
    assert not wrong, f"{recipe.name}:\n" + "\n".join(wrong)


@pytest.mark.parametrize("recipe", recipes(), ids=lambda r: r.name)
def test_each_build_writes_a_new_results_directory_into_postgresql_without_a_password_on_a_command_line(
        recipe: Recipe, tmp_path: Path) -> None:
    first, second = run_build(recipe, tmp_path, 0, 0, build=41), run_build(recipe, tmp_path, 0, 0, build=42)
    dirs = [option(b.calls[0], "--results-dir") for b in (first, second)]
    assert dirs[0] != dirs[1] and "41" in dirs[0] and "42" in dirs[1], dirs
    store = option(first.calls[0], "--store")
    assert store.startswith("postgresql://") and ":" not in store.split("//", 1)[1].split("@", 1)[0], store
    for b in (first, second):
        assert f"PGPASSWORD={PASSWORD}" in b.environment, "the suite and compare must get the password in PGPASSWORD"
        assert not any(PASSWORD in arg for call in b.calls for arg in call)
    # the JUnit files the CI system publishes are this build's run and comparison
    published = re.findall(r"results/(?:build|job)-[^\s,'\"]*\.xml", recipe.text)
    assert {p.rsplit("/", 1)[1] for p in published} == {"junit.xml", "compare.xml"}, published
    for p in published:
        path = p.replace("${env.BUILD_NUMBER}", "41")
        assert fnmatch.fnmatch(f"{dirs[0]}/{p.rsplit('/', 1)[1]}", path), (p, dirs[0])
    # the job names its series, so that --last 2 finds the job's previous run whatever the image's file name
    assert option(first.calls[0], "--series") == option(second.calls[0], "--series")
    if recipe.kind == "gate":
        assert option(first.calls[0], "--image")


def test_a_swallowed_exit_code_would_be_caught(tmp_path: Path) -> None:
    """The check has teeth: the suite's step with ``|| true`` lets a harness error (10) and a result
    that was not stored (11) reach a green build, which the policy refuses."""
    recipe = next(r for r in recipes() if r.name == "jenkins-nightly")
    swallowing = re.sub(r"(python -m pytest suites [^\n]*?) \|\| rc=\$\?", r"\1 || true", recipe.step)
    assert swallowing != recipe.step
    for code in (10, 11, 4):
        b = run_build(recipe, tmp_path / str(code), code, 0, step=swallowing)
        assert b.result == "SUCCESS" != expected_result("nightly", code, 0)
