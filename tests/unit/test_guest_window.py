"""The guest's diskstats window placed on the host's clock, where QEMU's trace timestamps live."""

from __future__ import annotations

import pytest

from measure.window import GuestClockRead, window_on_host_clock


def test_window_keeps_the_guest_length_and_is_placed_by_the_shorter_round_trip() -> None:
    # Recorded shape: guest uptime 100.000 s then 102.060 s; SSH round trips of 240 ms and 40 ms
    # (the first under load). The guest read its clock somewhere inside each round trip.
    first = GuestClockRead(100_000.0, host_sent_s=5000.000, host_received_s=5000.240)
    last = GuestClockRead(102_060.0, host_sent_s=5002.080, host_received_s=5002.120)
    start, end, unc = window_on_host_clock(first, last)
    assert end - start == pytest.approx(2.060)  # the guest's own elapsed time
    assert end == pytest.approx(5002.100)  # the middle of the 40 ms round trip
    assert unc == pytest.approx(0.020)  # half of it; the 240 ms one would give 120 ms
    # the first read, placed by its own round trip, lies inside the window's uncertainty
    assert abs(start - (first.host_sent_s + first.host_received_s) / 2) <= first.round_trip_s / 2 + unc


def test_both_ends_shift_together() -> None:
    a = GuestClockRead(10.0, 1.000, 1.050)
    b = GuestClockRead(2010.0, 3.000, 3.100)
    start, end, unc = window_on_host_clock(a, b)
    assert (start, end, unc) == pytest.approx((1.025, 3.025, 0.025))
