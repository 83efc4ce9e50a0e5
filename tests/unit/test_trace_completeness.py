"""A trace that misses requests the disk's own counters saw is refused, with the reason.

On AHCI QEMU 7.2 traces only NCQ commands; a guest with NCQ off (queue_depth 1, the tcq-off
fault) sends non-queued ATA commands that no event shows: measured, 0 traced of about 300.
"""

from __future__ import annotations

import pytest

from hypervisors.libvirt.trace import CounterRead, check_complete, check_isolated, completed_between, counter_window
from model.errors import HypervisorError, TraceIncomplete
from model.parse.qemutrace import TracedRequest


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


def test_only_requests_completed_between_the_counter_reads_are_compared() -> None:
    # the events are on a little before the first counter read and after the last one
    def req(start: int, end: int, flush: bool = False) -> TracedRequest:
        return TracedRequest(start, end, False, flush, 0, 0 if flush else 4096, 1)

    requests = [req(90, 99), req(95, 100), req(100, 150), req(150, 200), req(160, 170, flush=True), req(195, 201)]
    assert completed_between(requests, 100, 200) == 3  # ends at 100, 150, 200; not the flush, not 99 or 201


def test_a_slow_counter_read_widens_the_window_bounds_not_the_estimate() -> None:
    # One request completes every 10 us from 0 to 990. The first counter read took 100-300 us
    # (the counters were read somewhere in it), the second 700-900.
    requests = [TracedRequest(t - 5, t, False, False, 0, 4096, 1) for t in range(0, 1000, 10)]
    edges = counter_window(requests, CounterRead(100, 300), CounterRead(700, 900))
    assert edges.inner == completed_between(requests, 300, 700) == 41
    assert edges.middle == completed_between(requests, 200, 800) == 61
    assert edges.outer == completed_between(requests, 100, 900) == 81
    # a counter delta anywhere in [41, 81] (here 75, the counters read late in both trips) is
    # consistent: the checks take the surely-inside count for isolation and the possibly-inside
    # one for completeness
    check_isolated(edges.inner, 75, "trace")
    check_complete(edges.outer, 75, "trace", "scsi")
    with pytest.raises(TraceIncomplete):
        check_complete(edges.middle, 75, "trace", "scsi")  # what the middle alone would have said
