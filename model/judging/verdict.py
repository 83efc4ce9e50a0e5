"""The verdict every rule returns: outcome, the numbers it used, and sentences that explain it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from model.blame import Blame
from model.judging.figures import Figure

Number = str | float | int


@dataclass(frozen=True)
class RuleVerdict:
    """One rule's verdict on one configuration.

    ``lines`` describe what was measured (always shown), ``problems`` why it failed (empty
    when it passed), ``notes`` what a reader should know but does not fail the rule.
    ``properties`` are the measured numbers for the JUnit record (flat, by name);
    ``figures`` what the report draws, typed: the report never reads ``properties``' names.
    ``hint``: the layer at fault as the rule's own evidence shows it, where it shows one (queue-depth's
    cgroup ``io.max``); model/blame.py uses it where the disk's settings single out no layer.
    """

    rule: str
    lines: tuple[str, ...]
    problems: tuple[str, ...]
    notes: tuple[str, ...] = ()
    properties: dict[str, Number] = field(default_factory=dict)
    figures: tuple[Figure, ...] = ()
    hint: Blame | None = None

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


def _is_number(v: Number) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def repeat_properties(per_repeat: Sequence[Mapping[str, Number]]) -> dict[str, Number]:
    """The record of N repeats: each number as ``NAME.rK`` (K = 1..N) and its median as ``NAME``;
    a text property once, from the first repeat that has it. One repeat: its properties as they are."""
    if len(per_repeat) == 1:
        return dict(per_repeat[0])
    out: dict[str, Number] = {}
    names = list(dict.fromkeys(n for props in per_repeat for n in props))
    for name in names:
        values = [(k, props[name]) for k, props in enumerate(per_repeat, 1) if name in props]
        numbers = [(k, v) for k, v in values if _is_number(v)]
        if len(numbers) == len(values):
            for k, v in numbers:
                out[f"{name}.r{k}"] = v
            out[name] = round(spread([float(v) for _, v in numbers])[0], 6)
        else:
            out[name] = values[0][1]
    return out


def combine_repeats(verdicts: Sequence[RuleVerdict], exact: bool) -> RuleVerdict:
    """One verdict from a rule's repeats.

    ``exact`` (a conformance check with no tolerance: a missing flush, a write that did not reach
    the host one for one, a misaligned request, a limit not advertised): every repeat must pass, and
    each failing repeat is named. Otherwise (a measured, noisy quantity: depths, IOPS, request
    sizes, queue spread) the verdict is the majority's: it passes when more than half the repeats
    pass, which for an odd count is the verdict of the median repeat; one noisy repeat never fails
    the rule, and the ones that failed are noted. The properties are each repeat's numbers
    (``NAME.rK``) and their medians (``NAME``).
    """
    if not verdicts:
        raise ValueError("no repeats to combine")
    if len(verdicts) == 1:
        return verdicts[0]
    n = len(verdicts)
    passed = [v.passed for v in verdicts]
    ok = all(passed) if exact else sum(passed) * 2 > n
    shown = next(v for v in verdicts if v.passed == ok)
    how = ("an exact check: every repeat must pass" if exact
           else "judged by the majority of repeats (measured quantities: one noisy repeat does not fail the rule)")
    failing = [(k, v) for k, v in enumerate(verdicts, 1) if not v.passed]
    said = [f"repeat {k}: {p}" for k, v in failing for p in v.problems]
    summary = f"{n} repeats: {sum(passed)} passed, {n - sum(passed)} failed; {how}."
    lines = (summary, f"repeat {verdicts.index(shown) + 1} shown:", *shown.lines)
    problems = tuple(said) if not ok else ()
    notes = (*shown.notes, *((f"failed in a minority of repeats: {'; '.join(said)}",) if ok and said else ()))
    props = repeat_properties([v.properties for v in verdicts])
    props.update({"repeats": n, "repeats_passed": sum(passed)})
    hint = next((v.hint for _, v in failing if v.hint is not None), None) if not ok else None
    return RuleVerdict(shown.rule, lines, problems, notes, props, shown.figures, hint)
