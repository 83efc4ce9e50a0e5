"""The redaction plugin (fixtures/redact.py) masks a registered secret that does reach a report.

Test code here leaks two secrets on purpose: one from ``VIOCONFORM_VCENTER_PASSWORD``, one read
from a password file into a ``Secret``, through every channel a test has (a frame's arguments and
locals, the exception message, stdout, stderr, log records with and without a traceback, a fixture
error, a collection error). A real pytest runs it with vioconform's plugins under each option
that shows more; no output file and no stream may contain either secret.
"""

from __future__ import annotations

import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures import PLUGIN_MODULES

ROOT = Path(__file__).resolve().parents[2]
#: The whole plugin, the redaction registered last: with ``-p`` its tryfirst hooks then run first among
#: the plugin's, as conftest.py's order (redaction first, each module's configure as it registers) makes them.
PLUGINS = ("fixtures.options", *(m for m in PLUGIN_MODULES if m != "fixtures.redact"), "fixtures.redact")

LEAKY_TESTS = '''
import logging, os, sys
from pathlib import Path
import pytest
from model.secret import Secret

log = logging.getLogger("leaky")

def leak(value):
    copy = value
    print("stdout:", copy)
    print("stderr:", copy, file=sys.stderr)
    log.warning("log: %s", copy)
    try:
        raise KeyError(copy)
    except KeyError:
        log.exception("with traceback")
    raise RuntimeError(f"failed with {copy}")

@pytest.fixture
def broken():
    leak(os.environ["VIOCONFORM_VCENTER_PASSWORD"])

@pytest.mark.rule("leak-env")
def test_env():
    environment = dict(os.environ)
    leak(os.environ["VIOCONFORM_VCENTER_PASSWORD"])

@pytest.mark.rule("leak-file")
def test_file():
    leak(Secret(Path(os.environ["LEAKY_PASSWORD_FILE"]).read_text()).reveal())

@pytest.mark.rule("leak-fixture")
def test_fixture(broken):
    pass
'''

LEAKY_COLLECTION = '''
import os
raise RuntimeError("cannot import: " + os.environ["VIOCONFORM_VCENTER_PASSWORD"])
'''

OPTION_SETS = {
    "default": [],
    "l": ["-l"],
    "tb-long": ["--tb=long", "-l"],
    "showlocals-vv": ["--showlocals", "-vv"],
    "log-cli-debug": ["-o", "log_cli=true", "-o", "log_cli_level=DEBUG", "--log-file", "{tmp}/log.txt",
                      "--log-file-level", "DEBUG"],
    "full-trace": ["--full-trace", "-l"],
    "tb-native": ["--tb=native"],
    "junitxml": ["--junitxml", "{tmp}/elsewhere/junit.xml", "-l"],
    # pytest's own JUnit writer, which vioconform's session plugin otherwise replaces
    "pytest-junitxml": ["-p", "no:fixtures.session", "--junitxml", "{tmp}/pytest-junit.xml", "-l", "-rA"],
}


@pytest.mark.parametrize("options", OPTION_SETS.values(), ids=OPTION_SETS.keys())
def test_no_secret_in_any_output(tmp_path: Path, options: list[str]) -> None:
    env_secret, file_secret = f"envpw-{secrets.token_hex(8)}", f"filepw-{secrets.token_hex(8)}"
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "pw").write_text(file_secret)
    (tmp_path / "test_leaky.py").write_text(LEAKY_TESTS)
    (tmp_path / "test_leaky_import.py").write_text(LEAKY_COLLECTION)
    plugins = [arg for p in PLUGINS for arg in ("-p", p)]
    args = [a.format(tmp=tmp_path) for a in options]
    run = subprocess.run(
        [sys.executable, "-m", "pytest", *plugins, "-p", "no:cacheprovider", "--continue-on-collection-errors",
         "--rootdir", str(tmp_path), "--results-dir", str(tmp_path / "results"), *args, str(tmp_path)],
        check=False, cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "VIOCONFORM_VCENTER_PASSWORD": env_secret,
             "LEAKY_PASSWORD_FILE": str(inputs / "pw")})
    out = run.stdout + run.stderr
    # errors, no rule failed: a harness error (6); pytest's own 1 where vioconform's session is not loaded
    assert run.returncode == (1 if "no:fixtures.session" in options else 10), out
    assert "failed with ***" in out and "2 failed, 2 errors" in out, out
    written = [p for p in tmp_path.rglob("*") if p.is_file() and inputs not in p.parents]
    assert any(p.name.endswith("junit.xml") for p in written), written
    for name, text in [("stdout", run.stdout), ("stderr", run.stderr)] + \
            [(str(p), p.read_text(errors="replace")) for p in written]:
        for secret in (env_secret, file_secret):
            assert secret not in text, f"{secret} in {name}:\n{text}"
