"""The bisect's arithmetic (model/bisect.py): ends first, noise-aware steps, skips gone around,
the culprit confirmed, and "cannot decide" with its reason."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import pytest

from model.bisect import Call, Finding, Phase, StepResult, Verdict, bisect, judge

PASS = StepResult(Verdict.PASS, 0, 3)
FAIL = StepResult(Verdict.FAIL, 3, 3)
SKIP = StepResult(Verdict.SKIP, 0, 0, "the build failed")


def builds(n: int) -> list[str]:
    return [f"/opt/qemu-{i}/bin/qemu-system-x86_64" for i in range(n)]


class Row:
    """A step function over a row whose answers are given per index (a callable answers by the
    number of times that index was tested, for a build that answers differently each time)."""

    def __init__(self, answers: Sequence[StepResult | Callable[[int], StepResult]]) -> None:
        self.answers = answers
        self.tested: list[int] = []

    def __call__(self, index: int, candidate: str) -> StepResult:
        assert candidate == f"/opt/qemu-{index}/bin/qemu-system-x86_64"
        answer = self.answers[index]
        self.tested.append(index)
        return answer(self.tested.count(index)) if callable(answer) else answer


def broken_from(culprit: int, n: int) -> Row:
    return Row([PASS] * culprit + [FAIL] * (n - culprit))


@pytest.mark.parametrize("n", [2, 3, 4, 8, 9, 64])
def test_every_culprit_in_a_clean_row_is_found_and_confirmed(n: int) -> None:
    row = builds(n)
    for culprit in range(1, n):
        step = broken_from(culprit, n)
        out = bisect(row, step)
        assert out.finding is Finding.FOUND, out.reason
        assert (out.first_bad, out.last_good) == (row[culprit], row[culprit - 1])
        # the ends, about log2(n - 1) steps between them, and the two confirmations
        assert len(step.tested) <= 2 + math.ceil(math.log2(n - 1)) + 2, step.tested
        assert [s.phase for s in out.steps[:2]] == [Phase.BAD_END, Phase.GOOD_END]
        assert out.steps[0].why == "failed 3 of 3: the bar a step must reach to be bad"
        assert [(s.phase, s.index, s.call) for s in out.steps[-2:]] == [
            (Phase.CONFIRM, culprit, Call.BAD), (Phase.CONFIRM, culprit - 1, Call.GOOD)]
        assert out.reason == (f"{row[culprit]} is the first bad build: it failed again (3 of 3 repeats failed) and "
                              f"{row[culprit - 1]} before it passed again (0 of 3 repeats failed)")


def test_a_good_end_that_fails_stops_with_that_finding() -> None:
    step = Row([StepResult(Verdict.FAIL, 2, 3)] + [FAIL] * 7)
    out = bisect(builds(8), step)
    assert out.finding is Finding.GOOD_END_FAILS and out.first_bad is None
    assert step.tested == [7, 0]
    assert out.reason.startswith("the good end /opt/qemu-0/bin/qemu-system-x86_64 fails (2 of 3 repeats failed; "
                                 "the bad end 3 of 3 repeats failed)")


def test_a_good_end_with_one_failing_repeat_is_no_good_end() -> None:
    """A pass by the majority of repeats with one failing is flaky, not good: no bisect starts from it."""
    out = bisect(builds(4), Row([StepResult(Verdict.PASS, 1, 3), PASS, FAIL, FAIL]))
    assert out.finding is Finding.GOOD_END_FAILS
    assert "where the good end had none" in out.steps[1].why


def test_a_bad_end_that_passes_stops_with_that_finding() -> None:
    step = Row([PASS] * 8)
    out = bisect(builds(8), step)
    assert out.finding is Finding.BAD_END_PASSES and step.tested == [7]
    assert "passes (0 of 3 repeats failed): the failure does not reproduce there" in out.reason


@pytest.mark.parametrize("end", [0, 3])
def test_an_end_that_cannot_be_tested_cannot_decide(end: int) -> None:
    answers = [PASS, PASS, FAIL, FAIL]
    answers[end] = SKIP
    out = bisect(builds(4), Row(answers))
    assert out.finding is Finding.CANNOT_DECIDE
    assert f"qemu-{end}/bin/qemu-system-x86_64 cannot test (the build failed)" in out.reason


def test_a_skipped_step_is_gone_around() -> None:
    row = builds(9)
    answers = [PASS] * 6 + [FAIL] * 3
    answers[4] = SKIP  # the middle of 0..8
    step = Row(answers)
    out = bisect(row, step)
    assert out.finding is Finding.FOUND and out.first_bad == row[6]
    skipped = [s for s in out.steps if s.call is Call.SKIPPED]
    assert [s.index for s in skipped] == [4] and skipped[0].why == "cannot test (the build failed): gone around"
    assert step.tested.count(4) == 1


def test_a_skip_next_to_the_culprit_leaves_it_open_and_names_the_suspects() -> None:
    row = builds(6)
    out = bisect(row, Row([PASS, PASS, SKIP, FAIL, FAIL, FAIL]))
    assert out.finding is Finding.CANNOT_DECIDE and out.first_bad is None
    assert out.suspects == (row[2], row[3])
    assert out.reason.startswith(f"the first bad build is one of {row[2]}, {row[3]}: between the last good {row[1]} "
                                 f"and {row[3]} every build was gone around ({row[2]}: cannot test")


def test_a_step_that_fails_less_often_than_the_bad_end_is_flaky_and_gone_around() -> None:
    row = builds(8)
    once = StepResult(Verdict.FAIL, 1, 3)
    step = Row([PASS, PASS, PASS, once, PASS, FAIL, FAIL, FAIL])
    out = bisect(row, step)
    # 3, the first middle, is flaky; 4 next to it decides, then 5
    assert step.tested == [7, 0, 3, 4, 5, 5, 4]
    assert out.finding is Finding.FOUND and out.first_bad == row[5], out.reason
    assert [(s.index, s.why) for s in out.steps if s.call is Call.FLAKY] == [
        (3, "failed 1 of 3, less often than the bad end (3 of 3): flaky, gone around")]


def test_a_flaky_culprit_cannot_be_decided() -> None:
    row = builds(4)
    out = bisect(row, Row([PASS, PASS, StepResult(Verdict.FAIL, 1, 3), FAIL]))
    assert out.finding is Finding.CANNOT_DECIDE
    assert out.suspects == (row[2], row[3])
    assert "failed 1 of 3, less often than the bad end (3 of 3): flaky" in out.reason


def test_a_step_that_fails_as_often_as_a_flaky_bad_end_is_bad() -> None:
    """The bar is the bad end's own rate: 2 of 3 there makes 2 of 3 (or 4 of 6) bad, 1 of 3 flaky."""
    bar = StepResult(Verdict.FAIL, 2, 3)
    assert judge(StepResult(Verdict.FAIL, 2, 3), bar)[0] is Call.BAD
    assert judge(StepResult(Verdict.FAIL, 4, 6), bar)[0] is Call.BAD
    assert judge(StepResult(Verdict.FAIL, 3, 3), bar)[0] is Call.BAD
    assert judge(StepResult(Verdict.FAIL, 1, 3), bar)[0] is Call.FLAKY
    row = builds(6)
    out = bisect(row, Row([PASS, PASS, PASS, bar, bar, bar]))
    assert out.finding is Finding.FOUND and out.first_bad == row[3]
    assert "failed 2 of 3, as often as the bad end (2 of 3)" in {s.why for s in out.steps}


def test_a_culprit_that_does_not_fail_again_is_not_named() -> None:
    row = builds(5)
    first_time_only: Callable[[int], StepResult] = lambda n: FAIL if n == 1 else PASS
    out = bisect(row, Row([PASS, PASS, first_time_only, FAIL, FAIL]))
    assert out.finding is Finding.CANNOT_DECIDE and out.first_bad is None
    assert out.reason.startswith(f"the confirmation disagreed: {row[2]} passed: 0 of 3 repeats failed; ")
    assert out.steps[-2].phase is Phase.CONFIRM and out.steps[-2].call is Call.GOOD


def test_a_last_good_that_does_not_pass_again_is_not_confirmed() -> None:
    row = builds(4)
    out = bisect(row, Row([PASS, lambda n: PASS if n == 1 else StepResult(Verdict.FAIL, 1, 3), FAIL, FAIL]))
    assert out.finding is Finding.CANNOT_DECIDE
    assert f"{row[1]} failed 1 of 3, less often than the bad end" in out.reason


def test_a_row_of_one_and_bad_counts_are_refused() -> None:
    with pytest.raises(ValueError, match="two or more candidates"):
        bisect(["only"], Row([PASS]))
    with pytest.raises(ValueError, match="0 <= failed <= repeats; got 4 of 3"):
        StepResult(Verdict.FAIL, 4, 3)


def test_the_counts_read_as_a_sentence() -> None:
    assert StepResult(Verdict.FAIL, 1, 1).counts == "1 of 1 repeat failed"
    assert StepResult(Verdict.SKIP).counts == "cannot test"


def test_the_reasons_call_a_candidate_what_the_row_holds() -> None:
    out = bisect(builds(3), broken_from(2, 3), noun="kernel")
    assert " is the first bad kernel: it failed again" in out.reason
    out = bisect(builds(3), Row([PASS, SKIP, FAIL]), noun="commit")
    assert out.reason.startswith("the first bad commit is one of") and "every commit was gone around" in out.reason
