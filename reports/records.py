"""What each rule measured, kept per test so JUnit and the report can show the numbers.

A record keeps its rule's verdict object (:class:`model.judging.verdict.RuleVerdict`): the
report draws its typed figures, and its numbers are flattened to strings only for JUnit and
the report's table of measured numbers (:meth:`Record.measured`).

A record has no outcome until one of its test's phases decides it: a run interrupted in the
middle of a rule must never show that rule as passed. At the end of the session,
:func:`settle` turns what is still undecided into an honest outcome (``error`` for a rule
that started and did not finish, ``not run`` for one that never started) and sums the run
up in a :class:`RunStatus`, which every output (terminal, JUnit, HTML) shows.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from model.judging.verdict import Number, RuleVerdict, repeat_properties
from model.types import Outcome

#: The message of a rule whose test started and never finished (its call phase never reported).
UNFINISHED = "did not finish"
NOT_RUN = "not run"


@dataclass
class Record:
    """One test's outcome: rule, configuration, verdict, measured properties, verdict text.

    ``verdict`` is the rule's verdict once its judge ran (None before, or for a rule cut short);
    ``properties`` the numbers the test added itself besides the verdict's (``record.add``).
    ``outcome`` stays None until a phase of the test decides it; ``started`` says the test's
    set-up began (so an undecided record was cut short rather than never reached).
    """

    nodeid: str
    rule: str
    config: str
    properties: dict[str, Number] = field(default_factory=dict)
    outcome: Outcome | None = None
    message: str = ""
    details: str = ""
    duration_s: float = 0.0
    started: bool = False
    verdict: RuleVerdict | None = None
    #: While a rule's repeat K of several runs (suites.assertions.judge_repeated): what the test
    #: adds goes in as ``NAME.rK``; 0 when not repeating.
    repeat: int = 0
    #: A failed verdict's layer at fault (model.blame: "hypervisor", "guest driver", "guest
    #: configuration", "unknown") and why; "" for any other outcome
    blame: str = ""
    blame_reason: str = ""
    #: the test's reproducer bundle (fixtures/reproducer.py), "" where none was written
    reproducer: str = ""

    def add(self, **values: Number) -> None:
        if self.repeat:
            values = {f"{k}.r{self.repeat}": v for k, v in values.items()}
        self.properties.update(values)

    def fold_repeats(self) -> None:
        """After the repeats: each ``NAME.rK`` number also as NAME, the median over the repeats (a
        text property as the first repeat's), folded as a rule's verdicts fold their repeats
        (model.judging.verdict.repeat_properties)."""
        per_repeat: dict[int, dict[str, Number]] = {}
        for prop, value in self.properties.items():
            name, dot, k = prop.rpartition(".r")
            if dot and k.isdigit():
                per_repeat.setdefault(int(k), {})[name] = value
        if not per_repeat:
            return
        folded = repeat_properties([per_repeat.get(k, {}) for k in range(1, max(per_repeat) + 1)])
        self.properties.update({name: folded[name] for name in dict.fromkeys(n for r in per_repeat.values() for n in r)})

    @property
    def headline(self) -> str:
        """The outcome in one line: a failure's first ``FAIL:`` line (what failed, not the rule's
        name), else the message's first line."""
        lines = [line.strip() for line in self.message.splitlines() if line.strip()]
        if self.outcome == "failed":
            fail = next((line for line in lines if line.startswith("FAIL:")), None)
            if fail is not None:
                return fail
        return lines[0] if lines else ""

    def measured(self) -> dict[str, Number]:
        """Every measured number by name: the test's own, then the verdict's (JUnit's properties)."""
        return {**self.properties, **(self.verdict.record_properties() if self.verdict else {})}

    def settled(self, interrupted_by: str = "") -> Record:
        """This record with an outcome that never claims more than happened."""
        if self.outcome is not None:
            return self
        if not self.started:
            why = f"{NOT_RUN}: the run was interrupted by {interrupted_by} first" if interrupted_by else NOT_RUN
            return dataclasses.replace(self, outcome="not run", message=why)
        why = f"interrupted by {interrupted_by}: {UNFINISHED}" if interrupted_by else UNFINISHED
        return dataclasses.replace(self, outcome="error", message=why,
                                   details=f"{why}; the measured numbers above are partial")


def record_from_nodeid(nodeid: str) -> Record:
    """A rule test's record known only by its node id (``suites/test_queue_depth.py::test_x[config]``):
    in the controller of ``pytest -n N``, for a test no worker reported on. The rule is the module's."""
    module, _, rest = nodeid.partition("::")
    rule = module.rpartition("/")[2].removesuffix(".py").removeprefix("test_").replace("_", "-")
    return Record(nodeid=nodeid, rule=rule, config=rest.partition("[")[2].rstrip("]") or "default")


@dataclass(frozen=True)
class RunStatus:
    """Whether every selected rule reached a verdict, and what stopped the run if not."""

    interrupted_by: str = ""  # e.g. "SIGINT", "SIGTERM", "--maxfail"; empty if the run was not stopped
    unfinished: int = 0  # rules that started and did not finish
    not_run: int = 0  # rules that never started
    #: rules that ended in an ERROR in a run that was not stopped and where no rule reached a verdict
    #: (0 when one did): such a run (a guest that never booted, ``--machine none``) is not complete,
    #: and never a baseline. A run of skips alone stays complete: nothing was attempted and failed.
    errors_only: int = 0

    @property
    def complete(self) -> bool:
        return not (self.interrupted_by or self.unfinished or self.not_run or self.errors_only)

    def properties(self) -> dict[str, str]:
        """Suite-level properties for JUnit: ``complete`` always, ``interrupted_by`` when stopped."""
        props = {"complete": "true" if self.complete else "false"}
        if self.interrupted_by:
            props["interrupted_by"] = self.interrupted_by
        return props

    def banner(self) -> str:
        """One sentence for an incomplete run (empty for a complete one)."""
        if self.complete:
            return ""
        parts = [f"interrupted by {self.interrupted_by}"] if self.interrupted_by else []
        if self.unfinished:
            parts.append(f"{_tests(self.unfinished)} did not finish")
        if self.not_run:
            parts.append(f"{_tests(self.not_run)} not run")
        if self.errors_only:
            parts.append(f"no rule reached a verdict ({_tests(self.errors_only)} ended in ERROR, none passed or "
                         "failed)")
        return "RUN INCOMPLETE: " + "; ".join(parts) + ". Only the verdicts reached are shown: this run is not a pass."


def _tests(n: int) -> str:
    return f"{n} rule test" + ("" if n == 1 else "s")


def reached_verdict(r: Record) -> bool:
    """Whether the rule reached its verdict: passed or failed, or judged and then an ERROR only
    because the comparison ``--baseline`` asked for found no baseline (its verdict is kept)."""
    return r.outcome in ("passed", "failed") or (r.outcome == "error" and r.verdict is not None)


def settle(records: Iterable[Record], interrupted_by: str = "") -> tuple[list[Record], RunStatus]:
    """Every record with a decided outcome, and the run's status."""
    recs = list(records)
    settled = [r.settled(interrupted_by) for r in recs]
    unfinished = sum(1 for r in recs if r.outcome is None and r.started)
    # never started, or started on a guest that had died before it (fixtures/outcomes.py)
    not_run = sum(1 for r in recs if (r.outcome is None and not r.started) or r.outcome == "not run")
    errors = sum(1 for r in settled if r.outcome == "error")
    stopped = interrupted_by or unfinished or not_run
    errors_only = errors if errors and not stopped and not any(reached_verdict(r) for r in settled) else 0
    return settled, RunStatus(interrupted_by, unfinished, not_run, errors_only)


def section_id(rule: str, config: str) -> str:
    """The id of a rule's section in report.html (``queue-depth--libvirt-virtio-scsi-latency5ms``),
    which the JUnit case's output names."""
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in f"{rule}--{config}")


def raw_dir(results_dir: Path, config: str) -> Path:
    """Where a configuration's raw measurements go: ``results/raw/libvirt_virtio-scsi_latency5ms``."""
    return results_dir / "raw" / config.replace(":", "_")
