"""No vCenter password reaches any output of a suite run, whatever pytest options show more.

The real suite (``python -m pytest suites --hypervisor vsphere``) runs in a clean environment on
each failing path with a known, unique password, under each option that prints more (locals,
long tracebacks, live DEBUG logs, pytest internals); then its stdout, stderr and every file it
wrote (both JUnit files, report.html, the log file, the whole results directory, the run's own
results store) are searched for the password.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from hypervisors.vsphere.config import TARGET_EXAMPLE
from model.secret import PASSWORD_ENV
from tests.vsphere.vsphere_sim import CLUSTER, SIM_USER, TEMPLATE, Sim, closed_port

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class FailingPath:
    """A failing path: the target, where the password comes from, what the run must say."""

    target: str
    password: str
    expect: str
    returncode: int
    password_file: Path | None = None


def _sim_url(sim: Sim, datastore: str = "no-such-ds") -> str:
    return (f"vsphere://{SIM_USER}@127.0.0.1:{sim.port}/{TEMPLATE}?datastore={datastore}&cluster={CLUSTER}"
            f"&insecure=true&connect_timeout_s=10")


def malformed(sim: Sim, tmp: Path) -> FailingPath:
    """The issue's case: no host, no template, a key without a value."""
    return FailingPath("vsphere://user@/?datastore", f"pw-{secrets.token_hex(10)}",
                 f"host and template missing; datastore= has no value (example: {TARGET_EXAMPLE})", 4)


def missing_datastore(sim: Sim, tmp: Path) -> FailingPath:
    """Logged in with the right password, then a look-up fails."""
    return FailingPath(_sim_url(sim), sim.password, "datastore 'no-such-ds' not found", 10)


def unreachable(sim: Sim, tmp: Path) -> FailingPath:
    return FailingPath(f"vsphere://u@127.0.0.1:{closed_port()}/t?datastore=ds1&connect_timeout_s=3",
                 f"pw-{secrets.token_hex(10)}", "is unreachable", 10)


def wrong_credentials(sim: Sim, tmp: Path) -> FailingPath:
    return FailingPath(_sim_url(sim, "LocalDS_0"), f"pw-{secrets.token_hex(10)}",
                 f"rejected the login of '{SIM_USER}'", 10)


def password_file(sim: Sim, tmp: Path) -> FailingPath:
    """A TOML target whose password_file holds the right password; the datastore does not exist."""
    pw = tmp / "secret-input" / "vcenter.pw"
    pw.parent.mkdir()
    pw.write_text(sim.password + "\n")
    conf = tmp / "secret-input" / "vsphere.toml"
    conf.write_text(f'[vsphere]\nhost = "127.0.0.1"\nport = {sim.port}\nuser = "{SIM_USER}"\n'
                    f'template = "{TEMPLATE}"\ndatastore = "no-such-ds"\ncluster = "{CLUSTER}"\ninsecure = true\n'
                    f'password_file = "vcenter.pw"\n')
    return FailingPath(str(conf), sim.password, "datastore 'no-such-ds' not found", 10, password_file=pw)


PATHS: dict[str, Callable[[Sim, Path], FailingPath]] = {
    "malformed-url": malformed, "missing-datastore": missing_datastore, "unreachable": unreachable,
    "wrong-credentials": wrong_credentials, "password-file": password_file,
}

OPTION_SETS = {
    "l": ["-l"],
    "tb-long": ["--tb=long"],
    "showlocals-vv": ["--showlocals", "-vv"],
    "log-cli-debug": ["-o", "log_cli=true", "-o", "log_cli_level=DEBUG", "--log-file", "{tmp}/debug.log",
                      "--log-file-level", "DEBUG"],
    "full-trace": ["--full-trace"],
    "junitxml": ["--junitxml", "{tmp}/elsewhere/junit.xml", "-l"],
}


@pytest.mark.parametrize("options", OPTION_SETS.values(), ids=OPTION_SETS.keys())
@pytest.mark.parametrize("make_path", PATHS.values(), ids=PATHS.keys())
def test_password_in_no_output(vcsim: Sim, tmp_path: Path, make_path: Callable[[Sim, Path], FailingPath],
                               options: list[str]) -> None:
    case = make_path(vcsim, tmp_path)
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/root")}
    if case.password_file is None:
        env[PASSWORD_ENV] = case.password
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "suites", "--hypervisor", "vsphere", "--vcenter", case.target,
         "--results-dir", str(tmp_path / "results"), "--store", f"sqlite:///{tmp_path / 'vioconform.db'}",
         *(a.format(tmp=tmp_path) for a in options)],
        check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    out = run.stdout + run.stderr
    assert run.returncode == case.returncode, out
    assert case.expect in out, out
    if case.returncode == 4:  # a usage error: one line, before any test
        assert out.count(case.expect) == 1 and "Traceback" not in out, out
    written = [p for p in tmp_path.rglob("*") if p.is_file() and "secret-input" not in p.parts]
    if case.returncode == 10:  # harness errors (reports/exitcodes.py): the run wrote its results
        assert {p.name for p in written} >= {"junit.xml", "report.html", "vioconform.db"}, written
    for name, text in [("stdout", run.stdout), ("stderr", run.stderr)] + \
            [(str(p), p.read_text(errors="replace")) for p in written]:
        assert case.password not in text, f"the password is in {name}"
