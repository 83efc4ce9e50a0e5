"""What the replay measures for each rule and how it judges it: one module per rule, named as the
rule is (``replay/rules/io_size.py`` for io-size), each declaring :data:`REPLAY`, a
:class:`ReplayRule` with its fio jobs and its judge. The judge is the rule's own from ``model.rules``,
with the run's thresholds. A rule is picked up by being here (as ``model/rules/`` is read);
:func:`replay_rule` of a rule no module declares raises CannotTest (exit 125) with that reason, never a
verdict the replay did not reach.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from model.judging.verdict import RuleVerdict
from model.kernel_log_check import InjectedErrors
from model.parse.qemutrace import TracedRequest
from replay.guest_script import Job
from replay.qemu import CannotTest, HostAction, HostCall


@dataclass(frozen=True)
class JobOutput:
    """One job's output from the guest, by part (replay/guest_script.py), and its host wall times: of
    its begin and end, and of its measured window's opening and closing (a job with a window)."""

    parts: Mapping[str, str]
    begin_s: float
    end_s: float
    exit_status: int
    open_s: float | None = None
    close_s: float | None = None


@dataclass(frozen=True)
class Replayed:
    """What one boot of the replay gave a rule's judge: the bundle's configuration
    (configuration.json), each job's output, every request QEMU traced, the disk's name in the guest,
    the guest's limits on the disk's path and its limits (both read after the set-up, as the sysfs
    tool's ``key=value`` lines; "" where the bundle has no script for them), and each disk's limits
    read before the set-up (as the run probed them), by serial. QEMU's counters around a counted job
    are two of its host actions (``counters <disk> <job> before|after``: replay/rules/evidence.py's counted)."""

    config: Mapping[str, object]
    outputs: Mapping[str, JobOutput]
    requests: list[TracedRequest]
    device: str
    path_text: str = ""
    limits_text: str = ""
    probed: Mapping[str, str] = field(default_factory=dict)
    #: the host actions the guest asked for, in order, and QEMU's events (QMP) read during the boot
    host_calls: Sequence[HostCall] = ()
    events: Sequence[Mapping[str, object]] = ()
    #: QEMU's trace log of the boot, whole (the events a host action switched on are in it too)
    trace: str = ""


@dataclass(frozen=True)
class ReplayRule:
    """One rule as the replay runs it: its fio jobs from the bundle's configuration, its judge, and
    its host actions."""

    rule: str
    jobs: Callable[[Mapping[str, object]], list[Job]]
    judge: Callable[[Replayed], RuleVerdict]
    #: what the host does when the guest's script says ``host <name>`` (replay/qemu.py's HostAction)
    actions: Mapping[str, HostAction] = field(default_factory=dict)
    #: where the rule makes its disk fail on purpose: the kernel-log check takes the kernel's I/O
    #: errors there as the rule's own, as the run's check is told them (error-propagation)
    injected: Callable[[Replayed], Sequence[InjectedErrors]] | None = None


def _declared() -> dict[str, ReplayRule]:
    found: dict[str, ReplayRule] = {}
    for m in pkgutil.iter_modules(__path__):
        declared = getattr(importlib.import_module(f"{__name__}.{m.name}"), "REPLAY", None)
        if isinstance(declared, ReplayRule):
            found[declared.rule] = declared
    return found


#: Every rule the replay judges, by name: each module here that declares REPLAY.
RULES: dict[str, ReplayRule] = _declared()


def replay_rule(rule: str) -> ReplayRule:
    """The replay of ``rule``; CannotTest (exit 125) for a rule the replay cannot judge yet."""
    if rule not in RULES:
        raise CannotTest(f"the replay cannot judge rule {rule} yet (it judges {', '.join(sorted(RULES))}): the "
                         "bundle holds its evidence and commands for a replay by hand")
    return RULES[rule]
