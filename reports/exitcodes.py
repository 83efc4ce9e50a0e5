"""The suite's exit codes: one table, a CI contract (the README's table is this one).

====  ==========================================================================================
code  meaning
====  ==========================================================================================
0     every rule passed (skips allowed)
1     a rule FAILED: a conformance verdict (the JUnit file's ``failure`` elements say which)
2     interrupted (Ctrl-C, SIGTERM, a stalled xdist worker): pytest's own code
3     pytest's internal error (a crash of pytest or of a plugin): pytest's own, never set here
4     usage error: a bad option or input, reported before any guest starts (pytest's own)
5     nothing collected: no rule selected (``-k`` matching nothing): pytest's own
6     pytest 9's ``--max-warnings`` exceeded: pytest's own, never set here
10    harness error, no rule failed: a rule ended in ERROR (it reached no verdict: the guest,
      SSH, fio or the hypervisor failed) or the run stopped before every rule ran (``-x``)
11    the results were not written or not stored: the JUnit file or the report could not be
      written (a full disk), or ``--store`` could not take the run
12    nothing judged where a verdict was needed: every rule SKIPPED (an image without the
      controller's driver, a backend that measures nothing), or a rule named by ``--require``
      SKIPPED, NOT RUN or not selected
====  ==========================================================================================

When several apply: any code pytest decided other than 0 and 1 (2, 3, 4, 5, 6) stands, then 11
(the record CI would read is missing, whatever the verdicts: the terminal still lists each),
then 1, then 10 (a rule NOT RUN means the run stopped early: that is 10, or pytest's 2), then
12. pytest's own codes are 0-6 (``pytest.ExitCode``; 6 came with pytest 9), so 10, 11 and 12
are vioconform's alone, with room for pytest's next few.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from enum import IntEnum

from reports.records import Record, reached_verdict


class Exit(IntEnum):
    PASSED = 0
    RULE_FAILED = 1
    INTERRUPTED = 2
    INTERNAL_ERROR = 3
    USAGE_ERROR = 4
    NO_TESTS = 5
    MAX_WARNINGS = 6
    HARNESS_ERROR = 10
    NOT_RECORDED = 11
    NO_VERDICT = 12


#: What each code means, in the run's last lines.
MEANING = {
    Exit.PASSED: "every rule passed (skips allowed)",
    Exit.RULE_FAILED: "a rule FAILED",
    Exit.INTERRUPTED: "interrupted",
    Exit.INTERNAL_ERROR: "pytest's internal error",
    Exit.USAGE_ERROR: "usage error",
    Exit.NO_TESTS: "nothing collected",
    Exit.MAX_WARNINGS: "pytest's --max-warnings exceeded",
    Exit.HARNESS_ERROR: "harness error (a rule reached no verdict), no rule failed",
    Exit.NOT_RECORDED: "results not written or not stored",
    Exit.NO_VERDICT: "nothing judged: every rule SKIPPED, or a --require rule reached no verdict",
}

#: pytest's codes the rules decide between (its OK and TESTS_FAILED, the same numbers as PASSED and
#: RULE_FAILED); any other of pytest's stands whatever the rules did.
_PYTEST_VERDICTS = frozenset({Exit.PASSED, Exit.RULE_FAILED})


def run_exit_code(pytest_status: int, outcomes: Iterable[str], complete: bool, not_recorded: bool,
                  unjudged: Sequence[str] = ()) -> int:
    """The run's exit code from pytest's own, the rules' settled outcomes, whether every rule was
    reached (``complete``), whether an output or the store failed (``not_recorded``) and the
    ``--require`` rules that reached no verdict (``unjudged``, :func:`unjudged`)."""
    if pytest_status not in _PYTEST_VERDICTS:
        return int(pytest_status)
    if not_recorded:
        return Exit.NOT_RECORDED
    seen = set(outcomes)
    if "failed" in seen:
        return Exit.RULE_FAILED
    if "error" in seen or not complete or pytest_status != Exit.PASSED:
        return Exit.HARNESS_ERROR  # pytest saw a failure that is no rule's verdict: never a pass
    if unjudged or seen == {"skipped"}:
        return Exit.NO_VERDICT  # a run that judged nothing (that had to be judged) is no pass
    return Exit.PASSED


def unjudged(required: Iterable[str], records: Iterable[Record]) -> list[str]:
    """Each ``--require`` rule that reached no verdict, with what became of it: ``"queue-depth:
    SKIPPED on libvirt:virtio-blk:latency5ms (...)"``, ``"limits: not selected (-k or the rule's
    own deselection)"``. A rule with several configurations needs a verdict on each."""
    recs = list(records)
    found: list[str] = []
    for rule in dict.fromkeys(required):
        mine = [r for r in recs if r.rule == rule]
        if not mine:
            found.append(f"{rule}: not selected, no test of it ran")
            continue
        found += [f"{rule}: {(r.outcome or 'not run').upper()} on {r.config}" + (f" ({r.headline})" if r.headline else "")
                  for r in mine if not reached_verdict(r)]
    return found
