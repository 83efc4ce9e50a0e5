"""Facts about the whole run that the session's fixtures learn on the way (which fio ran, and
whatever else a fixture finds out about the guest), for the JUnit suite properties and the report.

A fixture adds them with ``run_properties(config).update(fio_version="fio-3.33")``; the plugin
(reports.plugin) writes them after the run's own (hypervisor, controllers, inject), which they
never replace. Values are strings, as JUnit properties are.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

#: The project's checkout: its ``git describe`` is the vioconform revision a run records.
PROJECT = Path(__file__).resolve().parents[1]

RUN_PROPERTIES_KEY = pytest.StashKey[dict[str, str]]()


def run_properties(config: pytest.Config) -> dict[str, str]:
    """The run's facts so far, a dict to add to (created on first use)."""
    return config.stash.setdefault(RUN_PROPERTIES_KEY, {})


def revision(root: Path = PROJECT) -> str:
    """vioconform's revision: ``git describe --always --dirty`` of the checkout (``-dirty`` when
    it has uncommitted changes), or "unknown (...)" outside a git checkout."""
    try:
        proc = subprocess.run(["git", "-C", str(root), "describe", "--always", "--dirty", "--abbrev=12"],
                              capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unknown ({e})"
    return proc.stdout.strip() if proc.returncode == 0 else "unknown (not a git checkout)"
