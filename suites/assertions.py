"""Assertion helpers for rules: the failure names the configuration, the numbers and where the raw data is."""

from __future__ import annotations

from pathlib import Path

import pytest


def fail_unless(passed: bool, rule: str, config: str, explanation: str, raw_dir: Path) -> None:
    """Fail the rule test with its full explanation unless ``passed``."""
    __tracebackhide__ = True
    if not passed:
        pytest.fail(f"{rule} failed on {config}\n{explanation}\nraw data: {raw_dir}", pytrace=False)
