"""The rules (docs/rules/), one module per rule, free of any hypervisor or SSH import.

Each rule module judges numbers measured on both sides and returns a ``RuleVerdict``
(verdict.py): pass or fail, the problems in sentences that carry the measured and expected
values, notes, the properties that go into the JUnit record and the figures the report draws
(figures.py). It also declares what it records: the unit and direction of every property and
the minimum effects ``compare`` needs (spec.py). :data:`RULE_MODULES` lists the rules;
model/across/metrics.py and model/across/moves.py collect their declarations from it;
model/across/against_baseline.py compares any rule's numbers with a stored run (``--baseline``).

Everything else that depends on a rule reads the rule's own declarations from here, by the rule's name
(:func:`rule_module`): the settings a failure is blamed on (:func:`blame`, model/blame.py), how many
times it repeats (fixtures/options.py), which of its metrics follow the host CPU
(model/across/contention.py).
"""

from __future__ import annotations

from collections.abc import Iterable

from model.blame import Blame, Trail, layer_at_fault
from model.judging.spec import RuleModule
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

#: Every rule module, in the order of the rules' numbers (docs/rules/): each declares what
#: model/judging/spec.py's RuleModule lists, which mypy checks here.
RULE_MODULES: tuple[RuleModule, ...] = (queue_depth, io_size, direct_io, buffered_direct, alignment, limits,
                                        multi_queue, data_integrity, error_propagation, discard, resize, hotplug,
                                        stall_tolerance)
_BY_NAME: dict[str, RuleModule] = {m.RULE: m for m in RULE_MODULES}


def rule_module(rule: str) -> RuleModule:
    """The module of the rule named ``rule`` ("queue-depth"); KeyError for a name no module declares."""
    return _BY_NAME[rule]


def blame(rule: str, trails: Iterable[Trail], hint: Blame | None = None) -> Blame:
    """The layer at fault for a failing verdict of ``rule`` (model/blame.py): the settings its module
    declares (``BLAME``) decide; a name no module declares depends on every setting."""
    module = _BY_NAME.get(rule)
    return layer_at_fault(module.BLAME if module is not None else None, trails, hint)
