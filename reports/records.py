"""What each rule measured, kept per test so JUnit and the report can show the numbers."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Record:
    """One test's outcome: rule, configuration, measured properties, verdict text."""

    nodeid: str
    rule: str
    config: str
    properties: dict[str, str | float | int] = field(default_factory=dict)
    outcome: str = "passed"  # passed / failed / skipped / error
    message: str = ""
    details: str = ""
    duration_s: float = 0.0

    def add(self, **values: str | float | int) -> None:
        self.properties.update(values)
