"""The order QemuTracer switches a family's trace events in.

A completion event switched on after its start event loses the completion of any request
that starts and ends between the two QMP commands; that request then counts as in flight
for the whole window (CI saw a host depth of 2.0 at offered depth 1 on virtio-scsi).
The monitor is replaced by a recorder: what is checked is the sequence of QMP commands.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hypervisors.libvirt.trace import END_EVENTS_BY_FAMILY, FAMILY_EVENTS, QemuTracer
from model.parse.blockstats import HostBlockCounters
from model.parse.qemutrace import END_EVENTS, START_EVENTS


class RecordingMonitor:
    """A QmpChannel that records the events switched and has no counters."""

    domain = "dom"
    device = "ua-vioc-dut00"

    def __init__(self) -> None:
        self.switched: list[tuple[str, bool]] = []

    def execute(self, command: dict[str, Any]) -> dict[str, Any]:
        if command["execute"] == "trace-event-set-state":
            self.switched.append((command["arguments"]["name"], command["arguments"]["enable"]))
        return {"return": {}}

    def counters(self) -> HostBlockCounters:
        raise AssertionError("not read when only switching events")


@pytest.mark.parametrize("family", sorted(FAMILY_EVENTS))
def test_completions_are_on_before_starts_and_off_after_them(family: str, tmp_path: Path) -> None:
    mon = RecordingMonitor()
    tracer = QemuTracer(mon, family, tmp_path / "trace.log")
    tracer._set(True)
    on = [name for name, enabled in mon.switched if enabled]
    mon.switched.clear()
    tracer._set(False)
    off = [name for name, enabled in mon.switched if not enabled]
    ends = END_EVENTS_BY_FAMILY[family]
    assert set(on) == set(off) == set(FAMILY_EVENTS[family])
    first_start_on = min(i for i, n in enumerate(on) if n in START_EVENTS)
    assert all(on.index(e) < first_start_on for e in ends), on
    last_start_off = max(i for i, n in enumerate(off) if n in START_EVENTS)
    assert all(off.index(e) > last_start_off for e in ends), off


def test_every_family_has_start_and_end_events() -> None:
    for family, events in FAMILY_EVENTS.items():
        assert set(events) <= START_EVENTS | END_EVENTS
        assert END_EVENTS_BY_FAMILY[family] and set(END_EVENTS_BY_FAMILY[family]) <= END_EVENTS
