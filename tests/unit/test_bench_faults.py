"""bench.rules --faults runs the default suite with each fault: a fault whose rule is outside the default suite
(throttle-burst's throttle) gets its rule with --with-rules, or the rule it must fail would not run."""

from __future__ import annotations

from bench.rules import fault_args


def test_an_opt_in_rules_fault_runs_with_its_rule() -> None:
    assert fault_args("throttle-burst") == ("--inject", "throttle-burst", "--with-rules", "throttle")
    assert fault_args("tcq-off") == ("--inject", "tcq-off")
