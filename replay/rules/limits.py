"""limits in the replay: what the guest was told about each disk of the rule test (the disk under test
and the scratch disk), read before the set-up as the run read it when it found them, against what the
run asked the hypervisor for and what the hypervisor said each device advertises; with
``--inject kernel-warning`` the run's action that makes the guest's kernel warn runs after the
kernel log's mark, so the replay's kernel-log check finds the warning as the run's did. Judged by
``model.rules.limits``.
"""

from __future__ import annotations

from collections.abc import Mapping

from model.advertised import Advertised, DeviceProperty
from model.device_limits import ConfiguredLimits, GuestLimits, parse_guest_limits
from model.errors import ParseError
from model.judging.verdict import RuleVerdict
from model.rules.limits import RULE, judge_limits
from replay.guest_script import Job
from replay.qemu import CannotTest
from replay.rules import Replayed, ReplayRule
from replay.rules.evidence import output, part

JOB = "kernel-warning"


def _injected(config: Mapping[str, object]) -> list[object]:
    measure = config.get("measure")
    inject = measure.get("inject") if isinstance(measure, dict) else None
    return inject if isinstance(inject, list) else []


def jobs(config: Mapping[str, object]) -> list[Job]:
    """No fio; the kernel-warning fault's action where the run injected it."""
    if "kernel-warning" not in _injected(config):
        return []
    scripts = config.get("scripts")
    script = scripts.get("kernel_warning") if isinstance(scripts, dict) else None
    if not isinstance(script, str) or not script:
        raise CannotTest("the run injected kernel-warning and the bundle has no script for it (a bundle of an older run)")
    return [Job(JOB, (), prepare=script)]


def _advertised(said: object) -> Advertised | None:
    if not isinstance(said, dict):
        return None
    props = tuple(DeviceProperty(**p) for p in said.get("properties", ()) if isinstance(p, dict))
    return Advertised(**{**said, "properties": props, "notes": tuple(said.get("notes", ()))})


def _disk(r: Replayed, entry: object) -> tuple[str, ConfiguredLimits, GuestLimits, Advertised | None]:
    if not isinstance(entry, dict) or not isinstance(entry.get("configured_limits"), dict):
        raise CannotTest(f"the bundle's configuration.json names a disk without its configured limits: {entry}")
    serial = str(entry.get("serial"))
    text = r.probed.get(serial, "")
    if not text.strip():
        raise CannotTest(f"the guest printed no limits of disk {serial}: the evidence is incomplete")
    try:
        return (str(entry.get("role")), ConfiguredLimits(**entry["configured_limits"]), parse_guest_limits(text),
                _advertised(entry.get("advertised")))
    except (ParseError, TypeError) as e:
        raise CannotTest(f"disk {serial}: the bundle's limits or the guest's could not be read: {e}") from e


def judge(r: Replayed) -> RuleVerdict:
    disks = r.config.get("disks")
    if not isinstance(disks, list) or not disks:
        raise CannotTest("the bundle's configuration.json has no disks (a bundle of an older run): the replay "
                         "cannot judge limits from it")
    if JOB in r.outputs and not part(output(r, JOB), "prepared", JOB).strip().endswith("warned"):
        said = r.outputs[JOB].parts.get("prepared", "").strip().splitlines()
        raise CannotTest(f"--inject kernel-warning: the guest's kernel did not warn as in the run "
                         f"({said[-1] if said else 'it said nothing'})")
    return judge_limits([_disk(r, entry) for entry in disks])


REPLAY = ReplayRule(RULE, jobs, judge)
