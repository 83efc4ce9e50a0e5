"""Where exact tracing's cost goes: the share of QEMU's CPU samples spent in the ``log`` trace backend.

IOPS on a shared 2-core host move by several percent between neighbouring seconds, so a 1-3 % cost
needs many paired slices to show (bench/trace_overhead.py). A CPU profile of the QEMU process sees
it directly: ``perf record`` samples QEMU's threads whatever else runs on the host, and the samples
whose call chain is in the trace backend's path (QEMU's ``qemu_log``, glibc's ``vfprintf``, the
``write`` of each line into the log file, the ``gettid`` of its ``PID@`` prefix) are what tracing
costs QEMU. Under TCG QEMU's CPU is what limits the guest's IOPS at depth 32, so that share is also
the cost in IOPS; the ``gettimeofday`` of the timestamp is counted too, and the untraced profile's
share (other callers of the same functions) is subtracted.

QEMU and glibc are built without frame pointers, so a user-space chain stops after a frame or two:
the formatting inside QEMU's own (inlined) trace functions is not attributed, which makes the share a
slight underestimate; the kernel's side of a write is whole.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

#: Functions only the log backend's path reaches in QEMU's process (the libc and kernel names of
#: Debian 12's glibc 2.36 and a 6.x kernel): formatting, the log's lock, its line's write into a
#: file (ext4, tmpfs, ...: a ``*_file_write_iter``; eventfd writes go elsewhere), the thread id and
#: the timestamp of the ``PID@SEC.USEC:`` prefix.
TRACE_PATH_FRAMES = ("qemu_log", "vfprintf", "_IO_fflush", "_IO_file_xsputn", "_IO_new_file_xsputn",
                     "file_write_iter", "sys_gettid", "gettimeofday")

#: The normal's two-sided 95 % quantile (a profile has thousands of samples).
Z95 = 1.96


@dataclass(frozen=True)
class Sample:
    """One ``perf script`` sample: its thread's name and its call chain's function names, innermost first."""

    thread: str
    frames: tuple[str, ...]

    @property
    def in_trace_path(self) -> bool:
        return any(marker in frame for frame in self.frames for marker in TRACE_PATH_FRAMES)


def parse_perf_script(text: str) -> Iterator[Sample]:
    """Samples of ``perf script -F comm,tid,ip,sym``: a header line ``COMM TID``, then one line per
    frame (``ADDRESS SYMBOL``), samples separated by a blank line."""
    for block in text.split("\n\n"):
        lines = [line for line in block.splitlines() if line.strip()]
        if not lines:
            continue
        head = lines[0].split()
        thread = " ".join(head[:-1]) if len(head) > 1 else lines[0].strip()
        frames = tuple(parts[1] for parts in (line.split(None, 1) for line in lines[1:]) if len(parts) == 2)
        yield Sample(thread, frames)


@dataclass(frozen=True)
class Share:
    """How many of a profile's samples were in the trace path."""

    in_path: int
    samples: int

    @property
    def pct(self) -> float:
        return 100.0 * self.in_path / self.samples if self.samples else 0.0

    @classmethod
    def of(cls, samples: Iterable[Sample]) -> Share:
        every = list(samples)
        return cls(sum(1 for s in every if s.in_trace_path), len(every))


@dataclass(frozen=True)
class Interval:
    """A cost (percent) and its 95 % confidence interval: the IOPS pairs' median or mean
    (bench/trace_overhead.py), or tracing's share of QEMU's CPU (:func:`share_cost`)."""

    value_pct: float
    low_pct: float
    high_pct: float

    @property
    def width_pct(self) -> float:
        return self.high_pct - self.low_pct


def share_cost(traced: Share, untraced: Share) -> Interval:
    """Tracing's share of QEMU's CPU (percent): the traced profile's share less the untraced one's,
    with the normal-approximation 95 % interval of that difference of two proportions."""
    if traced.samples == 0 or untraced.samples == 0:
        raise ValueError("a profile without samples: perf saw no CPU time of the QEMU process")
    p1, p0 = traced.in_path / traced.samples, untraced.in_path / untraced.samples
    half = Z95 * math.sqrt(p1 * (1 - p1) / traced.samples + p0 * (1 - p0) / untraced.samples)
    return Interval(100.0 * (p1 - p0), 100.0 * (p1 - p0 - half), 100.0 * (p1 - p0 + half))


def perf_available() -> str | None:
    """None where ``perf record`` can profile another process here, else why not."""
    if shutil.which("perf") is None:
        return "no perf program (Debian: apt-get install linux-perf)"
    try:
        paranoid = int(Path("/proc/sys/kernel/perf_event_paranoid").read_text())
    except (OSError, ValueError):
        return None
    if paranoid > 1 and os.geteuid() != 0:
        return f"kernel.perf_event_paranoid is {paranoid}: profiling another user's process needs root or at most 1"
    return None


def qemu_pid(domain: str) -> int | None:
    """The QEMU process of a domain of this machine's libvirt daemon (its pid file), or None."""
    try:
        return int(Path(f"/run/libvirt/qemu/{domain}.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def profile(pid: int, seconds: float) -> list[Sample]:
    """``perf record`` of every thread of process ``pid`` for ``seconds`` (999 samples a second of
    its CPU time, call chains on), read back through ``perf script``."""
    with tempfile.TemporaryDirectory(prefix="vioc-perf-") as tmp:
        data = Path(tmp) / "perf.data"
        subprocess.run(["perf", "record", "-q", "-g", "-F", "999", "-p", str(pid), "-o", str(data), "--",
                        "sleep", f"{seconds:g}"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        text = subprocess.run(["perf", "script", "-i", str(data), "-F", "comm,tid,ip,sym"], check=True,
                              capture_output=True, text=True).stdout
    return list(parse_perf_script(text))
