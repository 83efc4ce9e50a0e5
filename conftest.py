"""Registers vioconform as a pytest plugin: options, fixtures, markers, reports.

The conformance checks are in suites/, the project's own tests in tests/.
"""

pytest_plugins = ["fixtures.options", "fixtures.session", "reports.plugin", "reports.redact"]
