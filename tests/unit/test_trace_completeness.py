"""A trace that misses requests the disk's own counters saw is refused, with the reason.

On AHCI QEMU 7.2 traces only NCQ commands; a guest with NCQ off (queue_depth 1, the tcq-off
fault) sends non-queued ATA commands that no event shows: measured, 0 traced of about 300.
"""

from __future__ import annotations

import pytest

from hypervisors.base import HypervisorError, TraceIncomplete
from hypervisors.libvirt.trace import check_complete, check_isolated


def test_a_trace_missing_the_counted_requests_is_incomplete() -> None:
    with pytest.raises(TraceIncomplete, match=r"holds 0 of the disk's 300 requests; .*non-queued ATA commands") as e:
        check_complete(0, 300, "trace of sdb", "ahci")
    assert e.value.gap.startswith("traced 0 of 300 requests; QEMU 7.2 traces only AHCI's NCQ commands")
    with pytest.raises(TraceIncomplete, match=r"its scsi trace events do not show"):
        check_complete(5000, 8000, "trace of sdb", "scsi")


def test_window_edges_are_within_tolerance() -> None:
    # a window opened mid-run at depth 32 misses the completions of requests begun before it
    check_complete(7968, 8000, "trace", "scsi")
    check_complete(0, 5, "trace", "ahci")  # a few requests: the fixed slack of 10
    check_isolated(8030, 8000, "trace")


def test_more_requests_than_counted_is_another_disk() -> None:
    with pytest.raises(HypervisorError, match="another disk of the same controller family was busy") as e:
        check_isolated(16000, 8000, "trace")
    assert not isinstance(e.value, TraceIncomplete)
