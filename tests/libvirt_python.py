"""Whether libvirt-python is importable, for the fast lane's few tests that need it.

``tox -e unit`` and ``tox -e lint`` install requirements-dev.txt only: no libvirt-python (it builds
from source against libvirt-dev, an apt package, so it needs root). The host-side tests of the
libvirt backend and the tools built on it skip there with :data:`REASON`; ``tox -e test`` (CI)
installs libvirt-python and runs them with the rest of the fast lane.
"""

from __future__ import annotations

import importlib.util

import pytest

#: True where ``import libvirt`` would work.
AVAILABLE = importlib.util.find_spec("libvirt") is not None
REASON = "needs libvirt-python (tox -e test installs it; tox -e unit does not)"
#: Mark for a test (or ``pytestmark`` of a module) that imports the libvirt backend.
needs_libvirt = pytest.mark.skipif(not AVAILABLE, reason=REASON)

