"""The queue-depth rule through a real guest: a guest capping its own queue fails naming the limit, nothing
is left behind. (The healthy guest passing every rule is tests/e2e/test_rules_guest.py; tcq-off failing with
the numbers is tests/e2e/test_reproducer.py's, whose run of it also writes the bundle it replays.)"""

from __future__ import annotations

import re

from tests.e2e.conftest import SuiteRun

SCSI = "queue-depth[libvirt:virtio-scsi:latency5ms]"
BLK = "queue-depth[libvirt:virtio-blk:latency5ms]"


def test_a_guest_capping_its_own_queue_fails_naming_the_limit(run_suite) -> None:  # type: ignore[no-untyped-def]
    """nr_requests 8 under an offered depth of 32: the guest's block layer holds about 6, the host sees
    about as many. That passed as "a busy or slow guest CPU"; it is the guest's configuration."""
    run: SuiteRun = run_suite("--controllers", "virtio-blk,virtio-scsi", "-k", "queue_depth",
                              "--guest-setup", "echo 8 > /sys/block/{disk}/queue/nr_requests")
    assert run.returncode == 1, run.output
    cases = run.cases()
    for case, device in ((BLK, 256), (SCSI, 128)):
        failure = cases[case].find("failure")
        assert failure is not None, run.output
        text = failure.text or ""  # the whole explanation; the message is its first FAIL: line
        assert re.search(r"the guest's configuration caps the depth under the offered 32: /sys/block/\w+/queue/"
                         rf"nr_requests = 8 \(the driver set 256\), under the device's own limit {device}\. The layer "
                         "that kept the depth low is the guest configuration", text), text
        assert "a busy or slow guest CPU" not in text, text
        props = SuiteRun.props(cases[case])
        assert props["guest_limit_nr_requests"] == "8" and float(props["qd32_guest_cpu_busy_pct"]) >= 0, props
    assert run.left_behind == []
