"""The rules (docs/rules/), one module per rule, free of any hypervisor or SSH import.

Each rule module judges numbers measured on both sides and returns a ``RuleVerdict``
(verdict.py): pass or fail, the problems in sentences that carry the measured and expected
values, notes, the properties that go into the JUnit record and the figures the report draws
(figures.py). It also declares what it records: the unit and direction of every property and
the minimum effects ``compare`` needs (spec.py). :data:`RULE_MODULES` lists the rules;
model/across/metrics.py and model/across/moves.py collect their declarations from it. baseline.py compares any
rule's numbers with a stored run (``--baseline``).
"""

from model.rules import (
    alignment,
    buffered_direct,
    data_integrity,
    direct_io,
    discard,
    error_propagation,
    hotplug,
    io_size,
    limits,
    multi_queue,
    queue_depth,
    resize,
    stall_tolerance,
)
from model.rules.spec import RuleModule

#: Every rule module, in the order of the rules' numbers (docs/rules/): each declares RULE, METRICS
#: and MIN_EFFECTS (model/rules/spec.py), which mypy checks here.
RULE_MODULES: tuple[RuleModule, ...] = (queue_depth, io_size, direct_io, buffered_direct, alignment, limits,
                                        multi_queue, data_integrity, error_propagation, discard, resize, hotplug,
                                        stall_tolerance)
