"""Registers vioconform's pytest plugin, for the conformance suites only.

Every run gets the suite's options (the "vioconform" group of ``--help``; a misspelt option is an
error everywhere). The rest of the plugin (the session guest, disks, faults, the records, the
JUnit file and report, secret redaction) loads only when the run collects suites/: ``pytest suites``,
``pytest suites/test_io_size.py::...``, or plain ``pytest`` (testpaths is suites/). The project's own
tests (``pytest tests``) run as plain pytest: pytest's ``--junitxml`` serves them, and the fast lane
needs no libvirt. The end-to-end tests start the suite in a subprocess, where the plugin is active.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from fixtures import PLUGIN_MODULES

pytest_plugins = ["fixtures.options"]

SUITES = Path(__file__).resolve().parent / "suites"


def targets_suites(args: list[str], invocation_dir: Path) -> bool:
    """Whether the command line collects from suites/ (``suites``, ``suites/test_io_size.py::...``)."""
    for arg in args:
        path = (invocation_dir / arg.split("::", 1)[0]).resolve()
        if path == SUITES or SUITES in path.parents:
            return True
    return False


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if not targets_suites(config.args, config.invocation_params.dir):
        return
    for name in PLUGIN_MODULES:
        module = importlib.import_module(name)
        if not config.pluginmanager.is_registered(module):
            config.pluginmanager.register(module, name=name)
