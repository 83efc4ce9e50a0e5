"""The README's suite command and every recipe of the README and docs/, verbatim, through Debian's tox
(``/usr/bin/tox``, 3.28) and ``./vioconform``, in a copy of the checkout: each recipe's arguments reach
pytest exactly as the shell gave them (``{disk}`` included), pytest's exit code comes back unchanged
(1, 10, 12, 4, 2), a real usage error exits 4, and ``./vioconform --help`` and ``tox -e suite -- --help``
work. Before, the README ran ``tox -e suite -- ARGS``: tox stopped on ``{disk}`` with ``ConfigError:
substitution key 'disk' not found``, and every non-zero exit code reached the user as 1.

The recipes' arguments are read by a pytest plugin (tests/plugins/echo_args.py, loaded with ``-p`` right
after ``./vioconform``) that records them and exits with the code the test gives it, before any option is
checked: no guest starts, and a recipe's files (an image, a hosts file) need not exist."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.unit.test_readme_commands import ROOT, WRAPPER, recipes

TOX = Path("/usr/bin/tox")
#: The exit codes the recipes' runs end with, in turn: a FAILED rule, a harness error, nothing judged,
#: a usage error, an interrupted run.
CODES = (1, 10, 12, 4, 2)
#: One ./vioconform run: tox's set-up check (pip is skipped once its stamp matches), then pytest. The
#: first run creates .tox/suite and installs the requirements: 70 s here at load 12; the bound only
#: catches a run that hangs.
RUN_TIMEOUT_S = 900

#: What a copy of the checkout leaves out: what runs make in it.
NOT_COPIED = shutil.ignore_patterns(".git", ".tox", "results", "__pycache__", ".venv", ".mypy_cache", ".ruff_cache")

pytestmark = [pytest.mark.long, pytest.mark.skipif(not TOX.exists(), reason="Debian's tox is not installed")]


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the checkout (without its .tox, results and git data): ./vioconform makes .tox/suite in it,
    never in the real one."""
    dest = tmp_path_factory.mktemp("checkout") / "vioconform"
    shutil.copytree(ROOT, dest, symlinks=True, ignore=NOT_COPIED)
    return dest


def _bash(checkout: Path, script: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``script`` as a user's shell runs it, in the copy; the host already set up (CI did it), so the set-up
    skips the Debian part."""
    return subprocess.run(["bash", "-c", script], cwd=checkout, capture_output=True, text=True, check=False,
                          timeout=RUN_TIMEOUT_S, env={**os.environ, "VIOCONFORM_SKIP_HOST_SETUP": "1", **env})


def _shell_words(checkout: Path, words: str) -> list[str]:
    """What the shell makes of ``words`` (quotes, ``~``, comments): the arguments the wrapper is given."""
    done = _bash(checkout, f'set -- {words}\nprintf "%s\\0" "$@"')
    assert done.returncode == 0, done.stderr
    return done.stdout.split("\0")[:-1]


def test_help_installs_nothing_on_the_host_and_lists_the_options(checkout: Path) -> None:
    # without VIOCONFORM_SKIP_HOST_SETUP: --help must not need it
    done = subprocess.run(["bash", "-c", f"{WRAPPER} --help"], cwd=checkout, capture_output=True, text=True,
                          check=False, timeout=RUN_TIMEOUT_S,
                          env={k: v for k, v in os.environ.items() if k != "VIOCONFORM_SKIP_HOST_SETUP"})
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    assert "vioconform: storage conformance of virtualized guests:" in out and "--require=RULE,..." in out
    assert "vioconform setup:" not in out, out[-3000:]  # scripts/setup-host.sh never ran
    tox_help = subprocess.run([str(TOX), "-e", "suite", "--", "--help"], cwd=checkout, capture_output=True,
                              text=True, check=False, timeout=RUN_TIMEOUT_S)
    assert tox_help.returncode == 0 and "vioconform: storage conformance" in tox_help.stdout, tox_help.stdout[-3000:]
    assert "vioconform setup:" not in tox_help.stdout + tox_help.stderr


def test_every_recipe_reaches_pytest_verbatim_and_its_exit_code_comes_back(checkout: Path, tmp_path: Path) -> None:
    # A recipe whose argument is another command's output (the test image's path) is left out: running it
    # builds that image; its ./vioconform part is the same as the others'.
    runnable = [(where, text) for where, text in recipes() if "$(" not in text]
    assert any("{disk}" in text for _, text in runnable), runnable
    for (where, text), code in zip(runnable, itertools.cycle(CODES), strict=False):
        echoed = tmp_path / "args.json"
        echoed.unlink(missing_ok=True)
        rest = text.removeprefix(WRAPPER)
        done = _bash(checkout, f"{WRAPPER} -p tests.plugins.echo_args{rest}", ECHO_ARGS_FILE=str(echoed),
                     ECHO_EXIT=str(code))
        out = done.stdout + done.stderr
        assert done.returncode == code, f"{where}: {text}\n{out[-3000:]}"
        assert "ConfigError" not in out, f"{where}: {out[-3000:]}"
        given = json.loads(echoed.read_text())
        expected = ["-p", "tests.plugins.echo_args", *_shell_words(checkout, rest)]
        assert given[-len(expected):] == expected, f"{where}: {text}\npytest got {given}"


def test_a_usage_error_exits_4_through_the_wrapper(checkout: Path) -> None:
    done = _bash(checkout, f"{WRAPPER} --guest-setup 'echo 2 > /sys/block/{{disk}}/device/queue_depth' "
                           "--window-s nope")
    out = done.stdout + done.stderr
    assert done.returncode == 4, out[-3000:]
    assert "argument --window-s: 'nope' is not a number" in out, out[-3000:]


def test_a_set_up_that_fails_is_a_harness_error(tmp_path: Path) -> None:
    """tox's own failure (here its set-up script exits 3) is no rule's verdict: 10, never tox's 1."""
    copy = tmp_path / "vioconform"
    shutil.copytree(ROOT, copy, symlinks=True, ignore=NOT_COPIED)
    (copy / "scripts" / "tox-prepare.sh").write_text("echo 'no network for pip' >&2\nexit 3\n")
    done = _bash(copy, f"{WRAPPER} --controllers virtio-blk")
    out = done.stdout + done.stderr
    assert done.returncode == 10, out[-3000:]
    assert "no network for pip" in out and "vioconform: the set-up failed (tox -e suite-setup, above): no rule ran" in out
    assert "collected" not in out  # pytest never started
