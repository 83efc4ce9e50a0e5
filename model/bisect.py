"""Bisect a rule's failure over an ordered row of candidates (QEMU builds, commits, guest kernels).

Pure: the caller gives the row and a step function that tests one candidate and says what it saw;
this module decides which candidate to test next, what each answer means, and when it is done.

- **The ends first.** The first candidate is the known good one and the last the known bad one;
  both are tested before anything else. A good end that fails (any repeat), or a bad end that
  passes, stops the bisect with that finding: there is nothing to bisect between them. An end that
  cannot be tested (125) stops it too: without both ends' verdicts no step can be judged.
- **Noise-aware steps.** The bad end's failure rate (``k`` of ``n`` repeats failed) is the bar: a
  step is *bad* only when it fails at least as often (``k'/n' >= k/n``), *good* only when no repeat
  failed, and *flaky* in between (it failed, but less often than the bad end, or it passed with some
  failing repeats). A flaky step, like a skipped one (125: the build failed, the guest did not boot),
  is gone around: the next step is the testable candidate nearest the middle of what is left.
- **Confirmation.** Once the last good and the first bad candidate are next to each other, both
  are tested again: the culprit must be bad again and the one before it good again, else the
  bisect cannot decide.
- **Cannot decide.** When skipped or flaky candidates are all that lie between the last good and the
  first bad one, the first bad one is any of them or the bad one itself: the outcome names them all
  and why each was gone around.

Example::

    outcome = bisect(["q1", "q2", "q3", "q4"], step)
    outcome.first_bad  # "q3", with outcome.steps saying what each test saw
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass


class Verdict(enum.Enum):
    """What one test of a candidate answered (the ``git bisect run`` convention: 0, 1, 125)."""

    PASS = "pass"
    FAIL = "fail"
    SKIP = "skip"


@dataclass(frozen=True)
class StepResult:
    """One test of a candidate: its verdict, how many of its repeats failed, and why it was skipped
    (or anything else worth saying about it, such as where its output is)."""

    verdict: Verdict
    failed: int = 0
    repeats: int = 1
    note: str = ""

    def __post_init__(self) -> None:
        if self.repeats < 0 or not 0 <= self.failed <= self.repeats:
            raise ValueError(f"a step's counts must be 0 <= failed <= repeats; got {self.failed} of {self.repeats}")

    @property
    def counts(self) -> str:
        """``"2 of 3 repeats failed"``; ``"cannot test"`` for a skip."""
        if self.verdict is Verdict.SKIP:
            return "cannot test" + (f" ({self.note})" if self.note else "")
        return f"{self.failed} of {self.repeats} repeat{'s' if self.repeats != 1 else ''} failed"


class Call(enum.Enum):
    """What the bisect made of a step."""

    GOOD = "good"
    BAD = "bad"
    FLAKY = "flaky"
    SKIPPED = "skipped"


class Phase(enum.Enum):
    """Where in the bisect a step ran: an end's re-check, the search, or the culprit's confirmation."""

    GOOD_END = "good end"
    BAD_END = "bad end"
    BISECT = "bisect"
    CONFIRM = "confirm"


@dataclass(frozen=True)
class Step:
    """One test done: which candidate (its index in the row), in which phase, what it answered, and
    what the bisect made of it, in one sentence (``why``)."""

    index: int
    candidate: str
    phase: Phase
    result: StepResult
    call: Call
    why: str


class Finding(enum.Enum):
    """How a bisect ended."""

    FOUND = "found"
    GOOD_END_FAILS = "good end fails"
    BAD_END_PASSES = "bad end passes"
    CANNOT_DECIDE = "cannot decide"


@dataclass(frozen=True)
class Outcome:
    """The bisect's end: what it found, every step in the order it ran, and (when found) the first
    bad and the last good candidate; ``reason`` says why in one or more sentences."""

    finding: Finding
    steps: tuple[Step, ...]
    reason: str
    first_bad: str | None = None
    last_good: str | None = None
    #: Where it could not decide between candidates: those that may be the first bad one.
    suspects: tuple[str, ...] = ()


StepFunction = Callable[[int, str], StepResult]


def judge(result: StepResult, bar: StepResult) -> tuple[Call, str]:
    """What a step's result means against the bad end's (``bar``), with the counts that decided."""
    if result.verdict is Verdict.SKIP:
        return Call.SKIPPED, f"{result.counts}: gone around"
    here, there = f"{result.failed} of {result.repeats}", f"{bar.failed} of {bar.repeats}"
    if result.verdict is Verdict.PASS and result.failed == 0:
        return Call.GOOD, f"passed: {result.counts}"
    # k'/n' >= k/n without division (a step of 0 repeats never reaches here with a FAIL)
    if result.verdict is Verdict.FAIL and result.failed * bar.repeats >= bar.failed * result.repeats > 0:
        return Call.BAD, f"failed {here}, as often as the bad end ({there})"
    if result.verdict is Verdict.FAIL:
        return Call.FLAKY, f"failed {here}, less often than the bad end ({there}): flaky, gone around"
    return Call.FLAKY, f"passed, but {here} repeats failed where the good end had none: flaky, gone around"


def _pick(lo: int, hi: int, gone: set[int]) -> int | None:
    """The candidate strictly between ``lo`` and ``hi`` not gone around that is nearest the middle
    (the lower of two as near); None when none is left."""
    left = [i for i in range(lo + 1, hi) if i not in gone]
    mid = (lo + hi) / 2
    return min(left, key=lambda i: (abs(i - mid), i)) if left else None


class _Run:
    """The steps of one bisect, in order, and the bar they are judged against."""

    def __init__(self, row: Sequence[str], step: StepFunction, on_step: Callable[[Step], None] | None,
                 noun: str) -> None:
        self.row = row
        self.noun = noun
        self.step = step
        self.on_step = on_step
        self.steps: list[Step] = []
        #: the bad end's result, once tested: the failure rate every step is judged against
        self.bar = StepResult(Verdict.FAIL, 1, 1)

    def test(self, index: int, phase: Phase) -> Step:
        result = self.step(index, self.row[index])
        if phase is Phase.BAD_END and result.verdict is Verdict.FAIL:
            self.bar = result
            call, why = Call.BAD, f"failed {result.failed} of {result.repeats}: the bar a step must reach to be bad"
        else:
            call, why = judge(result, self.bar)
        done = Step(index, self.row[index], phase, result, call, why)
        self.steps.append(done)
        if self.on_step is not None:
            self.on_step(done)
        return done

    def outcome(self, finding: Finding, reason: str, first_bad: str | None = None, last_good: str | None = None,
                suspects: tuple[str, ...] = ()) -> Outcome:
        return Outcome(finding, tuple(self.steps), reason, first_bad, last_good, suspects)


def _check_ends(run: _Run) -> Outcome | None:
    """Test both ends; an Outcome when they leave nothing to bisect, None when they hold."""
    row = run.row
    bad = run.test(len(row) - 1, Phase.BAD_END)
    if bad.result.verdict is Verdict.SKIP:
        return run.outcome(Finding.CANNOT_DECIDE, f"the bad end {row[-1]} {bad.result.counts}: no step can be judged "
                                                  "without its failure to compare with")
    if bad.result.verdict is Verdict.PASS:
        return run.outcome(Finding.BAD_END_PASSES, f"the bad end {row[-1]} passes ({bad.result.counts}): the failure "
                                                   "does not reproduce there, so there is nothing to bisect")
    good = run.test(0, Phase.GOOD_END)
    if good.result.verdict is Verdict.SKIP:
        return run.outcome(Finding.CANNOT_DECIDE, f"the good end {row[0]} {good.result.counts}: without a {run.noun} "
                                                  "that passes there is nothing to bisect from")
    if good.call is not Call.GOOD:
        return run.outcome(Finding.GOOD_END_FAILS,
                           f"the good end {row[0]} fails ({good.result.counts}; the bad end {bad.result.counts}): "
                           f"the failure is older than the row, or flaky; start from an earlier {run.noun}")
    return None


def _confirm(run: _Run, lo: int, hi: int) -> Outcome:
    """Test the culprit and the candidate before it again: found only if both answer as before."""
    row = run.row
    again_bad = run.test(hi, Phase.CONFIRM)
    again_good = run.test(lo, Phase.CONFIRM)
    if again_bad.call is not Call.BAD or again_good.call is not Call.GOOD:
        said = "; ".join(f"{s.candidate} {s.why}" for s in (again_bad, again_good)
                         if s.call is not (Call.BAD if s is again_bad else Call.GOOD))
        return run.outcome(Finding.CANNOT_DECIDE, f"the confirmation disagreed: {said}; the first bad {run.noun} looked "
                                                  f"like {row[hi]} but does not reproduce as a culprit must",
                           suspects=(row[lo], row[hi]))
    return run.outcome(Finding.FOUND, f"{row[hi]} is the first bad {run.noun}: it failed again ({again_bad.result.counts}) "
                                      f"and {row[lo]} before it passed again ({again_good.result.counts})",
                       first_bad=row[hi], last_good=row[lo])


def bisect(row: Sequence[str], step: StepFunction, on_step: Callable[[Step], None] | None = None,
           noun: str = "build") -> Outcome:
    """Bisect ``row`` (first known good, last known bad; two or more candidates) with ``step``,
    called as ``step(index, candidate)``; see the module's docstring for what each answer means.
    ``on_step`` is called with each step once it is judged (to print it as it ends); ``noun`` is what
    the reasons call a candidate (``build``, ``commit``, ``kernel``)."""
    if len(row) < 2:
        raise ValueError(f"a bisect needs two or more candidates, the good one first and the bad one last; got {len(row)}")
    run = _Run(row, step, on_step, noun)
    stopped = _check_ends(run)
    if stopped is not None:
        return stopped
    lo, hi, gone = 0, len(row) - 1, set[int]()
    while (i := _pick(lo, hi, gone)) is not None:
        done = run.test(i, Phase.BISECT)
        if done.call is Call.GOOD:
            lo = i
        elif done.call is Call.BAD:
            hi = i
        else:
            gone.add(i)
    between = list(range(lo + 1, hi))
    if between:
        calls = {s.index: s for s in run.steps if s.index in between}
        said = "; ".join(f"{row[s]}: {calls[s].why}" for s in between)
        return run.outcome(Finding.CANNOT_DECIDE,
                           f"the first bad {run.noun} is one of {', '.join(row[s] for s in (*between, hi))}: between the "
                           f"last good {row[lo]} and {row[hi]} every {run.noun} was gone around ({said})",
                           suspects=tuple(row[s] for s in (*between, hi)))
    return _confirm(run, lo, hi)
