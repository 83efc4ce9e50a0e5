"""The rules (docs/rules/), one module per rule, free of any hypervisor or SSH import.

Each rule module judges numbers measured on both sides and returns a ``RuleVerdict``
(model/judging/verdict.py): pass or fail, the problems in sentences that carry the measured and
expected values, notes, the properties that go into the JUnit record and the figures the report
draws (model/judging/figures.py). It also declares what it records: the unit and direction of every property and
the minimum effects ``compare`` needs (model/judging/spec.py). :data:`RULE_MODULES` is every module of
this package, found by name: a rule is picked up by being here, and nothing but rules is;
model/across/metrics.py and model/across/moves.py collect their declarations from it;
model/across/against_baseline.py compares any rule's numbers with a stored run (``--baseline``).

Everything else that depends on a rule reads the rule's own declarations from here, by the rule's name
(:func:`rule_module`): the settings a failure is blamed on (:func:`blame`, model/blame.py), how many
times it repeats (fixtures/options.py), which of its metrics follow the host CPU
(model/across/contention.py), the options it declares (:data:`RULE_OPTIONS`, fixtures/options_rules.py).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable
from typing import cast, get_type_hints

from model.blame import Blame, Trail, layer_at_fault
from model.judging.rule_option import RuleOption
from model.judging.spec import RuleModule


def _declared(name: str) -> RuleModule:
    """The rule module ``model.rules.<name>``, checked at import for every name RuleModule lists (a
    module that lacks one is a TypeError naming it: this package holds rules and nothing else)."""
    module = importlib.import_module(f"{__name__}.{name}")
    missing = [attr for attr in get_type_hints(RuleModule) if not hasattr(module, attr)]
    if missing:
        raise TypeError(f"model/rules/{name}.py declares no {', '.join(missing)}: every module of model/rules/ is "
                        "a rule and declares what model/judging/spec.py's RuleModule lists")
    return cast(RuleModule, module)


#: Every rule module: every module of this package, found by name (a new rule is picked up by being
#: here), in the order of their names.
RULE_MODULES: tuple[RuleModule, ...] = tuple(_declared(m.name) for m in pkgutil.iter_modules(__path__))
_BY_NAME: dict[str, RuleModule] = {m.RULE: m for m in RULE_MODULES}


def rule_module(rule: str) -> RuleModule:
    """The module of the rule named ``rule`` ("queue-depth"); KeyError for a name no module declares."""
    return _BY_NAME[rule]


def opt_in(rule: str) -> bool:
    """Whether ``rule`` is outside the default suite (its module's optional ``OPT_IN``): it runs only
    where ``--with-rules`` names it. A name no module declares (a test's own rule) is in the default suite."""
    return bool(getattr(_BY_NAME.get(rule), "OPT_IN", False))


def opt_in_rules() -> tuple[str, ...]:
    """The rules outside the default suite, in RULE_MODULES' order."""
    return tuple(m.RULE for m in RULE_MODULES if opt_in(m.RULE))


def declared_options(modules: Iterable[RuleModule]) -> tuple[RuleOption[object], ...]:
    """Every module's ``OPTIONS``, in their order; TypeError for a name two of them declare."""
    found: dict[str, str] = {}
    options: list[RuleOption[object]] = []
    for module in modules:
        for option in getattr(module, "OPTIONS", ()):
            if option.name in found:
                raise TypeError(f"model/rules/: {module.RULE} and {found[option.name]} both declare {option.name}: "
                                "an option belongs to one rule")
            found[option.name] = module.RULE
            options.append(option)
    return tuple(options)


#: The options the rules declare (each module's optional ``OPTIONS``, model/judging/rule_option.py), in
#: RULE_MODULES' order: fixtures/options_rules.py registers them.
RULE_OPTIONS: tuple[RuleOption[object], ...] = declared_options(RULE_MODULES)


def blame(rule: str, trails: Iterable[Trail], hint: Blame | None = None) -> Blame:
    """The layer at fault for a failing verdict of ``rule`` (model/blame.py): the settings its module
    declares (``BLAME``) decide; a name no module declares depends on every setting."""
    module = _BY_NAME.get(rule)
    return layer_at_fault(module.BLAME if module is not None else None, trails, hint)
