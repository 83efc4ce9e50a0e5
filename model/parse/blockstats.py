"""Host-side block counters of one virtual disk, from QMP or libvirt, and what they say over an interval.

This is the *average* host-observed depth source (docs/rules/queue-depth.md): by Little's law, the total
time requests spent in the device divided by the wall time is the mean number in flight.
Both sources count requests as the virtual device submitted them to the block layer,
after any splitting or merging by the guest.

Example::

    a = parse_qmp_blockstats(reply_before, "dut", taken_at_ns=t0)
    b = parse_qmp_blockstats(reply_after, "dut", taken_at_ns=t1)
    HostCountersDelta.between(a, b).avg_in_flight
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from model.errors import ParseError


@dataclass(frozen=True)
class HostBlockCounters:
    """Cumulative counters of one virtual disk, taken at ``taken_at_ns`` (a monotonic clock)."""

    rd_operations: int
    wr_operations: int
    flush_operations: int
    rd_bytes: int
    wr_bytes: int
    rd_total_time_ns: int
    wr_total_time_ns: int
    flush_total_time_ns: int
    taken_at_ns: int


_QMP_KEYS = [f.name for f in fields(HostBlockCounters) if f.name != "taken_at_ns"]


def _entry_names(entry: Mapping[str, Any]) -> list[str]:
    return [str(entry[k]) for k in ("qdev", "device", "node-name") if entry.get(k)]


def parse_qmp_blockstats(reply: str | Mapping[str, Any], device_match: str, taken_at_ns: int) -> HostBlockCounters:
    """Counters of the disk whose ``qdev``, ``device`` or ``node-name`` contains ``device_match``.

    ``reply`` is a QMP ``query-blockstats`` reply, as text or decoded (``{"return": [...]}``),
    or its bare list. Raises ParseError listing the disks present when none or several match.
    """
    if isinstance(reply, str):
        text = reply
        try:
            reply = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ParseError(f"query-blockstats reply is not JSON ({exc.msg} at line {exc.lineno}): "
                             f"{text[:200]!r}") from None
    entries = reply.get("return") if isinstance(reply, Mapping) else reply
    if isinstance(reply, Mapping) and "error" in reply:
        raise ParseError(f"query-blockstats failed: {reply['error']}")
    if not isinstance(entries, list):
        raise ParseError(f"query-blockstats reply has no 'return' list: {str(reply)[:200]}")
    matches = [e for e in entries if isinstance(e, Mapping) and any(device_match in n for n in _entry_names(e))]
    available = [_entry_names(e) for e in entries if isinstance(e, Mapping)]
    if len(matches) != 1:
        problem = "no disk" if not matches else f"{len(matches)} disks"
        raise ParseError(f"query-blockstats: {problem} with qdev, device or node-name containing {device_match!r}; "
                         f"disks are {available} (use a longer, unique part of one)")
    where = f"query-blockstats {_entry_names(matches[0])}.stats"
    stats = matches[0].get("stats")
    if not isinstance(stats, Mapping):
        raise ParseError(f"{where}: missing")
    values: dict[str, int] = {}
    for key in _QMP_KEYS:
        value = stats.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ParseError(f"{where}.{key}: expected a non-negative integer, got {value!r}")
        values[key] = value
    return HostBlockCounters(taken_at_ns=taken_at_ns, **values)


# libvirt's flat domstats keys (virConnectGetAllDomainStats, VIR_DOMAIN_STATS_BLOCK; see
# https://libvirt.org/manpages/virsh.html#domstats) for each HostBlockCounters field.
_LIBVIRT_KEYS = {
    "rd_operations": "rd.reqs",
    "wr_operations": "wr.reqs",
    "flush_operations": "fl.reqs",
    "rd_bytes": "rd.bytes",
    "wr_bytes": "wr.bytes",
    "rd_total_time_ns": "rd.times",
    "wr_total_time_ns": "wr.times",
    "flush_total_time_ns": "fl.times",
}


def parse_libvirt_block_stats(params: Mapping[str, object], disk_target: str, taken_at_ns: int) -> HostBlockCounters:
    """Counters of the disk ``disk_target`` (vdb, sda) from libvirt's block domain stats.

    ``params`` is the flat dict of one domain's record from ``virConnectGetAllDomainStats``
    (``block.count``, ``block.N.name``, ``block.N.rd.reqs`` ...). A disk given to QEMU
    outside the domain XML (``<qemu:commandline>``) is not there: use QMP for it.
    """
    count = params.get("block.count")
    if not isinstance(count, int):
        raise ParseError(f"libvirt block stats: no integer 'block.count' (were they requested with "
                         f"VIR_DOMAIN_STATS_BLOCK?); keys are {sorted(params)[:20]}")
    names = [params.get(f"block.{i}.name") for i in range(count)]
    if disk_target not in names:
        raise ParseError(f"libvirt block stats: no disk {disk_target!r}; disks are {names}")
    index = names.index(disk_target)
    values: dict[str, int] = {}
    for field, suffix in _LIBVIRT_KEYS.items():
        key = f"block.{index}.{suffix}"
        value = params.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ParseError(f"libvirt block stats {disk_target}: {key} should be a non-negative integer, "
                             f"got {value!r}")
        values[field] = value
    return HostBlockCounters(taken_at_ns=taken_at_ns, **values)


@dataclass(frozen=True)
class HostCountersDelta:
    """What one virtual disk did between two counter snapshots, as differences."""

    reads: int
    writes: int
    flushes: int
    rd_bytes: int
    wr_bytes: int
    total_time_ns: int
    elapsed_ns: int

    @classmethod
    def between(cls, a: HostBlockCounters, b: HostBlockCounters) -> HostCountersDelta:
        """``b - a``; ParseError if time did not advance or a counter went backwards (a reset or another disk)."""
        elapsed = b.taken_at_ns - a.taken_at_ns
        if elapsed <= 0:
            raise ParseError(f"host block counters: the second snapshot is not later than the first "
                             f"(taken_at_ns {a.taken_at_ns} then {b.taken_at_ns})")
        diffs: dict[str, int] = {}
        for name in _QMP_KEYS:
            before, after = getattr(a, name), getattr(b, name)
            if after < before:
                raise ParseError(f"host block counters: {name} went backwards ({before} -> {after}); the VM "
                                 "or disk was restarted between snapshots, or they are of different disks")
            diffs[name] = after - before
        return cls(
            reads=diffs["rd_operations"],
            writes=diffs["wr_operations"],
            flushes=diffs["flush_operations"],
            rd_bytes=diffs["rd_bytes"],
            wr_bytes=diffs["wr_bytes"],
            total_time_ns=diffs["rd_total_time_ns"] + diffs["wr_total_time_ns"] + diffs["flush_total_time_ns"],
            elapsed_ns=elapsed,
        )

    @property
    def requests(self) -> int:
        """Reads plus writes (flushes carry no data, so they are counted apart)."""
        return self.reads + self.writes

    @property
    def avg_request_size_bytes(self) -> float:
        """Mean bytes per read or write request (0 with no requests)."""
        return (self.rd_bytes + self.wr_bytes) / self.requests if self.requests else 0.0

    @property
    def avg_in_flight(self) -> float:
        """Little's law: Δ(read + write + flush total time) / Δwall time = mean requests in flight."""
        return self.total_time_ns / self.elapsed_ns

    @property
    def iops(self) -> float:
        """Reads plus writes per second."""
        return self.requests * 1e9 / self.elapsed_ns


@dataclass(frozen=True)
class HostRequestOutcomes:
    """Cumulative requests of one virtual disk that completed and that failed, by direction (QMP
    ``query-blockstats``: ``rd_operations`` and ``wr_operations`` count the requests that completed,
    ``failed_rd_operations`` and ``failed_wr_operations`` those the device answered with an error)."""

    reads: int
    writes: int
    failed_reads: int
    failed_writes: int

    def since(self, before: HostRequestOutcomes) -> HostRequestOutcomes:
        """``self - before``; ParseError if a counter went backwards (a reset or another disk)."""
        diffs = {f.name: getattr(self, f.name) - getattr(before, f.name) for f in fields(self)}
        back = [name for name, d in diffs.items() if d < 0]
        if back:
            raise ParseError(f"host request counters went backwards ({', '.join(back)}): the VM or disk was "
                             "restarted between snapshots, or they are of different disks")
        return HostRequestOutcomes(**diffs)


def parse_qmp_outcomes(reply: str | Mapping[str, Any], device_match: str) -> HostRequestOutcomes:
    """The completed and failed requests of the disk ``device_match`` names (as parse_qmp_blockstats
    finds it) in a ``query-blockstats`` reply. A QEMU that does not count failures (an entry without
    ``failed_rd_operations``: ``account-failed`` off) is a ParseError that says so."""
    counters = parse_qmp_blockstats(reply, device_match, 0)
    decoded = json.loads(reply) if isinstance(reply, str) else reply
    entries = decoded.get("return") if isinstance(decoded, Mapping) else decoded
    assert isinstance(entries, list)  # parse_qmp_blockstats checked the reply
    entry = next(e for e in entries if isinstance(e, Mapping) and any(device_match in n for n in _entry_names(e)))
    stats = entry["stats"]
    failed: dict[str, int] = {}
    for key in ("failed_rd_operations", "failed_wr_operations"):
        value = stats.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ParseError(f"query-blockstats {_entry_names(entry)}.stats.{key}: expected a non-negative integer, "
                             f"got {value!r} (this QEMU does not count failed requests: account-failed is "
                             f"{stats.get('account_failed')!r})")
        failed[key] = value
    return HostRequestOutcomes(counters.rd_operations, counters.wr_operations, failed["failed_rd_operations"],
                               failed["failed_wr_operations"])


@dataclass(frozen=True)
class HostUnmapCounters:
    """Cumulative discards of one virtual disk, from QMP ``query-blockstats`` (QEMU 7.2):

    - the device's: ``unmap_operations`` and ``unmap_bytes`` count the discards the device handed to its
      block node and that completed, ``failed_unmap_operations`` those that failed. QEMU 7.2's scsi-hd
      and ide-hd (IDE, AHCI) count them; its virtio-blk and NVMe do not (measured: they stay 0 while
      their discards reach the file);
    - the file node's (its ``driver-specific`` ``file`` stats under the device's node): ``discard-nb-ok``
      and ``discard-bytes-ok`` count the discards that reached the host file, ``discard-nb-failed`` those
      it refused. None where the disk has no file node (null-co).
    """

    operations: int
    bytes: int
    failed_operations: int
    file_operations: int | None = None
    file_bytes: int | None = None
    file_failed_operations: int | None = None

    def since(self, before: HostUnmapCounters) -> HostUnmapCounters:
        """``self - before``; ParseError if a counter went backwards (a reset or another disk)."""
        diffs: dict[str, int | None] = {}
        for f in fields(self):
            a, b = getattr(before, f.name), getattr(self, f.name)
            diffs[f.name] = None if a is None or b is None else b - a
        back = [name for name, d in diffs.items() if d is not None and d < 0]
        if back:
            raise ParseError(f"host unmap counters went backwards ({', '.join(back)}): the VM or disk was "
                             "restarted between snapshots, or they are of different disks")
        return HostUnmapCounters(**diffs)  # type: ignore[arg-type]


#: query-blockstats keys of each HostUnmapCounters field: the device's, and the file node's driver-specific ones.
_UNMAP_KEYS = {"operations": "unmap_operations", "bytes": "unmap_bytes", "failed_operations": "failed_unmap_operations"}
_FILE_DISCARD_KEYS = {"file_operations": "discard-nb-ok", "file_bytes": "discard-bytes-ok",
                      "file_failed_operations": "discard-nb-failed"}


def _file_stats(entry: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The ``driver-specific`` stats of the first ``file`` node at or under ``entry`` (through ``parent``)."""
    node: Any = entry
    while isinstance(node, Mapping):
        specific = node.get("driver-specific")
        if isinstance(specific, Mapping) and specific.get("driver") == "file":
            return specific
        node = node.get("parent")
    return None


def _count(where: str, stats: Mapping[str, Any], key: str, why: str) -> int:
    value = stats.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ParseError(f"{where}.{key}: expected a non-negative integer, got {value!r} ({why})")
    return value


def parse_qmp_unmap(reply: str | Mapping[str, Any], device_match: str) -> HostUnmapCounters:
    """The discard counters of the disk ``device_match`` names (as parse_qmp_blockstats finds it) in a
    ``query-blockstats`` reply. A reply without them (QEMU older than 4.2) is a ParseError that says so."""
    parse_qmp_blockstats(reply, device_match, 0)  # finds exactly one entry, or says which exist
    decoded = json.loads(reply) if isinstance(reply, str) else reply
    entries = decoded.get("return") if isinstance(decoded, Mapping) else decoded
    assert isinstance(entries, list)  # parse_qmp_blockstats checked the reply
    entry = next(e for e in entries if isinstance(e, Mapping) and any(device_match in n for n in _entry_names(e)))
    where = f"query-blockstats {_entry_names(entry)}"
    values: dict[str, int | None] = {f: _count(f"{where}.stats", entry["stats"], k, "QEMU counts discards from 4.2 on")
                                     for f, k in _UNMAP_KEYS.items()}
    specific = _file_stats(entry)
    for f, k in _FILE_DISCARD_KEYS.items():
        values[f] = None if specific is None else _count(f"{where} file node", specific, k, "QEMU's file driver "
                                                         "counts discards from 4.2 on")
    return HostUnmapCounters(**values)  # type: ignore[arg-type]
