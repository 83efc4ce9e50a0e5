"""What each measured property of a run means: its unit and which way is better.

A results directory's ``junit.xml`` carries every rule's measured numbers as per-test
properties (``qd32_iops``, ``split_factor``, ``latency_added_p50_us``...). The results store
and ``compare`` need, for each, a unit and a direction (model/judging/spec.py's ``MetricSpec``:
higher-better, lower-better, or a parameter).

Each rule module declares them for the properties it records (its ``METRICS``, beside its
judgement); :data:`SHARED_METRICS` declares what every rule's record can hold besides (its
repeats, notes, the ``--baseline`` comparison, a failure's blame, where a number came from) and
what two rules record alike. :data:`METRICS` collects them all, from the rule modules
model/rules/__init__.py lists; no two of its patterns match the same name
(tests/unit/test_metric_table.py). :func:`describe` looks a property name up in it. A name no
pattern knows is a ``parameter`` with unit ``""`` and ``known=False``: the store keeps it and
lists it, it is never dropped.

Repeats: a property named ``<name>.r<k>`` (``qd1_iops.r0``, ``qd1_iops.r1``...) is repeat ``k`` of
metric ``<name>``; a plain name is repeat 0. ``--repeats`` writes each repeat of every number so
(model/judging/verdict.py's ``repeat_properties``), and their median as the plain name, so that the
store keeps every sample and not only the median.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from model.judging.spec import PARAM, Direction, Metrics, MetricSpec
from model.rules import RULE_MODULES

#: ``<name>.r<k>``: repeat k of metric <name> (see the module docstring).
REPEAT = re.compile(r"^(?P<name>.+)\.r(?P<k>\d+)$")


@dataclass(frozen=True)
class MetricInfo:
    """One property name, resolved: the metric's name (without a repeat suffix), the repeat
    index, unit, direction, and whether a pattern in :data:`METRICS` knew it."""

    name: str
    repeat: int
    unit: str
    direction: Direction
    known: bool


#: What no single rule owns (same form as a rule module's METRICS, model/judging/spec.py).
SHARED_METRICS: Metrics = (
    # each disk's block sizes as asked, advertised and seen: limits' and block-size's
    (r"(dut|scratch)_(logical|physical)_block_size_(guest|configured|advertised)", MetricSpec("", PARAM)),
    # the request count of a window or a run: io-size's and alignment's
    (r"host_requests", MetricSpec("requests", PARAM)),
    # text beside the numbers: what each came from (host_source, write_cache_source, qd32_host_source...)
    (r".*_source", MetricSpec("", PARAM)),
    # a verdict's notes (model/judging/verdict.py) and its repeats (--repeats)
    (r"notes", MetricSpec("", PARAM)),
    (r"repeats|repeats_passed", MetricSpec("repeats", PARAM)),
    # the host CPU the guest's vCPUs got and waited for in the rule's most contended window
    # (suites/assertions.py, model/parse/hostcpu.py)
    (r"host_vcpu_(wait|run)_pct", MetricSpec("%", PARAM)),
    # the time bounds a verdict left unjudged because the host held the guest's vCPUs back, and why
    # (model/judging/host_busy.py: hotplug's, resize's)
    (r"host_held_back", MetricSpec("", PARAM)),
    # what a stored --baseline added (model/across/against_baseline.py): how many metrics, which, and why
    # some were not judged
    (r"baseline_metrics_(compared|judged|not_judged|worse)", MetricSpec("metrics", PARAM)),
    (r"baseline_worse|baseline_moved|baseline_not_judged", MetricSpec("", PARAM)),
    # a failed verdict's layer at fault and why (model/blame.py, reports/junit.py)
    (r"blame|blame_reason", MetricSpec("", PARAM)),
    # the kernel-log check of every rule (model/kernel_log_check.py): the kernel's lines during the rule, those
    # that failed it, their kinds, and the I/O errors in a range the rule injected errors into itself;
    # kernel_log_source (what read the log) is a .*_source above
    (r"kernel_log_(new|bad)_lines|kernel_log_expected_errors", MetricSpec("lines", PARAM)),
    (r"kernel_log_bad_kinds", MetricSpec("", PARAM)),
)

#: (pattern over the whole name, spec): every rule module's METRICS, then the shared ones.
METRICS: Metrics = (*(entry for rule in RULE_MODULES for entry in rule.METRICS), *SHARED_METRICS)

#: Properties recorded as evidence about the host, never compared across runs themselves: how long
#: the guest's vCPUs waited for a host CPU says how busy the host was, not how the guest behaved
#: (model/across/against_baseline.py uses it to decide what it may judge).
HOST_EVIDENCE: frozenset[str] = frozenset({"host_vcpu_wait_pct", "host_vcpu_run_pct"})

_COMPILED = tuple((re.compile(f"(?:{p})"), spec) for p, spec in METRICS)


def describe(prop: str) -> MetricInfo:
    """The metric a property name records (``qd1_iops.r2`` -> ``qd1_iops``, repeat 2, IO/s, higher-better)."""
    m = REPEAT.match(prop)
    name, repeat = (m.group("name"), int(m.group("k"))) if m else (prop, 0)
    for pattern, spec in _COMPILED:
        if pattern.fullmatch(name):
            return MetricInfo(name, repeat, spec.unit, spec.direction, True)
    return MetricInfo(name, repeat, "", PARAM, False)


def as_number(value: str) -> float | None:
    """A property value as a number (``"25.37"`` -> 25.37), or None for text (``"bpftrace"``)."""
    try:
        x = float(value)
    except ValueError:
        return None
    return x if math.isfinite(x) else None
