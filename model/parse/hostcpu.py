"""How much host CPU a guest's vCPUs got over a window, and how long they waited for it.

Under QEMU's TCG every guest instruction is emulated on a host thread, so a guest's throughput
follows the host CPU its vCPU threads get: with other work on the host, the same healthy guest
does a fraction of the IOPS (on a 2-core host with other guests busy, 539-4258 IOPS at depth 32
across nine healthy runs). KVM guests feel it too, less. The host's scheduler keeps, per thread,
the time it ran and the time it was runnable but waited in a run queue (``/proc/PID/task/TID/
schedstat``; libvirt's domain statistics ``vcpu.N.time`` and ``vcpu.N.delay``): the second is the
host's contention as the guest felt it, measured over the same window as the rule's numbers.

A comparison across runs (``--baseline``, ``python -m reports.compare``) uses it as evidence: numbers
that follow the host's CPU are judged against another run's only when neither run's vCPUs waited for the
host more than :data:`model.across.contention.WAIT_MAX_PCT` of the window.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class VcpuTimes:
    """Cumulative host-side times of a guest's vCPU threads, summed over its vCPUs, read at
    ``host_s`` (the host's monotonic clock, seconds)."""

    vcpus: int
    run_ns: int  # on a host CPU
    wait_ns: int  # runnable, waiting in a host run queue (schedstat's run delay)
    host_s: float


@dataclass(frozen=True)
class HostCpuShare:
    """Per vCPU, the share of a window its thread ran on a host CPU and the share it was
    runnable but waited for one, in % of the window's wall-clock time."""

    run_pct: float
    wait_pct: float

    @staticmethod
    def between(first: VcpuTimes, last: VcpuTimes) -> HostCpuShare | None:
        """The shares between two reads; None when they cannot be compared (no time passed, the
        vCPU count changed, or a counter went backwards: another VM under the same name)."""
        wall_ns = (last.host_s - first.host_s) * 1e9
        if (wall_ns <= 0 or first.vcpus != last.vcpus or first.vcpus < 1
                or last.run_ns < first.run_ns or last.wait_ns < first.wait_ns):
            return None
        per = wall_ns * first.vcpus / 100.0
        return HostCpuShare(round((last.run_ns - first.run_ns) / per, 2), round((last.wait_ns - first.wait_ns) / per, 2))


def from_domain_stats(stats: dict[str, object], host_s: float) -> VcpuTimes | None:
    """``VcpuTimes`` from libvirt's domain statistics of the vCPU group (``vcpu.current``,
    ``vcpu.N.time``, ``vcpu.N.delay`` in ns); None where libvirt gives no ``delay`` (it needs
    libvirt 9.0 and a host kernel with schedstat) or no vCPU."""
    n = stats.get("vcpu.current")
    if not isinstance(n, int) or n < 1:
        return None
    run = wait = 0
    for k in range(n):
        t, d = stats.get(f"vcpu.{k}.time"), stats.get(f"vcpu.{k}.delay")
        if not isinstance(t, int) or not isinstance(d, int):
            return None
        run, wait = run + t, wait + d
    return VcpuTimes(n, run, wait, host_s)
