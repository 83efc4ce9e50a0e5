"""block-size: the logical and physical block sizes the guest sees of each disk are those the host
configured (``--disk logical_block_size=``/``physical_block_size=``; else the suite's own: 512/512 on
the disk under test, 512/4096 on the scratch disk), and the guest refuses direct I/O below the
logical block: an O_DIRECT read whose size or offset is not a multiple of it fails with EINVAL,
while a read of one logical block at 0 succeeds. 4Kn (logical 4096) and 512e (logical 512, physical
4096) both.

The sizes are read from sysfs as the driver set them at probe time (``queue/logical_block_size``,
``queue/physical_block_size``), beside what the hypervisor says the device advertises (QEMU's
``logical_block_size``/``physical_block_size``, ``qom-get``): a mismatch is blamed as the limits rule
blames it (model/blame.py). A misaligned read the guest lets through is the guest's block layer's
(or driver's) fault: ``guest driver``.

Example::

    v = judge_block_size([("dut", asked, probed, advertised, probes)])
    v.problems  # ('dut disk sdb: physical block size: the suite asked for 512, the device advertises 4096 ...',)
"""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from model.advertised import Advertised
from model.blame import Blame, BlameSettings, disk_trails
from model.device_limits import ConfiguredLimits, GuestLimits
from model.judging.spec import PARAM, Metrics, MetricSpec
from model.judging.verdict import Number, RuleVerdict
from model.parse.fio_json import parse_fio_json
from model.rules.limits import ROLES  # the same two disks of a controller
from model.rules.limits import _problem as limit_problem

RULE = "block-size"
#: The block sizes (model/blame.py's trail keys), as the device advertised them at probe time.
BLAME = BlameSettings(frozenset({"logical_block_size", "physical_block_size"}), probe_time_only=True)
#: It reads settings and makes three reads that do not vary: one pass, whatever --repeats says.
DEFAULT_REPEATS = 1
REPEATABLE = False
#: outside the default suite (its time is a budget of 13 rules): runs where --with-rules names it
OPT_IN = True
HOST_CPU_BOUND: tuple[str, ...] = ()
_ROLE = "(" + "|".join(ROLES) + ")_"
KEYS = ("logical_block_size", "physical_block_size")
#: What it records, as text: per disk role each direct read's outcome and the disk's kernel name (each
#: block size as asked, advertised and seen is declared with limits', model/across/metrics.py).
METRICS: Metrics = (
    (_ROLE + "direct_(aligned|short|offset)", MetricSpec("", PARAM)),
    (_ROLE + "block_size_disk", MetricSpec("", PARAM)),
)
MIN_EFFECTS: Mapping[str, float] = {}


@dataclass(frozen=True)
class DirectProbe:
    """One O_DIRECT read the guest made: ``kind`` "aligned" (one logical block at 0), "short" (half a
    logical block at 0) or "offset" (one logical block at half a logical block); ``error``: the errno
    fio's job ended with (0: it read)."""

    kind: str
    offset_bytes: int
    length_bytes: int
    error: int = 0

    @property
    def ok(self) -> bool:
        return self.error == 0

    @property
    def refused_einval(self) -> bool:
        return self.error == errno.EINVAL

    @property
    def said(self) -> str:
        return "" if self.ok else f"{errno.errorcode.get(self.error, f'errno {self.error}')}: {os.strerror(self.error)}"

    def text(self) -> str:
        return "read" if self.ok else f"refused ({self.said})"


def probes_from_fio(stdout: str, reads: Sequence[tuple[str, int, int]], source: str) -> list[DirectProbe]:
    """The reads' outcomes from fio's JSON (one job per read, named by its kind; guest/tools/direct_reads.py)."""
    result = parse_fio_json(stdout, source)
    return [DirectProbe(kind, offset, length, result.job(kind).error) for kind, offset, length in reads]


def direct_reads_args(filename: str, reads: Sequence[tuple[str, int, int]]) -> list[str]:
    """fio's arguments (but the program) for the reads of ``reads`` on ``filename``: one job per
    (name, offset, length), psync (one read(2) each), O_DIRECT; fio's JSON has each job's ``error``
    (22, EINVAL, where the kernel refused the read)."""
    args = ["--output-format=json", "--direct=1", "--ioengine=psync", "--rw=read", f"--filename={filename}"]
    for name, offset, length in reads:
        args += [f"--name={name}", f"--offset={int(offset)}", f"--bs={int(length)}", f"--size={int(length)}"]
    return args


def probes_for(logical_bytes: int) -> tuple[tuple[str, int, int], ...]:
    """The reads to make on a disk with this logical block: (kind, offset, length)."""
    half = logical_bytes // 2
    return (("aligned", 0, logical_bytes), ("short", 0, half), ("offset", half, logical_bytes))


def _probe_problem(name: str, p: DirectProbe, logical: int) -> tuple[str, Blame] | None:
    what = f"an O_DIRECT read of {p.length_bytes} bytes at offset {p.offset_bytes}"
    if p.kind == "aligned":
        if p.ok:
            return None
        text = (f"{name}: {what} (one logical block of {logical}) was refused ({p.said}): "
                "a read the guest must make")
        return text, Blame("unknown", text)
    if p.refused_einval:
        return None
    below = "size" if p.kind == "short" else "offset"
    got = "read" if p.ok else f"failed otherwise ({p.said})"
    text = f"{name}: {what} ({below} below the logical block of {logical}) {got}, where the guest must refuse it with EINVAL"
    return text, Blame("guest driver", text)


def judge_block_size(disks: Sequence[tuple[str, ConfiguredLimits, GuestLimits, Advertised | None,
                                          Sequence[DirectProbe]]]) -> RuleVerdict:
    """``disks``: (role, asked, the guest's probe-time view, the hypervisor's answer, the direct reads
    made) for each disk of one controller."""
    lines: list[str] = []
    problems: list[str] = []
    props: dict[str, Number] = {}
    hint: Blame | None = None
    for role, cfg, guest, advertised, probes in disks:
        name = f"{role} disk {guest.name}"
        shown = []
        for t in disk_trails(name, cfg, advertised, guest):
            if t.key not in KEYS:
                continue
            props[f"{role}_{t.key}_guest"] = str(t.probed)
            props[f"{role}_{t.key}_configured"] = str(t.asked)
            if advertised is not None:
                props[f"{role}_{t.key}_advertised"] = "not said" if t.advertised is None else str(t.advertised)
            shown.append(f"{t.setting} {t.probed}" + ("" if t.asked == t.probed else f" (asked {t.asked})"))
            if t.asked != t.probed:
                problems.append(limit_problem(name, t))  # worded and blamed as the limits rule does
        for p in probes:
            props[f"{role}_direct_{p.kind}"] = "read" if p.ok else p.said
            shown.append(f"O_DIRECT {p.length_bytes} B at {p.offset_bytes}: {p.text()}")
            found = _probe_problem(name, p, guest.logical_block_size)
            if found is not None:
                problems.append(f"{found[0]} [blame: {found[1].layer}]")
                hint = hint or found[1]
        lines.append(f"{name} ({guest.driver or 'driver unknown'}): " + "; ".join(shown))
        props[f"{role}_block_size_disk"] = guest.name
    return RuleVerdict(RULE, tuple(lines), tuple(problems), (), props, hint=hint)
