"""The run's data, built once from its records at the session's end: what ``junit.xml`` says of the run
(reports/junit.py writes it) and what the results store keeps of it (:meth:`BuiltRun.run_data`, the
:class:`reports.store.RunData` the run hands to the store). Both read the same :class:`BuiltRun`, so the
store holds what the JUnit file says, as ``python -m reports.store import`` would read it back
(tests/unit/test_run_handover.py holds the two equal).

Every text is made here as the JUnit file keeps it:

- masked: each registered secret (model/secret.py) is ``***`` in every property, message and body, on both
  paths (fixtures/redact.py masks what pytest reports; this is the wall for what the fixtures and the
  suites recorded themselves);
- with the characters XML cannot hold removed (junit-xml removes them from its document; a case's
  property value holding one would make the file unreadable);
- where it is an attribute that junit-xml writes (a suite property, a case's message), on one line:
  an XML parser reads a line break or a tab in an attribute as a space.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from junit_xml import _clean_illegal_xml_chars  # the cleaning junit-xml applies to its whole document

from model.secret import scrub
from reports.records import Record, RunStatus
from reports.store.read import CaseRead, RunData, run_data, stamped

#: A JUnit case's element for each outcome (None: passed); an undecided record is never a pass.
TAGS: dict[str, str | None] = {"passed": None, "failed": "failure", "error": "error", "skipped": "skipped",
                               "not run": "skipped"}
#: The case a run that did not complete gets (its class, not a rule's: a reader tells it apart).
INCOMPLETE_CASE = ("run[incomplete]", "vioconform.run")
_LINE_BREAK = re.compile(r"\r\n|[\r\n\t]")


def text(value: str) -> str:
    """``value`` as every output keeps it: secrets masked, characters XML cannot hold removed."""
    return str(_clean_illegal_xml_chars(scrub(value)))


def attribute(value: str) -> str:
    """``value`` as an XML attribute junit-xml writes reads back: :func:`text`, each line break or tab a space."""
    return _LINE_BREAK.sub(" ", text(value))


def _body(r: Record) -> str:
    """The whole text of a failure or error: its message, then what pytest reported if that adds to it."""
    details = r.details.strip()
    if not details or r.message.strip() in details:
        return details or r.message
    return f"{r.message}\n\n{details}"


def case_properties(r: Record) -> dict[str, str]:
    """A case's properties: its measured numbers, a failure's ``blame`` and ``blame_reason``, and
    ``reproducer``, its reproducer bundle's directory where one was written."""
    props = {k: str(v) for k, v in r.measured().items()}
    if r.outcome == "failed":
        props["blame"] = r.blame or "unknown"
        props["blame_reason"] = r.blame_reason or "the rule failed outside its verdict: no layer was judged"
    if r.reproducer:
        props["reproducer"] = r.reproducer
    return {text(k): text(v) for k, v in props.items()}


@dataclass(frozen=True)
class CaseData:
    """One rule on one configuration, as the JUnit file writes it and the store keeps it."""

    record: Record
    name: str
    classname: str
    elapsed_s: float
    #: the JUnit element of its outcome: "failure", "error", "skipped"; None when it passed
    tag: str | None
    #: the element's ``message``: a failure's or an error's headline, a skip's message
    message: str
    #: a failure's or an error's whole text
    body: str
    properties: dict[str, str]

    def read(self) -> CaseRead:
        return CaseRead(self.name, self.classname, self.tag, self.message, self.properties)


#: The message of a failure or an error that has none of its own: junit-xml writes no element for a
#: failure with neither message nor text, which a reader would take for a pass.
UNSAID = {"failure": "FAIL: no message recorded", "error": "no outcome recorded"}


def case_data(r: Record) -> CaseData:
    """The case of one settled record (an undecided one is an error: never a pass)."""
    tag = TAGS.get(r.outcome or "error", "error")
    message = r.message if tag == "skipped" else r.headline or UNSAID.get(tag or "", "")
    return CaseData(r, f"{r.rule}[{r.config}]", f"vioconform.{r.rule}", round(r.duration_s, 3), tag,
                    attribute(message), text(_body(r)) if tag in ("failure", "error") else "", case_properties(r))


@dataclass(frozen=True)
class BuiltRun:
    """The run as its outputs say it: the cases, the suite's properties (the run's own, what the fixtures
    learnt and how it ended), its start and its machine."""

    cases: tuple[CaseData, ...]
    suite_properties: dict[str, str]
    status: RunStatus | None
    #: the run's start in UTC with its offset, to the second (the suite's ``timestamp``); None: not given
    timestamp: str | None
    hostname: str | None

    @property
    def incomplete(self) -> bool:
        return self.status is not None and not self.status.complete

    @property
    def duration_s(self) -> float:
        """The suite's ``time``: its cases' times added up, as junit-xml adds them."""
        return float(sum(c.elapsed_s for c in self.cases if c.elapsed_s))

    def run_data(self, directory: Path) -> RunData:
        """What the store keeps of the run whose results directory is ``directory``: exactly what
        :func:`reports.store.read_results_dir` reads back from this run's ``junit.xml``."""
        cases = [c.read() for c in self.cases]
        if self.incomplete:
            cases.append(CaseRead(*INCOMPLETE_CASE, "error", "", {}))
        started = stamped(self.timestamp)
        return run_data(self.suite_properties, cases, str(directory.resolve()), str(directory), started,
                        "timestamp" if started is not None else None, self.duration_s, self.hostname)


def build_run(records: Iterable[Record], suite_properties: dict[str, str] | None = None,
              status: RunStatus | None = None, started: dt.datetime | None = None,
              hostname: str | None = None) -> BuiltRun:
    """The run's data from its settled records: ``suite_properties`` (the run's own, then what the fixtures
    learnt), ``status`` (how it ended: added to the suite's properties), ``started`` (aware) and
    ``hostname``."""
    props = dict(suite_properties or {})
    if status is not None:
        props.update(status.properties())
    stamp = started.astimezone(dt.UTC).isoformat(timespec="seconds") if started is not None else None
    return BuiltRun(tuple(case_data(r) for r in records), {text(k): attribute(v) for k, v in props.items()}, status,
                    stamp, hostname)
