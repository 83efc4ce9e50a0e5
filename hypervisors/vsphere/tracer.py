"""vscsiStats as the suite's exact host-side source on vSphere (the RequestTracer protocol).

vscsiStats gives histograms, not single requests: ``HostTrace.requests`` is empty and the
rules read percentiles from the outstanding-I/O histogram, to vscsiStats's bucket resolution.
Over SSH when the config names an ESXi key or host key, else through the host's
ServiceManager "VscsiStats" service.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hypervisors.base import Guest
from hypervisors.vsphere.vscsistats import VscsiStatsInterval
from model.errors import HypervisorError
from model.types import AttachedDisk, HostTrace

if TYPE_CHECKING:
    from hypervisors.vsphere.backend import VSphereBackend

SOURCE = "exact (vscsiStats histograms)"


class VscsiStatsTracer:
    def __init__(self, backend: "VSphereBackend", guest: Guest, disk: AttachedDisk, via: str) -> None:
        self.backend, self.guest, self.disk, self.via = backend, guest, disk, via
        self._interval: VscsiStatsInterval | None = None

    def start(self) -> None:
        source = self.backend.vscsistats(self.guest, self.via)
        self._interval = VscsiStatsInterval(source, self.guest.extra["vm"], self.disk.host_ref)
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
        if self._interval is not None:
            interval, self._interval = self._interval, None
            interval.stop()
