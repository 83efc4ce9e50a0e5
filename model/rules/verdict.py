"""The verdict every rule returns: outcome, the numbers it used, and sentences that explain it."""

from __future__ import annotations

from dataclasses import dataclass, field

from model.rules.figures import Figure

Number = str | float | int


@dataclass(frozen=True)
class RuleVerdict:
    """One rule's verdict on one configuration.

    ``lines`` describe what was measured (always shown), ``problems`` why it failed (empty
    when it passed), ``notes`` what a reader should know but does not fail the rule.
    ``properties`` are the measured numbers for the JUnit record (flat, by name);
    ``figures`` what the report draws, typed: the report never reads ``properties``' names.
    """

    rule: str
    lines: tuple[str, ...]
    problems: tuple[str, ...]
    notes: tuple[str, ...] = ()
    properties: dict[str, Number] = field(default_factory=dict)
    figures: tuple[Figure, ...] = ()

    @property
    def passed(self) -> bool:
        return not self.problems

    def explain(self) -> str:
        return "\n".join([*self.lines, *(f"FAIL: {p}" for p in self.problems), *(f"note: {n}" for n in self.notes)])

    def record_properties(self) -> dict[str, Number]:
        props = dict(self.properties)
        if self.notes:
            props["notes"] = "; ".join(self.notes)
        return props


def spread(values: list[float] | tuple[float, ...]) -> tuple[float, float, float]:
    """(median, min, max) of repeated measurements; ValueError on none."""
    if not values:
        raise ValueError("spread of no measurements")
    s = sorted(values)
    n = len(s)
    median = s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
    return median, s[0], s[-1]


def kib(n_bytes: float) -> str:
    """``1048576`` -> ``"1024 KiB"``; sizes in the rules' messages are in KiB."""
    return f"{n_bytes / 1024:g} KiB"
