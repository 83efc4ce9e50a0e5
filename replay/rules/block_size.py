"""block-size in the replay: for each disk of the rule test (found by serial) the guest's block sizes as
its driver set them (the replay's reading before the set-up, as the run probed them), the run's three
O_DIRECT reads (one logical block at 0, half a block at 0, one block at half a block: one fio run, a
job each, for the logical block size the guest shows), and what the replay's QEMU says the device
advertises (host action ``qom``: the QOM properties the run read, replay/rules/device.py). Judged by
``model.rules.block_size`` against what the run asked for (``disks[].configured_limits``). The fault
is QEMU's own (an ``--emulator`` that gives the device another block size): the bundle's emulator
fails it as in the run, ``--qemu`` another QEMU asks that one.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping

from model.device_limits import ConfiguredLimits, parse_guest_limits
from model.errors import ParseError
from model.judging.verdict import RuleVerdict
from model.rules.block_size import RULE, direct_reads_args, judge_block_size, probes_for, probes_from_fio
from replay.guest_script import Job
from replay.qemu import CannotTest
from replay.rules import Replayed, ReplayRule
from replay.rules.device import QOM, advertised, ask, disk_entries, qom_action, reads_of
from replay.rules.evidence import output, part

#: The logical block sizes a disk may show (QEMU takes 512 to 32768 bytes, a power of two): the reads of each.
LOGICAL_SIZES = (512, 1024, 2048, 4096, 8192, 16384, 32768)


def jobs(config: Mapping[str, object]) -> list[Job]:
    out = []
    for d in disk_entries(config, RULE):
        serial, role = str(d.get("serial")), str(d.get("role"))
        # the disk's name is the guest's ($P): left for the shell to expand
        reads = "\n".join(f"{n}) fio {shlex.join(direct_reads_args('DISK', probes_for(n)))} ;;"
                          for n in LOGICAL_SIZES).replace("--filename=DISK", "--filename=/dev/$P")
        out.append(Job(f"reads-{role}", (), prepare="\n".join([
            f"P=$(wait_disk {shlex.quote(serial)}); echo \"disk $P\"",
            "L=$(cat /sys/block/$P/queue/logical_block_size); echo \"logical $L\"",
            f"case $L in\n{reads}\nesac > /tmp/reads.json 2>/dev/null",
            "sed 's/^/json /' /tmp/reads.json",
            ask(serial, reads_of(d))])))
    return out


def judge(r: Replayed) -> RuleVerdict:
    disks = []
    for d in disk_entries(r.config, RULE):
        serial, role = str(d.get("serial")), str(d.get("role"))
        job = f"reads-{role}"
        said = part(output(r, job), "prepared", job).splitlines()
        name = next((line.split()[1] for line in said if line.startswith("disk ") and len(line.split()) > 1), "")
        if not name or not r.probed.get(serial, "").strip():
            raise CannotTest(f"the guest found no disk with serial {serial}, or printed no limits of it")
        try:
            probed = parse_guest_limits(r.probed[serial])
            configured = ConfiguredLimits(**d["configured_limits"])  # type: ignore[arg-type]
            reads = probes_for(probed.logical_block_size)
            probes = probes_from_fio("\n".join(line[5:] for line in said if line.startswith("json ")), reads,
                                     f"fio's direct reads of {role} disk {name} (replay)")
        except (ParseError, KeyError, TypeError) as e:
            raise CannotTest(f"disk {serial}: the guest's reads or limits, or the bundle's, could not be read: {e}") from e
        disks.append((role, configured, probed, advertised(r, serial, reads_of(d)), probes))
    return judge_block_size(disks)


REPLAY = ReplayRule(RULE, jobs, judge, {QOM: qom_action})
