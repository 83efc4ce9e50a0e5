"""A session set-up failure is one ERROR with its cause and details, then ``not run: <cause>``
for every other test that needed it: no repeated tracebacks, never a skip or a pass."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

CONFTEST = 'pytest_plugins = ["fixtures.options", "fixtures.session", "fixtures.setup_errors"]\n'
TESTS = '''
import pytest
from fixtures.setup_errors import setup_step
from hypervisors.base import HypervisorError

@pytest.fixture(scope="session")
def broken_guest():
    with setup_step():
        raise HypervisorError("guest vioconform-1 did not reach VIOCONFORM-READY within 3 s", console_log="SeaBIOS")

@pytest.fixture(scope="session")
def buggy():
    return {}["a bug in the suite keeps its traceback"]

def test_one(broken_guest): pass
def test_two(broken_guest): pass
def test_three(broken_guest): pass
def test_bug(buggy): pass
'''


def test_first_test_shows_the_cause_the_rest_say_not_run(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_guest=TESTS)
    result = pytester.runpytest("-p", "no:cacheprovider", "-rA")
    result.assert_outcomes(errors=4)
    out = result.stdout.str()
    # The ERRORS sections, not the short summary: pytest prints the summary's messages whole when
    # $CI is set (as in CI) and cut to the terminal's width otherwise.
    sections = out.split("short test summary info")[0]
    cause = "guest vioconform-1 did not reach VIOCONFORM-READY within 3 s"
    assert sections.count(f"vioconform set-up failed: {cause}\n--- guest console (last lines) ---\nSeaBIOS") == 1
    assert sections.count(f"not run: {cause}") == 2
    assert sections.count("SeaBIOS") == 1
    assert "raise HypervisorError" not in out and "setup_step" not in out
    assert "KeyError: 'a bug in the suite keeps its traceback'" in out and "def buggy" in out
