"""The guest's CPU time from ``/proc/stat``: how busy its vCPUs were between two snapshots.

The queue-depth rule lets a guest that could not keep the offered depth queued pass only where
the guest's CPU was busy in the measured window (a slow or loaded guest CPU), so the CPU time is
read with the window's two diskstats snapshots, in the same guest command.

``/proc/stat``'s ``cpu`` lines (proc(5)) count USER_HZ ticks (10 ms: USER_HZ is 100 on every
Linux architecture the suite runs) since boot: user, nice, system, idle, iowait, irq, softirq,
steal, guest, guest_nice; kernels before 2.6.33 print fewer.

A vCPU's busy share is the part of the window it was *not idle*: the window's length (the
guest's uptime between the snapshots) less its idle and iowait time. Not the busy ticks: a
tickless kernel measures idle time exactly at idle entry and exit, but counts busy time one
timer tick at a time, and a vCPU the host deschedules loses the ticks meanwhile (no steal
time under TCG). Measured here (TCG, 2 vCPUs, host load 9-10 on 2 cores, 3.2-3.9 s windows at
depth 32): 161-211 busy and idle ticks of 324-394 elapsed per vCPU; the ticks said 26-30 %
busy where the vCPU was idle only 32-37 % of the window. Time the host held a runnable vCPU
off its CPU is busy here: the guest could not run then either.

Example::

    busy = cpu_busy_between(text_before, text_after, elapsed_ms=3000.0)
    busy.busiest_pct   # 97.3: the busiest vCPU's share of the window not spent idle
"""

from __future__ import annotations

from dataclasses import dataclass

from model.errors import ParseError

#: /proc/stat's tick, in ms (USER_HZ 100)
TICK_MS = 10.0
#: user nice system idle iowait irq softirq steal: the fields that add up to a CPU's time
_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
_IDLE = ("idle", "iowait")


@dataclass(frozen=True)
class CpuTicks:
    """One ``/proc/stat`` cpu line: ticks since boot, busy and idle (iowait counted idle)."""

    name: str  # "cpu" (all CPUs), "cpu0", "cpu1"...
    busy_ticks: int
    idle_ticks: int


def parse_proc_stat_cpus(text: str, source: str = "/proc/stat") -> dict[str, CpuTicks]:
    """The ``cpu``/``cpuN`` lines of ``text`` (other lines are ignored), by name."""
    out: dict[str, CpuTicks] = {}
    for line in text.splitlines():
        parts = line.split()
        if not parts or not parts[0].startswith("cpu"):
            continue
        if len(parts) < 5:
            raise ParseError(f"{source}: a cpu line with {len(parts) - 1} fields, expected at least 4: {line.strip()!r}")
        try:
            ticks = dict(zip(_FIELDS, (int(p) for p in parts[1:len(_FIELDS) + 1]), strict=False))
        except ValueError:
            raise ParseError(f"{source}: a cpu counter is not an integer: {line.strip()!r}") from None
        out[parts[0]] = CpuTicks(parts[0], sum(v for k, v in ticks.items() if k not in _IDLE),
                                 sum(v for k, v in ticks.items() if k in _IDLE))
    if "cpu" not in out:
        raise ParseError(f"{source}: no 'cpu' line (is this /proc/stat?)")
    return out


@dataclass(frozen=True)
class CpuBusy:
    """How busy the guest's CPUs were over a window: the share of the window each was not idle, %."""

    all_pct: float  # all vCPUs together
    per_cpu_pct: tuple[float, ...]  # cpu0, cpu1... (those present in both snapshots)
    elapsed_ms: float = 0.0

    @property
    def busiest_pct(self) -> float:
        """The busiest vCPU's share: one saturated vCPU (fio's thread, or its interrupts) is what
        keeps a guest from queueing more, whatever the others do."""
        return max(self.per_cpu_pct, default=self.all_pct)


def _not_idle_pct(a: CpuTicks, b: CpuTicks, elapsed_ticks: float) -> float:
    idle = b.idle_ticks - a.idle_ticks
    if idle < 0 or b.busy_ticks < a.busy_ticks:
        raise ParseError(f"/proc/stat {a.name}: a counter went backwards between the snapshots")
    return min(100.0, max(0.0, 100.0 * (1.0 - idle / elapsed_ticks)))


def cpu_busy_between(before: str, after: str, elapsed_ms: float) -> CpuBusy:
    """The guest's CPUs over the ``elapsed_ms`` between two ``/proc/stat`` snapshots; ParseError if
    one is not /proc/stat, a counter went backwards or no time passed."""
    if elapsed_ms <= 0:
        raise ParseError(f"/proc/stat: the window between the snapshots must be positive, got {elapsed_ms} ms")
    a, b = parse_proc_stat_cpus(before), parse_proc_stat_cpus(after)
    cpus = sorted((n for n in a if n != "cpu" and n in b), key=lambda n: int(n[3:]) if n[3:].isdigit() else -1)
    ticks = elapsed_ms / TICK_MS
    return CpuBusy(_not_idle_pct(a["cpu"], b["cpu"], ticks * max(1, len(cpus))),
                   tuple(_not_idle_pct(a[n], b[n], ticks) for n in cpus), elapsed_ms)
