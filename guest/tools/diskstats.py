"""The guest block layer's own counters: ``/proc/diskstats`` snapshots stamped with the guest's
uptime, and a sampler of ``/sys/block/X/inflight`` every 100 ms."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import ClassVar

from guest.tools.tool import GuestShell, GuestTool
from model.parse.proc_diskstats import DiskStats, diskstats_for

log = logging.getLogger("vioconform.diskstats")


@dataclass(frozen=True)
class DiskStatsSnapshot:
    """``/proc/diskstats`` as read at ``uptime_ms`` of the guest's clock (both in one command)."""

    uptime_ms: float
    text: str
    #: ``/proc/stat``'s cpu lines read in the same command ("" where not asked for)
    cpu_text: str = ""

    def of(self, disk: str) -> DiskStats:
        return diskstats_for(self.text, disk)


class ProcDiskStats(GuestTool):
    """``/proc/uptime`` and ``/proc/diskstats``, read together."""

    name = "diskstats"

    def snapshot(self, cpu: bool = False) -> DiskStatsSnapshot:
        """With ``cpu``, ``/proc/stat``'s cpu lines too (the CPU time over a measured window), in
        the same command: no diskstats line starts with "cpu"."""
        out = self._run("cat /proc/uptime /proc/diskstats" + ("; grep ^cpu /proc/stat" if cpu else "")).stdout
        first, _, rest = out.partition("\n")
        lines = rest.splitlines(keepends=True)
        cpu_lines = "".join(line for line in lines if line.startswith("cpu"))
        disk_lines = "".join(line for line in lines if not line.startswith("cpu"))
        return DiskStatsSnapshot(float(first.split()[0]) * 1000.0, disk_lines, cpu_lines)


class InflightSampler(GuestTool):
    """Samples ``/sys/block/X/inflight`` every 100 ms into a guest file, with shell builtins only
    (read/echo), so it costs the guest almost no CPU. The pause between samples is the one part
    that differs between guests: busybox has ``usleep``, full distributions a fractional ``sleep``."""

    name = "in-flight sampler"
    install_hint = "the guest needs usleep (busybox) or a sleep that takes fractions of a second (coreutils)"
    #: waits 100 ms
    pause: ClassVar[str] = ""

    def start(self, disk: str, work_dir: str, tag: str) -> InflightSampling:
        sampling = self.prepare(disk, work_dir, tag)
        self._run(sampling.start_command)
        return sampling

    def prepare(self, disk: str, work_dir: str, tag: str) -> InflightSampling:
        """A sampler whose ``start_command`` another guest command runs (``Fio.start``'s ``first``:
        one SSH round trip for both)."""
        path = f"{work_dir}/{tag}.inflight"
        stop = f"{path}.running"
        return InflightSampling(self.shell, path,
                                f"rm -f {path}; touch {stop}; (while [ -e {stop} ]; do read up _ < /proc/uptime; "
                                f"read r w < /sys/block/{disk}/inflight; echo $up $r $w; {self.pause}; done >> {path}) "
                                ">/dev/null 2>&1 &")


class UsleepInflightSampler(InflightSampler):
    programs = ("usleep",)
    pause = "usleep 100000"


class SleepInflightSampler(InflightSampler):
    programs = ("sleep",)
    pause = "sleep 0.1"


InflightSampler.variants = (UsleepInflightSampler, SleepInflightSampler)


class InflightSampling:
    """A running sampler (``InflightSampler.start``)."""

    def __init__(self, shell: GuestShell, path: str, start_command: str) -> None:
        self.shell = shell
        self.path = path
        self.stop_file = f"{path}.running"
        #: the guest command that starts it (in the background)
        self.start_command = start_command
        #: the guest command that stops it and prints the samples (``stop``)
        self.stop_command = f"rm -f {self.stop_file}; cat {self.path}; rm -f {self.path}"

    def stop(self) -> str:
        """Stop sampling; the samples, one ``<uptime s> <reads> <writes>`` line each
        (``model.parse.proc_diskstats.inflight_in_window`` reads them). The file is removed."""
        return self.shell.run(self.stop_command, check=False).stdout

    def abandon(self) -> None:
        """On an error: stop sampling and remove the file, best effort. Never raises."""
        try:
            self.shell.run(f"rm -f {self.stop_file} {self.path}", check=False, timeout_s=30)
        except (RuntimeError, OSError) as e:
            log.warning("could not stop the in-flight sampler in the guest: %s", e)
