"""What a rule module declares reaches the options: ``--repeats``' help names the rules whose modules say
they do not repeat (``REPEATABLE = False``), read from the modules, not written into the option."""

from __future__ import annotations

import pytest

from model.rules import io_size
from tests.unit.test_help_defaults import group, rendered_help


def test_the_repeats_help_names_the_rules_that_never_repeat() -> None:
    assert "; block-size, identity, limits read settings and never repeat)" in rendered_help(group()["--repeats"])


def test_a_rule_that_declares_it_never_repeats_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(io_size, "REPEATABLE", False)
    assert "; block-size, identity, io-size, limits read settings and never repeat)" in rendered_help(group()["--repeats"])
