"""A rule's own command-line options, declared as data in its rule module (``OPTIONS``).

A rule module may declare ``OPTIONS``: a tuple of :class:`RuleOption`, each an option that only that rule
reads (``--depths`` of queue-depth, ``--stall-s`` of stall-tolerance). The suite's plugin registers every
rule module's options in the "vioconform" group (fixtures/options_rules.py) and keeps their values in
``SuiteOptions``, where the rule's suite file reads them with ``suite_options.option(DEPTHS)``: a rule
that needs an option adds it in its own module and nowhere else.

Nothing here imports argparse or pytest: a parser takes the text as given and returns the value, or
raises ``ValueError`` with the sentence the user sees (the plugin makes it a usage error, exit 4).

Example::

    STALL_S = RuleOption("--stall-s", stall_seconds, DEFAULT_STALL_S, "the stall the guest must ride out", "S")
    OPTIONS = (STALL_S,)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class RuleOption(Generic[T]):
    """One option of one rule: ``name`` as typed (``--depths``), ``parse`` the text into its value
    (ValueError with the user's sentence for a bad one; None for a flag, True when given), ``default``
    when it is not given, ``help`` as ``--help`` prints it (``%(default)s`` is filled in), ``metavar``
    the value's placeholder there (None: argparse's, the name in capitals)."""

    name: str
    parse: Callable[[str], T] | None
    default: T
    help: str
    metavar: str | None = None

    @property
    def dest(self) -> str:
        """The attribute the value is kept under: ``--stall-hold-s`` is ``stall_hold_s``."""
        return self.name.removeprefix("--").replace("-", "_")

    @property
    def flag(self) -> bool:
        """An option that takes no value: given, it is True."""
        return self.parse is None


def flag(name: str, help_text: str) -> RuleOption[bool]:
    """An option that takes no value (off unless given)."""
    return RuleOption(name, None, False, help_text)


def positive_float(text: str) -> float:
    """A finite number above 0 (a duration, a latency); ValueError with the reason otherwise."""
    try:
        v = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number") from None
    if not math.isfinite(v):  # float() takes nan, inf and infinity; none of them is a duration
        raise ValueError(f"{text!r} is not a finite number; give one above 0, e.g. 5")
    if v <= 0:
        raise ValueError(f"{text!r} must be above 0")
    return v
