"""vscsiStats as the suite's exact host-side source on vSphere (the RequestTracer protocol).

vscsiStats gives histograms, not single requests: ``HostTrace.requests`` is empty and the
rules read percentiles from the outstanding-I/O histogram, to vscsiStats's bucket resolution.
The tracer takes a ``VscsiStatsSource`` (over SSH to the ESXi host, or the host's ServiceManager
"VscsiStats" service) that the backend opened once and closes with itself: every window of a
run goes through the same source, so over SSH through the same connection.
"""

from __future__ import annotations

from hypervisors.vsphere.vscsistats import VscsiStatsInterval, VscsiStatsSource
from model.errors import HypervisorError
from model.types import HostTrace

SOURCE = "exact (vscsiStats histograms)"


class VscsiStatsTracer:
    """One window's histograms of disk ``label`` (e.g. ``scsi1:0``) of VM ``vm_name``; ``via`` names the source."""

    def __init__(self, source: VscsiStatsSource, vm_name: str, label: str, via: str) -> None:
        self.source, self.vm_name, self.label, self.via = source, vm_name, label, via
        self._interval: VscsiStatsInterval | None = None

    def start(self) -> None:
        self._interval = VscsiStatsInterval(self.source, self.vm_name, self.label)
        self._interval.begin()

    def stop(self) -> HostTrace:
        if self._interval is None:
            raise HypervisorError("vscsiStats tracer stopped before it was started")
        try:
            histograms = self._interval.end()
        finally:
            self.abort()
        return HostTrace(histograms, (), f"{SOURCE} via {self.via}")

    def abort(self) -> None:
        """Stop collection (the source stays open for the next window)."""
        if self._interval is not None:
            interval, self._interval = self._interval, None
            interval.stop()
