"""The rules outside the default suite (``--with-rules``) on the healthy embedded guest: one run of
identity, block-size, write-cache and throttle on virtio-scsi and virtio-blk, the default disk,
shared by the module. Each rule's own e2e file checks its healthy figures on it (their
``healthy_figures``) and keeps the runs that differ: its faults, its other disk settings."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bench.suite_run import SuiteRun, run_suite_at
from tests.e2e import test_block_size, test_identity, test_throttle, test_write_cache

#: rule -> (its suite test's ``-k`` word, its e2e file's check of the healthy run)
OPT_IN: dict[str, tuple[str, Callable[[SuiteRun], None]]] = {
    "identity": ("identity", test_identity.healthy_figures),
    "block-size": ("test_block_size", test_block_size.healthy_figures),
    "write-cache": ("write_cache", test_write_cache.healthy_figures),
    "throttle": ("throttle", test_throttle.healthy_figures),
}
CONFIGS = ("libvirt:virtio-scsi:latency5ms", "libvirt:virtio-blk:latency5ms")


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> SuiteRun:
    return run_suite_at(tmp_path_factory.mktemp("opt-in") / "results", "--controllers", "virtio-scsi,virtio-blk",
                        "--with-rules", ",".join(OPT_IN), "-k", " or ".join(word for word, _ in OPT_IN.values()))


def test_every_rule_outside_the_default_suite_passes(healthy: SuiteRun) -> None:
    assert healthy.returncode == 0, healthy.output[-3000:]
    assert set(healthy.outcomes()) == {f"{rule}[{c}]" for rule in OPT_IN for c in CONFIGS}, healthy.output[-3000:]
    assert healthy.left_behind == []


@pytest.mark.parametrize("rule", OPT_IN)
def test_each_rules_healthy_figures(rule: str, healthy: SuiteRun) -> None:
    OPT_IN[rule][1](healthy)
