"""Verdict arithmetic of every rule (docs/rules/), one module per rule, free of any hypervisor or SSH import.

Each module takes numbers measured on both sides and returns a ``RuleVerdict``: pass or
fail, the problems in sentences that carry the measured and expected values, notes, and the
properties that go into the JUnit record.
"""
