"""alignment in the replay: as the run does on its scratch disk, one DOS partition from sector 2048
(63 with ``--inject misaligned``), ext2 with 4 KiB blocks on it (XFS where the guest has no mke2fs), a
32 MiB file laid out, then 400 random 4 KiB O_DIRECT writes to it at depth 4; every request QEMU traced
while fio ran is checked against the device's physical-block and optimal-I/O grid (as the run asked for
it, or as the guest probed it); judged by ``model.rules.alignment``.
"""

from __future__ import annotations

from collections.abc import Mapping

from model.judging.verdict import RuleVerdict
from model.rules.alignment import (
    HEALTHY_START_SECTOR,
    MISALIGNED_START_SECTOR,
    RULE,
    count_boundary_crossings,
    judge_alignment,
)
from replay.guest_script import Job
from replay.qemu import CannotTest
from replay.rules import Replayed, ReplayRule
from replay.rules.evidence import configured_limits, fio, output, part, probed_limits, window

#: The file and the writes (suites/test_alignment.py's FILE_BYTES, WRITES, MOUNT).
FILE_BYTES = 32 << 20
WRITES = 400
MOUNT = "/mnt/vioc-align"
JOB = "align4k"

#: The run's make_filesystem (suites/test_alignment.py) with the guest's tools as the run chooses them
#: (guest/tools/partitioning.py, mkfs.py: sfdisk, else busybox's fdisk dialogue; mke2fs, else mkfs.xfs):
#: the disk's first MiB zeroed and re-read, one partition from ``{start}``, the table re-read and the set-up
#: applied again (the re-read revalidated the disk), the filesystem made and mounted, the file written.
PREPARE = r"""S={start}
rr() { for i in 1 2 3 4; do blockdev --rereadpt /dev/$DEV 2>/dev/null && return; sleep 1; done; blockdev --rereadpt /dev/$DEV; }
dd if=/dev/zero of=/dev/$DEV bs=1M count=1 oflag=direct 2>/dev/null; rr
if command -v sfdisk >/dev/null; then printf 'label: dos\nstart=%d, type=83\n' $S | sfdisk --no-reread --no-tell-kernel -q /dev/$DEV
else printf 'o\nn\np\n1\n%d\n\nw\n' $S | fdisk /dev/$DEV; fi >/dev/null 2>&1
rr; apply_setup
P=${DEV}1; case $DEV in *[0-9]) P=${DEV}p1 ;; esac
echo "start=$(cat /sys/block/$DEV/$P/start)"
if command -v mke2fs >/dev/null; then mke2fs -q -F -b 4096 /dev/$P && echo fs=ext2; else mkfs.xfs -q -f -b size=4096 /dev/$P && echo fs=xfs; fi
mkdir -p {mount} && mount -o noatime /dev/$P {mount} && dd if=/dev/zero of={mount}/data bs=1M count={mib} 2>/dev/null && sync && echo laid=out"""


def start_sector(config: Mapping[str, object]) -> int:
    measure = config.get("measure")
    inject = measure.get("inject") if isinstance(measure, dict) else None
    return MISALIGNED_START_SECTOR if isinstance(inject, list) and "misaligned" in inject else HEALTHY_START_SECTOR


def jobs(config: Mapping[str, object]) -> list[Job]:
    prepare = (PREPARE.replace("{start}", str(start_sector(config))).replace("{mount}", MOUNT)
               .replace("{mib}", str(FILE_BYTES >> 20)))
    return [fio(JOB, {"rw": "randwrite", "bs": 4096, "iodepth": 4, "numjobs": 1, "ioengine": "libaio", "direct": 1,
                      "runtime": "120s", "group_reporting": True, "size": FILE_BYTES, "io_size": 4096 * WRITES,
                      "randseed": 1}, prepare=prepare, target=f"{MOUNT}/data")]


def judge(r: Replayed) -> RuleVerdict:
    said = dict(line.split("=", 1) for line in part(output(r, JOB), "prepared", JOB).splitlines() if "=" in line)
    expected = start_sector(r.config)
    if said.get("laid") != "out" or said.get("start") != str(expected):
        raise CannotTest(f"the guest did not make the run's partition (from sector {expected}), filesystem and file: "
                         f"it said {said or 'nothing'}")
    requests = [(t.offset_lbn * 512, t.length_bytes) for t in window(r.requests, output(r, JOB), ramp_s=0)
                if not t.is_flush]
    # The grid is the device's own (as the run asked for it), whatever the guest was told.
    cfg, lim = configured_limits(r.config), probed_limits(r.config)
    counts = count_boundary_crossings(requests, max(cfg.physical_block_bytes, lim.physical_block_size),
                                      cfg.optimal_io_bytes or lim.optimal_io_size)
    workload = f"{WRITES} x 4 KiB O_DIRECT random writes to a file on {said.get('fs', 'the guest filesystem')}"
    return judge_alignment(counts, expected * 512, workload, "exact (QEMU trace events, replay)")


REPLAY = ReplayRule(RULE, jobs, judge)
