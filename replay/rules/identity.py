"""identity in the replay: no I/O; for each disk of the rule test (found by serial) the guest reads the
sysfs files of its identity as the run read them (size, serial, WWN, VPD pages 0x80 and 0x83: the
run's own script, configuration.json's ``scripts.identity``) and asks the host what the device has
(host action ``qom``: the device's ``serial`` and ``wwn``, QMP ``qom-get``, replay/rules/device.py).
Judged by ``model.rules.identity`` against the identity the run gave each disk
(``disks[].identity``). The fault is QEMU's own (an ``--emulator`` that gives the device another
serial or WWN): the bundle's emulator fails it as in the run, ``--qemu`` another QEMU asks that one.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping

from model.judging.verdict import RuleVerdict
from model.rules.identity import RULE, ConfiguredIdentity, device_identity, guest_identity, judge_identity
from replay.guest_script import Job
from replay.qemu import CannotTest
from replay.rules import Replayed, ReplayRule
from replay.rules.device import QOM, advertised, ask, disk_entries, qom_action, reads_of
from replay.rules.evidence import output, part

JOB = "identity"
#: The device's properties the rule compares.
PROPS = ("serial", "wwn")


def jobs(config: Mapping[str, object]) -> list[Job]:
    scripts = config.get("scripts")
    script = scripts.get("identity") if isinstance(scripts, dict) else None
    if not isinstance(script, str) or not script:
        raise CannotTest("the bundle has no script of the disks' identity (a bundle of an older run)")
    lines = []
    for d in disk_entries(config, RULE):
        serial = str(d.get("serial"))
        lines += [f"P=$(wait_disk {shlex.quote(serial)}); echo \"disk {serial} $P\"",
                  f"( {script.replace('{disk}', '$P')}\n) 2>/dev/null | sed 's/^/files {serial} /'",
                  ask(serial, reads_of(d, PROPS))]
    return [Job(JOB, (), prepare="\n".join(lines))]


def judge(r: Replayed) -> RuleVerdict:
    said = part(output(r, JOB), "prepared", JOB).splitlines()
    disks = []
    for d in disk_entries(r.config, RULE):
        serial = str(d.get("serial"))
        name = next((line.split()[2] for line in said if line.startswith(f"disk {serial} ") and len(line.split()) > 2), "")
        if not name:
            raise CannotTest(f"the guest found no disk with serial {serial}")
        files = "\n".join(line.split(" ", 2)[2] for line in said if line.startswith(f"files {serial} "))
        try:
            configured = ConfiguredIdentity(**d["identity"])  # type: ignore[arg-type]
            seen = guest_identity(name, files)
        except (KeyError, TypeError, ValueError) as e:
            raise CannotTest(f"disk {serial}: the bundle's identity or the guest's files could not be read: {e}") from e
        disks.append((str(d.get("role")), configured, seen, device_identity(advertised(r, serial, reads_of(d, PROPS)))))
    return judge_identity(disks)


REPLAY = ReplayRule(RULE, jobs, judge, {QOM: qom_action})
