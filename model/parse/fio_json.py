"""fio's JSON output (``--output-format=json``), as typed results.

This is how the suite reads what the workload inside the guest saw: IOPS, completion
latency, the depth fio kept in flight (``iodepth_level``) and the guest block layer's
``disk_util``. Written against fio 3.33 (Debian 12); other 3.x versions have the same keys.

Example::

    result = parse_fio_json(stdout, source="guest fio run qd32")
    result.jobs[0].read.iops
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from model.errors import FioError, ParseError

#: fio's exit status when it ends on SIGINT: it prints "fio: terminating on signal 2" and then its
#: complete JSON (fio 3.33, the embedded guest's and the host's). After the suite's own stop it
#: is a normal end.
FIO_STOPPED_EXIT = 128
#: fio's iodepth_level keys: "16" means 16-31 I/Os in flight, ">=64" the rest.
IODEPTH_LEVEL_KEYS = ("1", "2", "4", "8", "16", "32", ">=64")


@dataclass(frozen=True)
class FioDirection:
    """One direction (read or write) of one fio job.

    Latencies are converted from fio's nanoseconds to microseconds. ``clat_percentiles_us``
    maps a percentile (99.9) to the completion latency at that percentile.
    """

    io_count: int
    io_bytes: int
    iops: float
    bw_bytes_per_s: int
    runtime_ms: int
    clat_mean_us: float
    clat_percentiles_us: dict[float, float]
    lat_mean_us: float
    slat_mean_us: float
    #: the slowest request's completion latency (fio's ``clat_ns.max``; 0 where fio gave none)
    clat_max_us: float = 0.0

    @property
    def avg_request_size_bytes(self) -> float:
        """Mean bytes per I/O, 0 when the direction did nothing."""
        return self.io_bytes / self.io_count if self.io_count else 0.0


@dataclass(frozen=True)
class FioSync:
    """The fsync/fdatasync calls of one job (fio's ``sync`` section: count and latency only)."""

    io_count: int
    lat_mean_us: float
    lat_percentiles_us: dict[float, float]


@dataclass(frozen=True)
class FioJob:
    """One fio job's results.

    ``iodepth_level_pct`` is the share of time fio had N I/Os submitted, by fio's bucket
    (keys in IODEPTH_LEVEL_KEYS). It counts what fio submitted, not what reached the device,
    and can sum past 100 (seen with fsync jobs in fio 3.33).
    """

    name: str
    read: FioDirection
    write: FioDirection
    sync: FioSync
    iodepth_level_pct: dict[str, float]
    iodepth_submit_pct: dict[str, float]
    iodepth_complete_pct: dict[str, float]
    job_runtime_ms: int
    error: int
    #: fio's own CPU time over its run time, in percent of one CPU (its ``usr_cpu`` and ``sys_cpu``)
    usr_cpu_pct: float = 0.0
    sys_cpu_pct: float = 0.0

    @property
    def total_iops(self) -> float:
        """Read plus write IOPS (syncs are not counted: fio reports no rate for them)."""
        return self.read.iops + self.write.iops

    @property
    def cpu_pct(self) -> float:
        """fio's CPU time (user and system) in percent of one CPU over its run time."""
        return self.usr_cpu_pct + self.sys_cpu_pct


@dataclass(frozen=True)
class FioDiskUtil:
    """fio's ``disk_util`` entry: the guest block layer's counters for one disk over the run."""

    name: str
    read_ios: int
    write_ios: int
    read_merges: int
    write_merges: int
    read_ticks_ms: int
    write_ticks_ms: int
    in_queue_ms: int
    util_pct: float


@dataclass(frozen=True)
class FioResult:
    """One fio invocation's results: every job, and every disk fio watched."""

    fio_version: str
    jobs: tuple[FioJob, ...]
    disk_util: tuple[FioDiskUtil, ...]

    @property
    def total_iops(self) -> float:
        """Read plus write IOPS summed over all jobs."""
        return sum(job.total_iops for job in self.jobs)

    def job(self, name: str) -> FioJob:
        """The job called ``name``; ParseError naming the jobs present if there is none."""
        for job in self.jobs:
            if job.name == name:
                return job
        raise ParseError(f"fio output has no job {name!r}; jobs are {[j.name for j in self.jobs]}")

    def disk(self, name: str) -> FioDiskUtil:
        """The disk_util entry of ``name`` (vdb, sda); ParseError naming the disks present if none."""
        for disk in self.disk_util:
            if disk.name == name:
                return disk
        raise ParseError(f"fio disk_util has no disk {name!r}; disks are {[d.name for d in self.disk_util]}"
                         " (fio reports disk_util only for block devices it can map to a file)")


class _Reader:
    """Typed access to one JSON object, with the path used in error messages."""

    def __init__(self, obj: object, where: str) -> None:
        if not isinstance(obj, Mapping):
            raise ParseError(f"{where}: expected a JSON object, got {type(obj).__name__}")
        self.obj: Mapping[str, Any] = obj
        self.where = where

    def get(self, key: str) -> object:
        if key not in self.obj:
            raise ParseError(f"{self.where}: missing key {key!r} (is this fio --output-format=json output?)")
        return self.obj[key]

    def sub(self, key: str) -> _Reader:
        return _Reader(self.get(key), f"{self.where}.{key}")

    def number(self, key: str) -> float:
        value = self.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ParseError(f"{self.where}.{key}: expected a number, got {value!r}")
        return float(value)

    def integer(self, key: str) -> int:
        value = self.number(key)
        if value != int(value):
            raise ParseError(f"{self.where}.{key}: expected an integer, got {value!r}")
        return int(value)

    def text(self, key: str) -> str:
        value = self.get(key)
        if not isinstance(value, str):
            raise ParseError(f"{self.where}.{key}: expected a string, got {value!r}")
        return value

    def pct_map(self, key: str) -> dict[str, float]:
        sub = self.sub(key)
        return {k: sub.number(k) for k in sub.obj}


def _percentiles_us(stat: _Reader) -> dict[float, float]:
    """fio's ``percentile`` map ({"99.900000": ns}) in microseconds; empty if fio gave none."""
    if "percentile" not in stat.obj:
        return {}
    pct = stat.sub("percentile")
    try:
        return {float(k): pct.number(k) / 1000.0 for k in pct.obj}
    except ValueError:
        raise ParseError(f"{pct.where}: percentile keys must be numbers, got {list(pct.obj)}") from None


def _direction(d: _Reader) -> FioDirection:
    clat = d.sub("clat_ns")
    return FioDirection(
        io_count=d.integer("total_ios"),
        io_bytes=d.integer("io_bytes"),
        iops=d.number("iops"),
        bw_bytes_per_s=d.integer("bw_bytes"),
        runtime_ms=d.integer("runtime"),
        clat_mean_us=clat.number("mean") / 1000.0,
        clat_percentiles_us=_percentiles_us(clat),
        lat_mean_us=d.sub("lat_ns").number("mean") / 1000.0,
        slat_mean_us=d.sub("slat_ns").number("mean") / 1000.0,
        clat_max_us=clat.number("max") / 1000.0 if "max" in clat.obj else 0.0,
    )


def _sync(d: _Reader) -> FioSync:
    lat = d.sub("lat_ns")
    return FioSync(io_count=d.integer("total_ios"), lat_mean_us=lat.number("mean") / 1000.0,
                   lat_percentiles_us=_percentiles_us(lat))


def _job(j: _Reader) -> FioJob:
    levels = j.pct_map("iodepth_level")
    missing = [k for k in IODEPTH_LEVEL_KEYS if k not in levels]
    if missing:
        raise ParseError(f"{j.where}.iodepth_level: missing buckets {missing}; got {sorted(levels)}")
    return FioJob(
        name=j.text("jobname"),
        read=_direction(j.sub("read")),
        write=_direction(j.sub("write")),
        sync=_sync(j.sub("sync")),
        iodepth_level_pct=levels,
        iodepth_submit_pct=j.pct_map("iodepth_submit"),
        iodepth_complete_pct=j.pct_map("iodepth_complete"),
        job_runtime_ms=j.integer("job_runtime"),
        error=j.integer("error"),
        usr_cpu_pct=j.number("usr_cpu"),
        sys_cpu_pct=j.number("sys_cpu"),
    )


def _disk(d: _Reader) -> FioDiskUtil:
    return FioDiskUtil(
        name=d.text("name"),
        read_ios=d.integer("read_ios"),
        write_ios=d.integer("write_ios"),
        read_merges=d.integer("read_merges"),
        write_merges=d.integer("write_merges"),
        read_ticks_ms=d.integer("read_ticks"),
        write_ticks_ms=d.integer("write_ticks"),
        in_queue_ms=d.integer("in_queue"),
        util_pct=d.number("util"),
    )


def parse_fio_json(text: str, source: str = "fio output") -> FioResult:
    """Parse fio ``--output-format=json`` output.

    fio prints notes before the JSON on the same stream (for example "note: both iodepth >= 1
    and synchronous I/O engine are selected"), so parsing starts at the first line that
    begins with '{'. ``source`` (a file name or a description of the run) goes into error messages.
    """
    start = 0 if text.startswith("{") else text.find("\n{") + 1
    if start == 0 and not text.startswith("{"):
        raise ParseError(f"{source}: no JSON object found (was fio run with --output-format=json?); "
                         f"output begins {text[:200]!r}")
    try:
        data, _ = json.JSONDecoder().raw_decode(text, start)
    except json.JSONDecodeError as exc:
        raise ParseError(f"{source}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg} "
                         "(truncated output? fio killed by a timeout?)") from None
    top = _Reader(data, source)
    jobs = top.get("jobs")
    if not isinstance(jobs, list) or not jobs:
        raise ParseError(f"{source}.jobs: expected a non-empty list of jobs, got {jobs!r}")
    disks = top.obj.get("disk_util", [])
    if not isinstance(disks, list):
        raise ParseError(f"{source}.disk_util: expected a list, got {disks!r}")
    return FioResult(
        fio_version=top.text("fio version"),
        jobs=tuple(_job(_Reader(j, f"{source}.jobs[{i}]")) for i, j in enumerate(jobs)),
        disk_util=tuple(_disk(_Reader(d, f"{source}.disk_util[{i}]")) for i, d in enumerate(disks)),
    )


def _errno_text(code: int) -> str:
    """fio's job errors are errnos: 11 -> "EAGAIN: Resource temporarily unavailable"."""
    return f"{errno.errorcode.get(code, f'errno {code}')}: {os.strerror(code)}"


def fio_messages(stdout: str, stderr: str) -> str:
    """What fio said besides its JSON: the lines it prints before the JSON on stdout (fio 3.33
    prints a failed job's ``fio: pid=..., err=11/..., error=...`` there, and notes) and its stderr."""
    if stdout.startswith("{"):
        before = ""
    else:
        json_at = stdout.find("\n{")
        before = stdout if json_at < 0 else stdout[:json_at]
    return "\n".join(part.strip() for part in (before, stderr) if part.strip())


def parse_fio_run(stdout: str, stderr: str, exit_status: int, source: str = "fio") -> FioResult:
    """The results of one fio run, from its stdout (``--output-format=json``), its stderr and
    its exit status kept apart. Raises FioError when fio failed: any job with a non-zero
    ``"error"`` (fio still prints JSON then, with 0 I/Os) or a non-zero exit status; the
    message carries fio's own words. ParseError where fio exited 0 but printed no usable JSON."""
    said = fio_messages(stdout, stderr)
    try:
        result = parse_fio_json(stdout, source)
    except ParseError as e:
        if exit_status != 0:
            raise FioError(f"{source}: fio exited with status {exit_status} and printed no results; fio said: "
                           f"{said[-1500:] or '(nothing)'}", exit_status, said) from None
        raise ParseError(f"{e}; fio's stderr: {stderr.strip()[-800:] or '(empty)'}") from None
    failed = [j for j in result.jobs if j.error]
    if failed:
        jobs = "; ".join(f"job {j.name}: error {j.error} ({_errno_text(j.error)})" for j in failed)
        raise FioError(f"{source}: fio failed ({jobs}); fio said: {said[-1500:] or '(nothing else)'}",
                       exit_status, said)
    if exit_status != 0:
        raise FioError(f"{source}: fio exited with status {exit_status}; fio said: {said[-1500:] or '(nothing)'}",
                       exit_status, said)
    return result
