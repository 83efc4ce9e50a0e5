"""Facts about the whole run that the session's fixtures learn on the way (which fio ran, and
whatever else a fixture finds out about the guest), for the JUnit suite properties and the report.

A fixture adds them with ``run_properties(config).update(fio_version="fio-3.33")``; the plugin
(reports.plugin) writes them after the run's own (hypervisor, controllers, inject), which they
never replace. Values are strings, as JUnit properties are.
"""

from __future__ import annotations

import pytest

RUN_PROPERTIES_KEY = pytest.StashKey[dict[str, str]]()


def run_properties(config: pytest.Config) -> dict[str, str]:
    """The run's facts so far, a dict to add to (created on first use)."""
    return config.stash.setdefault(RUN_PROPERTIES_KEY, {})
