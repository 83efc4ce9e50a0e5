"""The queue-depth rule through a real guest: tcq-off fails with the numbers, nothing is left behind.
(The healthy guest passing every rule is tests/e2e/test_rules_guest.py.)"""

from __future__ import annotations

import re

from tests.e2e.conftest import SuiteRun

SCSI = "queue-depth[libvirt:virtio-scsi:latency5ms]"
BLK = "queue-depth[libvirt:virtio-blk:latency5ms]"


def test_tcq_off_fails_with_the_numbers(run_suite) -> None:  # type: ignore[no-untyped-def]
    run: SuiteRun = run_suite("--controllers", "virtio-scsi,virtio-blk", "--inject", "tcq-off", "-k", "queue_depth")
    assert run.returncode == 1, run.output
    cases = run.cases()
    failure = cases[SCSI].find("failure")
    assert failure is not None, run.output
    text = failure.get("message", "")
    # offered depth, guest-observed and host-observed depths, IOPS
    assert re.search(r"offered\s+32: IOPS [\d,]+; guest: fio at depth 32, aqu-sz [\d.]+, inflight [\d.]+; host depth", text), text
    host = float(SuiteRun.props(cases[SCSI])["qd32_host_depth"])
    assert host < 3, host
    skipped = cases[BLK].find("skipped")
    assert skipped is not None and "no SCSI queue_depth" in skipped.get("message", "")
    assert run.left_behind == []
