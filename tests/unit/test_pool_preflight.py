"""A pool's hosts are checked at once: a pool of silent hosts costs one connect timeout, not one per
host (before, three silent hosts took 31 s, each check waiting out its own SSH timeout in turn)."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import Any

import pytest

from fixtures import preflight
from fixtures.options import SuiteOptions
from hypervisors.libvirt.inventory import HostSpec
from model.errors import HypervisorError

HOSTS = (HostSpec("a", "qemu+ssh://root@a/system"), HostSpec("b", "qemu+ssh://root@b/system"),
         HostSpec("c", "qemu+ssh://root@c/system"))


def _opts() -> SuiteOptions:
    base = SuiteOptions("libvirt", None, "qemu:///system", "auto", ("virtio-blk",), "latency", 5.0, 3.0,
                        (), (), None, 120.0, Path("r"), Path("r/junit.xml"))
    return dataclasses.replace(base, hosts=HOSTS)


def test_every_host_of_a_pool_is_checked_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each check waits until all three are waiting: only checks that run at the same time get past
    the barrier (no clock involved, so a loaded machine cannot fail it)."""
    barrier = threading.Barrier(len(HOSTS), timeout=60)

    class Backend:
        @classmethod
        def validate_options(cls, opts: Any) -> None:
            barrier.wait()  # BrokenBarrierError after 60 s if the checks ran one after another
            if "b" in opts.libvirt_uri:
                raise HypervisorError("no libvirt daemon answers on b")

    monkeypatch.setattr(preflight, "get_backend_class", lambda name: Backend)
    assert preflight.check_hosts(_opts()) == {"b": "no libvirt daemon answers on b"}
