"""Registers vioconform's pytest plugin for the conformance suites only.

``pytest suites`` (or plain ``pytest``, whose testpaths is suites/) loads the plugin: its
options, session guest, disks, faults and reports. The project's own tests (``pytest tests``)
run as plain pytest, so pytest's own ``--junitxml`` serves them and no libvirt is needed; the
end-to-end tests start the suite in a subprocess, where the plugin is active.
"""

from __future__ import annotations

from pathlib import Path

import pytest

#: The plugin's modules, registered in this order when the run collects suites/.
PLUGIN_MODULES = ("fixtures.options", "fixtures.session", "reports.plugin")
SUITES = Path(__file__).resolve().parent / "suites"


def targets_suites(args: list[str], invocation_dir: Path) -> bool:
    """Whether the command line collects from suites/ (``suites``, ``suites/test_io_size.py::...``)."""
    for arg in args:
        path = (invocation_dir / arg.split("::", 1)[0]).resolve()
        if path == SUITES or SUITES in path.parents:
            return True
    return False


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    # The options are declared for every run (so `pytest --help` lists them and a misspelt one is an
    # error); everything else loads only for the suites.
    from fixtures.options import add_options
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    if not targets_suites(config.args, config.invocation_params.dir):
        return
    import importlib
    for name in PLUGIN_MODULES:
        config.pluginmanager.register(importlib.import_module(name), name=f"vioconform.{name}")
