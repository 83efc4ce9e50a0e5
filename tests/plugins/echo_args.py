"""A pytest plugin (``-p tests.plugins.echo_args``) that writes the arguments pytest was started with to
``$ECHO_ARGS_FILE`` (JSON) and exits with ``$ECHO_EXIT`` at once, before any option is checked: what a
wrapper handed pytest, and whether pytest's exit code comes back through it unchanged."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    Path(os.environ["ECHO_ARGS_FILE"]).write_text(json.dumps(list(early_config.invocation_params.args)))
    sys.exit(int(os.environ.get("ECHO_EXIT", "0")))
