"""Realtime virtualDisk counters of a VM's disks, read through vCenter's PerformanceManager.

Counters are looked up by ``group.name.rollup`` (their ids differ between vCenter and ESXi),
queried per disk instance ("scsi0:1", "nvme0:0") at ``intervalId=20`` in CSV format (the
"normal" format drops zero samples on vcsim) and always with a ``startTime`` (without one
vcsim generates a year of samples). Parsing and arithmetic live in ``perfdata``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime

from pyVmomi import vim

from hypervisors.vsphere.perfdata import (
    DISK_COUNTERS,
    NS_PER_S,
    PerfSample,
    counters_from_samples,
    inside,
    parse_perf_csv,
)
from hypervisors.vsphere.vcenter import VCenter
from model.errors import HypervisorError
from model.parse.blockstats import HostBlockCounters

#: vCenter's realtime interval id; ESXi keeps about an hour of these 20 s samples.
REALTIME_INTERVAL_ID = 20
REALTIME_KEPT_S = 3600


def _utc(ns: int) -> datetime:
    return datetime.fromtimestamp(ns / NS_PER_S, tz=UTC)


class DiskPerf:
    """Queries the realtime virtualDisk counters of one vCenter."""

    def __init__(self, vc: VCenter) -> None:
        self.vc = vc
        self.manager = vc.content.perfManager
        self._info = {f"{c.groupInfo.key}.{c.nameInfo.key}.{c.rollupType}": c for c in self.manager.perfCounter}
        self._names = {c.key: name for name, c in self._info.items()}

    def server_now_ns(self) -> int:
        """vCenter's clock: sample times are on it, so windows are measured on it too."""
        now: datetime = self.vc.si.CurrentTime()
        return int(now.timestamp()) * NS_PER_S + now.microsecond * 1000

    def counter_id(self, name: str) -> int:
        try:
            return int(self._info[name].key)
        except KeyError:
            raise HypervisorError(f"vCenter {self.vc.config.host} has no performance counter {name}") from None

    def check_available(self, vm: vim.VirtualMachine, instance: str,
                        names: Sequence[str] = DISK_COUNTERS) -> None:
        """Raise, naming each counter's statistics level, if a counter is not collected for this disk."""
        ids = {name: self.counter_id(name) for name in names}
        offered = {(m.counterId, m.instance) for m in
                   self.manager.QueryAvailablePerfMetric(entity=vm, intervalId=REALTIME_INTERVAL_ID)}
        missing = [n for n, i in ids.items() if (i, instance) not in offered and (i, "*") not in offered]
        if missing:
            levels = ", ".join(f"{n} (level {self._info[n].level}, per-device level {self._info[n].perDeviceLevel})"
                               for n in missing)
            raise HypervisorError(
                f"VM {vm.name} disk {instance}: not collected at the realtime interval: {levels}. Raise the "
                f"statistics level of the vCenter (Configure > Settings > Statistics) to the per-device level "
                f"shown, or point the backend at the ESXi host, which collects every realtime counter")

    def query(self, vm: vim.VirtualMachine, instance: str, since_ns: int,
              names: Sequence[str] = DISK_COUNTERS) -> list[PerfSample]:
        """The samples of one disk that end after ``since_ns``, oldest first."""
        metric_ids = [vim.PerformanceManager.MetricId(counterId=self.counter_id(n), instance=instance) for n in names]
        spec = vim.PerformanceManager.QuerySpec(entity=vm, metricId=metric_ids, intervalId=REALTIME_INTERVAL_ID,
                                                format="csv", startTime=_utc(since_ns))
        result = self.manager.QueryPerf(querySpec=[spec])
        if not result:
            return []
        series = {self._names.get(v.id.counterId, str(v.id.counterId)): v.value
                  for v in result[0].value if v.id.instance == instance}
        absent = [n for n in names if n not in series]
        if absent and result[0].sampleInfoCSV:
            raise HypervisorError(f"VM {vm.name} disk {instance}: QueryPerf returned no {', '.join(absent)}; "
                                  f"check_available() lists the statistics level these need")
        return parse_perf_csv(result[0].sampleInfoCSV, {n: series.get(n, "") for n in names})

    def window(self, vm: vim.VirtualMachine, instance: str, start_ns: int, end_ns: int,
               min_samples: int = 2, wait_s: float = 60.0) -> list[PerfSample]:
        """The samples wholly inside [start_ns, end_ns] (vCenter clock), waiting for the last to be published.

        Raises when fewer than ``min_samples`` fit: the measured interval was too short.
        """
        deadline = time.monotonic() + wait_s
        while True:
            samples = self.query(vm, instance, since_ns=start_ns)
            interval_ns = (samples[0].interval_s if samples else REALTIME_INTERVAL_ID) * NS_PER_S
            last_whole_end = end_ns // interval_ns * interval_ns
            if (samples and samples[-1].end_ns >= last_whole_end) or time.monotonic() > deadline:
                break
            time.sleep(min(2.0, interval_ns / NS_PER_S / 4))
        found = inside(samples, start_ns, end_ns)
        if len(found) < min_samples:
            span_s = (end_ns - start_ns) / NS_PER_S
            raise HypervisorError(
                f"VM {vm.name} disk {instance}: the {span_s:.0f} s interval holds {len(found)} whole realtime "
                f"sample(s) of {interval_ns // NS_PER_S} s, {min_samples} needed: measure for at least "
                f"{(min_samples + 1) * interval_ns // NS_PER_S} s")
        return found


class DiskCounterTracker:
    """Cumulative counters of one disk since ``origin_ns``, kept by merging each query's new samples.

    Realtime samples are kept about an hour, so the tracker remembers every sample it has seen:
    counters of a guest that lives longer still only grow.
    """

    def __init__(self, perf: DiskPerf, vm: vim.VirtualMachine, instance: str, origin_ns: int) -> None:
        self.perf, self.vm, self.instance, self.origin_ns = perf, vm, instance, origin_ns
        self._samples: dict[int, PerfSample] = {}

    def counters(self) -> HostBlockCounters:
        newest = max(self._samples, default=self.origin_ns)
        since = max(newest, self.perf.server_now_ns() - REALTIME_KEPT_S * NS_PER_S)
        for sample in self.perf.query(self.vm, self.instance, since_ns=since):
            self._samples[sample.end_ns] = sample
        return counters_from_samples(self._samples.values(), self.origin_ns)
