"""A rule's own options are declared in its rule module (``OPTIONS``, model/judging/rule_option.py) and
registered from there: the suite's parser lists every rule module's options after the options of what is
measured, parses each with the rule's parser (a bad value is the usage error the rule words), and
``SuiteOptions.option`` gives the suite file the value. An option made up here is registered and read with
no edit anywhere else (tests/structure/test_throwaway_rule.py shows it with a rule module of its own)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from _pytest.config.argparsing import Parser

from fixtures import options, options_rules
from fixtures.options import SuiteOptions
from model.judging.rule_option import RuleOption, flag
from model.rules import RULE_MODULES, RULE_OPTIONS, declared_options
from model.rules.hotplug import SURPRISE_REMOVAL
from model.rules.queue_depth import DEPTHS, REQUIRE_QUEUING
from model.rules.stall_tolerance import STALL_HOLD_S, STALL_S


def _whole(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"{text!r} is no made-up count; give 1 or more")
    return int(text)


MADE_UP = RuleOption("--made-up-count", _whole, 3, "how many made-up things (default: 3)", "N")
MADE_UP_FLAG = flag("--made-up-flag", "a made-up switch")


def _parser() -> Parser:
    parser = Parser(_ispytest=True)
    options.pytest_addoption(parser)
    return parser


def _names() -> list[str]:
    return [a.names()[0] for a in _parser().getgroup("vioconform").options]


def test_the_rules_declare_the_options_only_they_read() -> None:
    known: list[RuleOption[Any]] = [SURPRISE_REMOVAL, DEPTHS, REQUIRE_QUEUING, STALL_S, STALL_HOLD_S]
    assert [o for o in RULE_OPTIONS if o in known] == known
    assert [o.dest for o in known] == ["surprise_removal", "depths", "require_queuing", "stall_s", "stall_hold_s"]


def test_they_follow_the_options_of_what_is_measured() -> None:
    names = _names()
    at = names.index("--guest-setup") + 1
    assert names[at:at + len(RULE_OPTIONS)] == [o.name for o in RULE_OPTIONS]


def test_an_option_a_rule_declares_is_registered_parsed_and_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(options_rules, "RULE_OPTIONS", (*RULE_OPTIONS, MADE_UP, MADE_UP_FLAG))
    names = _names()
    assert names[names.index(RULE_OPTIONS[-1].name) + 1:][:2] == ["--made-up-count", "--made-up-flag"]

    def resolved(*args: str) -> SuiteOptions:
        return SuiteOptions.from_config(SimpleNamespace(option=_parser().parse(list(args))))  # type: ignore[arg-type]

    assert resolved().option(MADE_UP) == 3 and resolved().option(MADE_UP_FLAG) is False
    given = resolved("--made-up-count", "7", "--made-up-flag", "--depths", "4,1")
    assert (given.option(MADE_UP), given.option(MADE_UP_FLAG), given.option(DEPTHS)) == (7, True, (1, 4))
    assert given.recorded()["made_up_count"] == 7 and given.recorded()["depths"] == [1, 4]
    with pytest.raises(pytest.UsageError, match=r"argument --made-up-count: '0' is no made-up count; give 1 or more"):
        _parser().parse(["--made-up-count", "0"])


def test_options_built_without_the_command_line_read_each_default() -> None:
    built = SuiteOptions.from_config(SimpleNamespace(option=_parser().parse([])))  # type: ignore[arg-type]
    bare = SuiteOptions(**{**built.__dict__, "rule_options": ()})
    assert [bare.option(o) for o in RULE_OPTIONS] == [built.option(o) for o in RULE_OPTIONS]


def test_an_option_two_rules_declare_is_refused() -> None:
    one = SimpleNamespace(RULE="one", OPTIONS=(MADE_UP,))
    other = SimpleNamespace(RULE="other", OPTIONS=(RuleOption("--made-up-count", int, 1, "again"),))
    assert declared_options([one, SimpleNamespace(RULE="none")]) == (MADE_UP,)
    with pytest.raises(TypeError, match="other and one both declare --made-up-count: an option belongs to one rule"):
        declared_options([one, other])
    assert declared_options(RULE_MODULES) == RULE_OPTIONS
