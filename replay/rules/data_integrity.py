"""data-integrity in the replay: as the run does on its scratch disk (file-backed, raw), a fresh run id,
the guard sectors around the range read from the backing file before, the plan's five passes written and
read back verifying by one fio run (model.rules.data_integrity.fio_args; with ``--inject lba-shift``
through the run's device-mapper target, linear over the disk from LBA_SHIFT_SECTORS, made with the
embedded guest's dmsetup as the run made it), then the backing file's range and guards read again and
every sector checked. The host's reads are host actions (``host backing``): the file is the replay's own
copy, found through QEMU's monitor (``query-block``: the file under the disk's device); each read is kept
in the output directory beside it. Judged by ``model.rules.data_integrity``.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path

from model.errors import FioError
from model.faults import LBA_SHIFT_SECTORS
from model.judging.verdict import RuleVerdict
from model.rules.data_integrity import RULE, SHIFT_TARGET, Region, fio_args, plan_for, run_verdict
from replay.guest_script import Job
from replay.qemu import CannotTest
from replay.qmp import Qmp
from replay.rules import Replayed, ReplayRule
from replay.rules.backing_file import disk_file
from replay.rules.evidence import output, part

JOB, READ = "integrity", "backing-after"
#: The device the shifted target gets: the first device-mapper device of the replay's fresh guest.
SHIFTED_DEVICE = "/dev/dm-0"
#: fio's file without lba-shift: a link to the disk, whose name the guest finds at its boot (fio's
#: arguments are quoted: a ``$DEV`` in them would not be the shell's).
DISK_LINK = "/tmp/vioc-integrity-disk"


def _injected(config: Mapping[str, object]) -> bool:
    measure = config.get("measure")
    inject = measure.get("inject") if isinstance(measure, dict) else None
    return isinstance(inject, list) and "lba-shift" in inject


def _logical_block(config: Mapping[str, object]) -> int:
    """The disk's logical block as the run's guest saw it (the run's plan follows it), else as asked."""
    for key, field in (("probed_limits", "logical_block_size"), ("configured_limits", "logical_block_bytes")):
        said = config.get(key)
        if isinstance(said, dict) and isinstance(said.get(field), int):
            return int(said[field])
    return 512


def _host_ref(config: Mapping[str, object]) -> str:
    ref = config.get("host_ref")
    if not isinstance(ref, str) or not ref:
        raise CannotTest("the bundle's configuration.json has no host_ref (a bundle of an older run): the replay "
                         "cannot find the disk's backing file to judge data-integrity")
    return ref


#: The run's DeviceMapper.create_linear (guest/tools/data_integrity.py) with the embedded guest's dmsetup:
#: dm_mod loaded, a linear target from {shift} sectors to the disk's end; it must be the first dm device.
SHIFT = r"""modprobe dm_mod 2>/dev/null
s=$(cat /sys/block/$DEV/size) && dmsetup create {name} --table "0 $((s - {shift})) linear /dev/$DEV {shift}" || exit 1
for d in /sys/block/dm-*; do [ "$(cat $d/dm/name)" = {name} ] && echo "target=/dev/${{d##*/}}"; done"""


def jobs(config: Mapping[str, object]) -> list[Job]:
    """The guards read, the target made (lba-shift), one fio run of the plan, the range read again."""
    region, ref = Region(), _host_ref(config)
    plan = plan_for(_logical_block(config))
    run_id = secrets.randbits(32) | 1
    target = SHIFTED_DEVICE if _injected(config) else DISK_LINK
    prepare = [f"echo run={run_id:08x}", f"ln -sf /dev/$DEV {DISK_LINK}", "echo 3 > /proc/sys/vm/drop_caches",
               f"host backing {ref} {region.window_start_bytes} {region.guard_bytes} guard-before",
               'echo "guard_before=$ANSWER"',
               f"host backing {ref} {region.end_bytes} {region.guard_bytes} guard-after", 'echo "guard_after=$ANSWER"']
    if _injected(config):
        prepare.append(SHIFT.format(name=SHIFT_TARGET, shift=LBA_SHIFT_SECTORS))
    # fio's own command line but the program and the output format (the job adds both); its global
    # --filename is the target, and the job's --filename (the read-back's) the same.
    args = [a for a in fio_args(target, plan, region, run_id)[1:] if a != "--output-format=json"]
    after = [f"host backing {ref} {region.window_start_bytes} {region.window_bytes} window", 'echo "window=$ANSWER"',
             *([f"dmsetup remove --retry {SHIFT_TARGET} >/dev/null 2>&1"] if _injected(config) else [])]
    return [Job(JOB, tuple(args), prepare="\n".join(prepare), target=target), Job(READ, (), prepare="\n".join(after))]


def backing(qmp: Qmp, args: Sequence[str]) -> str:
    """``backing <device> <offset> <length> <name>``: that range of the disk's backing file, kept as
    ``<file>.<name>`` beside the file (in the replay's output directory); answers its path."""
    ref, offset, length, name = args
    path = disk_file(qmp, ref)
    with open(path, "rb") as f:
        f.seek(int(offset))
        data = f.read(int(length))
    kept = path.with_name(f"{path.name}.{Path(name).name}")
    kept.write_bytes(data.ljust(int(length), b"\0"))  # past the file's end: what the guest reads there
    return str(kept)


def _said(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def _read(path: str, what: str) -> bytes:
    if not path or path.startswith("ERROR"):
        raise CannotTest(f"the host could not read the backing file's {what}: {path or 'no answer'}")
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise CannotTest(f"the host's read of the backing file's {what} is gone: {e}") from e


def judge(r: Replayed) -> RuleVerdict:
    out = output(r, JOB)
    said = _said(part(out, "prepared", JOB)) | _said(part(output(r, READ), "prepared", READ))
    region = Region()
    target = f"/dev/{r.device}"  # fio wrote through DISK_LINK, a link to it
    mapping = ""
    if _injected(r.config):
        target = said.get("target", "")
        if target != SHIFTED_DEVICE:
            raise CannotTest(f"--inject lba-shift: the guest did not make the run's device-mapper target as "
                             f"{SHIFTED_DEVICE} (it said {target or 'nothing'})")
        mapping = (f"device-mapper target {SHIFT_TARGET} ({target}: linear over /dev/{r.device} from sector "
                   f"{LBA_SHIFT_SECTORS})")
    window = _read(said.get("window", ""), "range")
    guards = (_read(said.get("guard_before", ""), "guard before the range"),
              _read(said.get("guard_after", ""), "guard after the range"))
    where = f"the backing file {said['window'].removesuffix('.window')} on this machine"
    try:
        return run_verdict(out.parts.get("fio", ""), out.parts.get("fioerr", ""), out.exit_status, target,
                         LBA_SHIFT_SECTORS if mapping else 0, window, guards, region,
                         plan_for(_logical_block(r.config)), int(said.get("run", "0"), 16), where, mapping)
    except FioError as e:
        raise CannotTest(f"fio did not write the range in the guest: {e}") from e


REPLAY = ReplayRule(RULE, jobs, judge, {"backing": backing})
