"""What every rule module declares beside its judgement, and the words it declares it in.

A rule lives in two files and a page: ``model/rules/<rule>.py`` (its judgement, the typed figures it judges, what
it records and how ``compare`` reads it) and ``suites/test_<rule>.py`` (what it measures: which fio
jobs, which windows), and ``docs/rules/<rule>.md``. The rule module declares (:class:`RuleModule`):

- ``RULE``: the rule's name (``"queue-depth"``): its suite's ``@pytest.mark.rule``, its JUnit cases,
  its page ``docs/rules/<rule>.md``;
- ``METRICS``: for every property the rule records (its judge's and its suite's ``record.add``), a
  regular expression over the whole name and the :class:`MetricSpec` of what it matches. The
  patterns of every rule and the shared ones (``model.across.metrics.SHARED_METRICS``) are disjoint: a
  name matches one of them or none;
- ``MIN_EFFECTS``: for each metric whose run-to-run noise was measured (``python -m bench.noise``),
  the smallest relative change of its median ``compare`` and ``--baseline`` report (model/across/moves.py
  says how each is derived from the noise);
- ``BLAME``: the settings its verdict depends on (model/blame.py's :class:`BlameSettings`): a failure is
  blamed on the first layer that changed one of them;
- ``DEFAULT_REPEATS``: how many times it measures without ``--repeats``, and ``REPEATABLE``: whether
  ``--repeats`` applies to it at all (a rule that reads settings, which do not vary, says False);
- ``HOST_CPU_BOUND``: regular expressions over the whole name of those of its metrics that follow the
  host CPU the guest gets (IOPS, latencies); what every rule records alike, such as depths, is
  model/across/contention.py's;
- optionally ``OPT_IN = True``: the rule is outside the default suite (the default suite's time is a
  budget) and runs only where ``--with-rules`` names it (fixtures/opt_in.py);
- optionally ``OPTIONS``: the command-line options only this rule reads, as data
  (model/judging/rule_option.py's :class:`RuleOption`); the suite registers them (fixtures/options_rules.py)
  and its suite file reads them with ``suite_options.option(...)``;
- and one public function ``judge_<...>`` that returns its verdict (model/judging/verdict.py).

model/rules/__init__.py finds every module of model/rules/ (``RULE_MODULES``) and refuses one that does not
declare every name :class:`RuleModule` lists; model/across/metrics.py and model/across/moves.py collect what
they declare.

Example (a rule that records ``qd32_iops`` and a bar it derived)::

    METRICS: Metrics = ((r"qd\\d+_iops", MetricSpec("IO/s", HIGHER)),
                        (r"iops_scaling_required", MetricSpec("x", PARAM)))
    MIN_EFFECTS: Mapping[str, float] = {"qd32_iops": 0.078}
    BLAME = BlameSettings(frozenset({"queue_depth", "nr_requests"}))
    DEFAULT_REPEATS = 1
    REPEATABLE = True
    HOST_CPU_BOUND: tuple[str, ...] = (r"qd\\d+_iops",)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

from model.blame import BlameSettings

Direction = Literal["higher-better", "lower-better", "parameter"]
DIRECTIONS: tuple[Direction, ...] = ("higher-better", "lower-better", "parameter")

HIGHER: Direction = "higher-better"
LOWER: Direction = "lower-better"
PARAM: Direction = "parameter"


@dataclass(frozen=True)
class MetricSpec:
    """What a recorded property means for the results store and ``compare``: its unit and which way is better.

    - ``higher-better``: more is better (IOPS, the depth that reaches the host, request sizes);
    - ``lower-better``: less is better (latency, split factor, misaligned requests);
    - ``parameter``: a setting, a count, text or a bar the rule derived; a change is reported as a
      change, never as better or worse.
    """

    unit: str
    direction: Direction


#: (regular expression over the whole property name, what the names it matches mean)
Metrics = tuple[tuple[str, MetricSpec], ...]


class RuleModule(Protocol):
    """What every module of model/rules/ that is a rule declares (see the module docstring)."""

    RULE: str
    METRICS: Metrics
    MIN_EFFECTS: Mapping[str, float]
    BLAME: BlameSettings
    DEFAULT_REPEATS: int
    REPEATABLE: bool
    HOST_CPU_BOUND: tuple[str, ...]
