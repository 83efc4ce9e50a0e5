"""A pytest plugin for the suite's own tests (``-p tests.plugins.stall_worker``): the xdist worker
named by ``$VIOCONFORM_TEST_STALL_WORKER`` stops in its configure step, as a worker that never
starts would, so the controller's start watch (fixtures/workerstart.py) fires."""

from __future__ import annotations

import os
import time

import pytest

STALL_S = 600.0


def stalled_before_collection() -> None:
    time.sleep(STALL_S)


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and workerinput.get("workerid") == os.environ.get("VIOCONFORM_TEST_STALL_WORKER"):
        stalled_before_collection()
