"""A pytest plugin (``-p tests.long_store_wait``) for the tests that signal a run while it waits for
a store that never answers: the store's connect timeout becomes :data:`LONG_CONNECT_TIMEOUT_S`, so
a run that ends within the test's bound can only have been ended by the signal, not by the
timeout, however slow a loaded machine makes the run's exit."""

from __future__ import annotations

from reports.store import connection

LONG_CONNECT_TIMEOUT_S = 120.0
connection.STORE_CONNECT_TIMEOUT_S = LONG_CONNECT_TIMEOUT_S
