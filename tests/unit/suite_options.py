"""The suite's option parsing and checks run in-process (pytester), with a test that needs no guest:
what a usage error (exit 4) says, and the options as the session parsed them."""

from __future__ import annotations

import pytest

CONFTEST = 'pytest_plugins = ["fixtures.options", "fixtures.session"]\n'
#: A test that prints the parsed options (no guest: it does not take the guest fixture).
SHOW = '''
from fixtures.state import OPTIONS_KEY

def test_show(pytestconfig):
    o = pytestconfig.stash[OPTIONS_KEY]
    print("OPTS", o.results_dir, o.junit_path, o.save_baseline, o.baseline_ref, o.emulator, o.hosts[0].uri)
'''


def run_suite_options(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """The suite's option parsing and checks (fixtures.options, fixtures.session) in-process, with a
    test that needs no guest; results in a new ``res`` unless ``args`` name a --results-dir."""
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_show=SHOW)
    results = [] if any(a.startswith("--results-dir") for a in args) else ["--results-dir", str(pytester.path / "res")]
    return pytester.runpytest("-p", "no:cacheprovider", "-s", *results, *args)


def opts_line(result: pytest.RunResult) -> list[str]:
    return next(line[line.index("OPTS"):] for line in result.stdout.lines if "OPTS" in line).split()[1:]


def errors(result: pytest.RunResult) -> str:
    return result.stderr.str() + result.stdout.str()
