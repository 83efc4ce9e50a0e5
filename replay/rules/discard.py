"""discard in the replay: as the run does on its scratch disk (file-backed, raw), the guest's discard
limits read after the set-up, the fill, then each range discarded with ``blkdiscard`` (the beyond_max one
with the guest's ``discard_max_bytes`` lowered as the run lowers it), ext4 over the disk's first 64 MiB
with a file written, deleted and trimmed (``fstrim -v``), and write-zeroes of a range filled with data
(util-linux's ``blkdiscard -z``), read back. The host's side of each is a host action: the device's
discard counters (``query-blockstats``), the allocation of the replay's own copy of the disk's file
(``SEEK_DATA``/``SEEK_HOLE``), and for write-zeroes QEMU's ``blk_co_pwritev`` trace event, switched on
around it. Judged by ``model.rules.discard``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from model.errors import ParseError
from model.judging.verdict import RuleVerdict
from model.parse.backend_writes import EVENT, parse_backend_writes, writes_in
from model.parse.blockstats import HostUnmapCounters, parse_qmp_blockstats
from model.parse.filesystem import parse_fstrim
from model.rules import discard as rule
from model.rules.discard import DiscardLimits, DiscardRange, RangeSeen, TrimSeen, ZeroesSeen, judge_discard
from replay.guest_script import Job
from replay.qemu import CannotTest
from replay.qmp import Qmp
from replay.rules import Replayed, ReplayRule
from replay.rules.backing_file import allocated, disk_file, file_of, unmapped
from replay.rules.evidence import output, part

JOB = "discard"
#: What the replay names the trace log (main.py's ``-D``), beside the disk's file in its output directory.
TRACE_LOG = "qemu-trace.log"
#: The run's ext4 (guest/tools/ext4.py): 4 KiB blocks, mkfs's metadata its only writes, discarding the
#: region first; its file written in 1 MiB O_DIRECT blocks; the disk's first MiB zeroed to take it off.
EXT4_BLOCK_BYTES = 4096
MKFS_OPTIONS = "discard,lazy_itable_init=1,lazy_journal_init=1"
MOUNT_OPTIONS = "noatime,noinit_itable"
MIB = 1 << 20

#: Each range as the run sees it (suites/test_discard.py's _seen): the allocation and the counters
#: before, blkdiscard (its last line of error), the counters and the allocation after.
RANGE = r"""seen() {
  host alloc {ref} $2 $3; echo "$1 alloc_before=$ANSWER"; host unmap {ref}; echo "$1 unmap_before=$ANSWER"
  blkdiscard -o $2 -l $3 /dev/$DEV >/dev/null 2>/tmp/bd; echo "$1 rc=$?"; echo "$1 said=$(tail -n 1 /tmp/bd)"
  host unmap {ref}; echo "$1 unmap_after=$ANSWER"; host alloc {ref} $2 $3; echo "$1 alloc_after=$ANSWER"
}
host file {ref}; echo "file=$ANSWER"
q=/sys/block/$DEV/queue
G=$(cat $q/discard_granularity); MAX=$(cat $q/discard_max_bytes); HW=$(cat $q/discard_max_hw_bytes)
echo "limits=$G $MAX $HW"
dd if=/dev/zero of=/dev/$DEV bs={fb} seek={fill_seek} count={fill_count} conv=fsync 2>/dev/null"""
#: beyond_max with the guest's limit lowered where the run lowers it (rule.split_max_bytes, asked of the host),
#: and set back.
BEYOND = r"""host split $G $MAX $HW; LOW=$ANSWER
if [ "$LOW" = none ]; then echo "{name} guest_max=$MAX"; seen {name} {off} {len}
else echo $LOW > /sys/block/$DEV/{setting}; echo "{name} guest_max=$LOW"; seen {name} {off} {len}; echo $MAX > /sys/block/$DEV/{setting}; fi"""
#: fstrim as the run does it (suites/test_discard.py's _trim), then the filesystem taken off.
TRIM = r"""umount {mount} 2>/dev/null
mkfs.ext4 -q -F -b {block} -E {mkfs} /dev/$DEV {fs_kib}k >/tmp/mk 2>&1 && mkdir -p {mount} && mount -t ext4 -o {mnt} /dev/$DEV {mount} 2>>/tmp/mk
echo "trim made=$?"
tr '\0' 'Z' </dev/zero | dd of={file} bs={mib} count={file_mib} iflag=fullblock oflag=direct 2>/dev/null && sync && rm {file} && sync
host alloc {ref} 0 {fs}; echo "trim alloc_before=$ANSWER"; host unmap {ref}; echo "trim unmap_before=$ANSWER"
T0=$(cut -d' ' -f1 /proc/uptime); fstrim -v {mount} >/tmp/ft 2>/tmp/fterr; echo "trim rc=$?"
echo "trim seconds=$T0 $(cut -d' ' -f1 /proc/uptime)"; echo "trim said=$(tail -n 1 /tmp/fterr)"; echo "trim out=$(tail -n 1 /tmp/ft)"
host unmap {ref}; echo "trim unmap_after=$ANSWER"; host alloc {ref} 0 {fs}; echo "trim alloc_after=$ANSWER"
umount {mount} 2>/dev/null; dd if=/dev/zero of=/dev/$DEV bs={mib} count=1 oflag=direct conv=fsync 2>/dev/null"""
#: write-zeroes as the run does it (guest/tools/discard.py's prepare_zeroes and zero), with the host's
#: trace of its block backend's writes around it.
ZEROES = r"""M=$(cat $q/write_zeroes_max_bytes); echo "zeroes max=$M"
if [ "$M" -gt 0 ]; then
tr '\0' 'Z' </dev/zero | dd of=/dev/$DEV bs={fb} seek={seek} count={count} iflag=fullblock oflag=direct 2>/dev/null
B=; for d in $(echo "$PATH" | tr : " "); do if [ -x "$d/blkdiscard" ] && "$d/blkdiscard" -h 2>&1 | grep -q zeroout; then B="$d/blkdiscard"; break; fi; done
if [ -z "$B" ]; then echo "zeroes unable=no blkdiscard with -z (--zeroout) on PATH: util-linux's blkdiscard zeroes, busybox's cannot"
else host wtrace-start {ref}; S=$ANSWER
"$B" -z -o {off} -l {len} /dev/$DEV >/dev/null 2>/tmp/z; echo "zeroes rc=$?"; echo "zeroes said=$(tail -n 1 /tmp/z)"
host wtrace-stop {ref} $S; echo "zeroes host=$ANSWER"
echo "zeroes nonzero=$(dd if=/dev/$DEV bs={fb} skip={seek} count={count} iflag=direct 2>/dev/null | tr -d '\0' | wc -c)"
fi; fi"""


def _blocks(r: DiscardRange) -> tuple[int, int]:
    return r.offset_bytes // rule.FILL_BLOCK_BYTES, r.length_bytes // rule.FILL_BLOCK_BYTES


def _ranges(config: Mapping[str, object]) -> tuple[DiscardRange, ...]:
    said = config.get("probed_limits")
    block = said.get("logical_block_size") if isinstance(said, dict) else None
    return rule.ranges_for(block if isinstance(block, int) else 512)


def jobs(config: Mapping[str, object]) -> list[Job]:
    """One job without fio: the whole rule, in the run's order, each host read a host action."""
    ref = config.get("host_ref")
    if not isinstance(ref, str) or not ref:
        raise CannotTest("the bundle's configuration.json has no host_ref (a bundle of an older run): the replay "
                         "cannot find the disk's counters and file to judge discard")
    fill = DiscardRange("fill", rule.FILL_OFFSET_BYTES, rule.FILL_LENGTH_BYTES)
    lines = [RANGE.replace("{fb}", str(rule.FILL_BLOCK_BYTES)).replace("{fill_seek}", str(_blocks(fill)[0]))
             .replace("{fill_count}", str(_blocks(fill)[1]))]
    for r in _ranges(config):
        if r.name == "beyond_max":
            lines.append(BEYOND.format(name=r.name, off=r.offset_bytes, len=r.length_bytes, setting=rule.MAX_SETTING))
        else:
            lines.append(f"seen {r.name} {r.offset_bytes} {r.length_bytes}")
    lines.append(TRIM.format(mount=rule.MOUNT, block=EXT4_BLOCK_BYTES, mkfs=MKFS_OPTIONS, fs_kib=rule.FSTRIM_FS_BYTES // 1024,
                             mnt=MOUNT_OPTIONS, file=rule.TRIM_FILE, mib=MIB, file_mib=rule.FSTRIM_FILE_BYTES // MIB,
                             fs=rule.FSTRIM_FS_BYTES, ref="{ref}"))
    seek, count = _blocks(rule.ZEROES_RANGE)
    lines.append(ZEROES.format(fb=rule.FILL_BLOCK_BYTES, seek=seek, count=count, off=rule.ZEROES_RANGE.offset_bytes,
                               len=rule.ZEROES_RANGE.length_bytes, ref="{ref}"))
    return [Job(JOB, (), prepare="\n".join(lines).replace("{ref}", ref))]


def split(qmp: Qmp, args: Sequence[str]) -> str:
    """``split <granularity> <max> <max_hw>``: the guest's discard_max_bytes for the beyond_max range
    (model.rules.discard.split_max_bytes), or ``none`` where the run leaves it as it is."""
    low = rule.split_max_bytes(DiscardLimits(*(int(a) for a in args)))
    return "none" if low is None else str(low)


def trace_start(qmp: Qmp, args: Sequence[str]) -> str:
    """``wtrace-start <device>``: the disk's written bytes and the trace log's length now, then QEMU's
    ``blk_co_pwritev`` switched on (``none`` for the length where QEMU cannot deliver it)."""
    (ref,) = args
    written = parse_qmp_blockstats(qmp.execute("query-blockstats"), ref, 0).wr_bytes
    log = disk_file(qmp, ref).with_name(TRACE_LOG)
    states = qmp.execute("trace-event-get-state", {"name": EVENT}).get("return")
    if not isinstance(states, list) or not states or any(s.get("state") == "unavailable" for s in states):
        return f"{written} none"
    offset = log.stat().st_size
    qmp.execute("trace-event-set-state", {"name": EVENT, "enable": True})
    return f"{written} {offset}"


def trace_stop(qmp: Qmp, args: Sequence[str]) -> str:
    """``wtrace-stop <device> <written> <offset>``: the event off, the log's lines since ``offset`` kept
    beside it (``qemu-trace.log.zeroes``); answers the bytes the disk's write counters grew by and that
    file (``none`` where there was no trace)."""
    ref, written, offset = args
    grown = parse_qmp_blockstats(qmp.execute("query-blockstats"), ref, 0).wr_bytes - int(written)
    if offset == "none":
        return f"{grown} none"
    qmp.execute("trace-event-set-state", {"name": EVENT, "enable": False})
    log = disk_file(qmp, ref).with_name(TRACE_LOG)
    with open(log, "rb") as f:
        f.seek(int(offset))
        text = f.read()
    kept = log.with_name(f"{TRACE_LOG}.zeroes")
    kept.write_bytes(text)
    return f"{grown} {kept}"


def _by_part(text: str) -> dict[str, dict[str, str]]:
    """``<part> <key>=<value>`` lines (``limits=...`` alone: part ""), by part."""
    out: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        head, eq, value = line.partition("=")
        if not eq:
            continue
        name, _, key = head.rpartition(" ")
        out.setdefault(name, {})[key] = value
    return out


def _counters(said: Mapping[str, str], key: str) -> HostUnmapCounters:
    text = said.get(key, "")
    try:
        return HostUnmapCounters(**json.loads(text))
    except (ValueError, TypeError) as e:
        raise CannotTest(f"the host's discard counters ({key}) were not read: {text or 'no answer'}") from e


def _alloc(said: Mapping[str, str], key: str) -> int:
    if not said.get(key, "").isdigit():
        raise CannotTest(f"the host's read of the file's allocation ({key}) failed: {said.get(key) or 'no answer'}")
    return int(said[key])


def _host(said: Mapping[str, str]) -> tuple[int, int, int, int | None, int | None]:
    """The host's counters over one discard: the file's where the disk has a file node, else the device's;
    and the device's own beside the file's (None where the host count is the device's)."""
    try:
        host = _counters(said, "unmap_after").since(_counters(said, "unmap_before"))
    except ParseError as e:
        raise CannotTest(f"the host's discard counters: {e}") from e
    if host.file_operations is None or host.file_bytes is None:
        return host.operations, host.bytes, host.failed_operations, None, None
    return host.file_operations, host.file_bytes, host.file_failed_operations or 0, host.operations, host.bytes


def _error(said: Mapping[str, str]) -> str:
    """As the run's CommandResult.error_line: "" where it succeeded, else its last line of error."""
    if said.get("rc", "") == "0":
        return ""
    return said.get("said") or said.get("out") or f"exit {said.get('rc', '?')}"


def _zeroes(z: Mapping[str, str]) -> ZeroesSeen:
    r, most = rule.ZEROES_RANGE, int(z.get("max", "0"))
    if most == 0:
        return ZeroesSeen(r, 0)
    if "unable" in z:
        return ZeroesSeen(r, most, unable=f"the guest cannot ask for it: {z['unable']}")
    grown, _, kept = z.get("host", "").partition(" ")
    if not grown.lstrip("-").isdigit():
        raise CannotTest(f"the host's trace of write-zeroes failed: {z.get('host') or 'no answer'}")
    error = _error(z)
    nonzero = int(z["nonzero"]) if not error and z.get("nonzero", "").isdigit() else None
    if kept == "none":
        return ZeroesSeen(r, most, "", error, nonzero, device_write_bytes=int(grown))
    seen = writes_in(parse_backend_writes(Path(kept).read_text(errors="replace"), kept), r.offset_bytes, r.length_bytes)
    return ZeroesSeen(r, most, "", error, nonzero, seen.zero_requests, seen.zero_bytes, seen.data_bytes, int(grown))


def judge(r: Replayed) -> RuleVerdict:
    said = _by_part(part(output(r, JOB), "prepared", JOB))
    try:
        limits = DiscardLimits(*(int(v) for v in said.get("", {}).get("limits", "").split()))
    except TypeError as e:
        raise CannotTest(f"the guest did not print the disk's discard limits: {said.get('', {})}") from e
    seen = []
    for rng in _ranges(r.config):
        s = said.get(rng.name, {})
        seen.append(RangeSeen(rng, _error(s), *_host(s)[:3], _alloc(s, "alloc_before"), _alloc(s, "alloc_after"),
                              int(s.get("guest_max", str(limits.max_bytes))), *_host(s)[3:]))
    t = said.get("trim", {})
    if t.get("made") != "0":
        raise CannotTest("the guest could not make fstrim's ext4 as the run did (mkfs.ext4 and mount)")
    begin, _, end = t.get("seconds", "0 0").partition(" ")
    error = _error(t)
    trim = TrimSeen(rule.FSTRIM_FS_BYTES, rule.FSTRIM_FILE_BYTES, error, None if error else parse_fstrim(t.get("out", "")),
                    *_host(t)[:3], _alloc(t, "alloc_before"), _alloc(t, "alloc_after"), float(end) - float(begin),
                    *_host(t)[3:])
    where = f"the backing file {said.get('', {}).get('file', '(not found)')} on this machine"
    return judge_discard(limits, seen, where, r.device, trim, _zeroes(said.get("zeroes", {})))


REPLAY = ReplayRule(rule.RULE, jobs, judge, {"file": file_of, "alloc": allocated, "unmap": unmapped, "split": split,
                                        "wtrace-start": trace_start, "wtrace-stop": trace_stop})
