"""What each measured property of a run means: its unit and which way is better.

A results directory's ``junit.xml`` carries every rule's measured numbers as per-test
properties (``qd32_iops``, ``split_factor``, ``latency_added_p50_us``...). The results store
and ``compare`` need, for each, a unit and a direction:

- ``higher-better``: more is better (IOPS, the depth that reaches the host, request sizes);
- ``lower-better``: less is better (latency, split factor, misaligned requests);
- ``parameter``: a setting, a count or a bar the rule derived; a change is reported as a
  change, never as better or worse.

:func:`describe` looks a property name up in :data:`METRICS` (regular expressions over the
names the rules write today, model/rules/*.py and suites/*.py). A name no pattern knows is a
``parameter`` with unit ``""`` and ``known=False``: the store keeps it and lists it, it is never
dropped.

Repeats: a property named ``<name>.r<k>`` (``qd1_iops.r0``, ``qd1_iops.r1``...) is repeat ``k`` of
metric ``<name>``; a plain name is repeat 0. No rule writes the suffix yet (only buffered-direct
repeats today, and it writes median/min/max): it is the convention ``--repeats`` for every rule
is to use, so that the store keeps every sample and not only the means.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

Direction = Literal["higher-better", "lower-better", "parameter"]
DIRECTIONS: tuple[Direction, ...] = ("higher-better", "lower-better", "parameter")

HIGHER: Direction = "higher-better"
LOWER: Direction = "lower-better"
PARAM: Direction = "parameter"

#: ``<name>.r<k>``: repeat k of metric <name> (see the module docstring).
REPEAT = re.compile(r"^(?P<name>.+)\.r(?P<k>\d+)$")


@dataclass(frozen=True)
class MetricSpec:
    unit: str
    direction: Direction


@dataclass(frozen=True)
class MetricInfo:
    """One property name, resolved: the metric's name (without a repeat suffix), the repeat
    index, unit, direction, and whether a pattern in :data:`METRICS` knew it."""

    name: str
    repeat: int
    unit: str
    direction: Direction
    known: bool


_QD = r"qd\d+_"
_BD = r"(buffered|direct)_"
_DIO = r"[a-z0-9]+_"  # direct-io's per-job prefix ({k}_guest_writes ...)

#: (pattern over the whole name, unit, direction); the first match wins, so the specific
#: patterns (bars the rule derived: ``_required``, ``_allowed_``, ``_baseline_``) come first.
METRICS: tuple[tuple[str, MetricSpec], ...] = (
    # Bars and references a rule derived from other numbers: parameters of the verdict.
    (r"iops_scaling_required(_from_(offered|guest))?", MetricSpec("x", PARAM)),
    (_QD + r"host_required(_from_(offered|guest))?", MetricSpec("requests", PARAM)),
    (_BD + r"request_bytes_(baseline_median|allowed_change)", MetricSpec("bytes", PARAM)),
    (_BD + r"depth_(baseline_median|allowed_change)", MetricSpec("requests", PARAM)),
    (r"allowed_split|expected_split", MetricSpec("x", PARAM)),
    (r"expected_request_bytes", MetricSpec("bytes", PARAM)),
    # queue-depth: what reaches the host is the rule's point.
    (_QD + r"iops", MetricSpec("IO/s", HIGHER)),
    (_QD + r"host_depth(_min|_max)?", MetricSpec("requests", HIGHER)),
    (_QD + r"host_average_depth", MetricSpec("requests", HIGHER)),
    (_QD + r"host_exact_depth_(median|p90)", MetricSpec("requests", HIGHER)),
    (_QD + r"host_exact_io_length_mean", MetricSpec("bytes", PARAM)),
    (_QD + r"host_exact_requests", MetricSpec("requests", PARAM)),
    (_QD + r"guest_(aqu_sz|inflight_mean)", MetricSpec("requests", HIGHER)),
    (_QD + r"fio_depth_mode", MetricSpec("requests", PARAM)),
    (r"iops_scaling", MetricSpec("x", HIGHER)),
    (r"device_queue_depth|device_queue_depth_advertised|guest_queue_depth|guest_nr_requests",
     MetricSpec("requests", PARAM)),
    # queue-depth's evidence for a guest that held less than offered: its CPU and its own limits
    (_QD + r"(guest_cpu_(busy|all)|fio_cpu)_pct|guest_cpu_busy_min_pct", MetricSpec("%", PARAM)),
    (r"guest_limit_[a-z_]+|guest_async_depth", MetricSpec("requests", PARAM)),
    (r"guest_scheduler|guest_cgroup|guest_io_max", MetricSpec("", PARAM)),
    # io-size: bigger requests at the host (fewer splits) are better.
    (r"split_factor", MetricSpec("x", LOWER)),
    (r"host_request_bytes_(mean|p50)|guest_avg_request_bytes", MetricSpec("bytes", HIGHER)),
    (r"fio_iops", MetricSpec("IO/s", HIGHER)),
    (r"request_bytes|max_transfer_bytes", MetricSpec("bytes", PARAM)),
    (r"guest_max_(sectors_kb|hw_sectors_kb)", MetricSpec("KiB", PARAM)),
    (r"guest_max_segments", MetricSpec("segments", PARAM)),
    # buffered-direct: medians and spreads of the host's request size and depth per copy mode.
    (_BD + r"request_bytes_(median|min|max)", MetricSpec("bytes", HIGHER)),
    (_BD + r"depth_(median|min|max)", MetricSpec("requests", HIGHER)),
    (_BD + r"runs", MetricSpec("runs", PARAM)),
    # alignment
    (r"misaligned_requests|extra_stripe_requests", MetricSpec("requests", LOWER)),
    (r"crossing_fraction", MetricSpec("fraction", LOWER)),
    (r"partition_start_bytes|physical_block_bytes|optimal_io_bytes", MetricSpec("bytes", PARAM)),
    (r"host_requests", MetricSpec("requests", PARAM)),
    # direct-io: latency the host path adds is lower-better; write/flush counts are evidence.
    (r"latency_(guest|host|added)_(p50|min)_us", MetricSpec("us", LOWER)),
    (_DIO + r"(guest|host)_writes|" + _DIO + r"guest_syncs|" + _DIO + r"host_flushes", MetricSpec("requests", PARAM)),
    (r"w\d+k_ratio", MetricSpec("x", PARAM)),  # host writes per guest write: 1 is right, either way is wrong
    (r"w\d+k_host_mean_bytes", MetricSpec("bytes", PARAM)),
    (r"volatile_write_cache", MetricSpec("bool", PARAM)),
    # multi-queue
    (r"configured_queues|guest_hw_queues|queues_used", MetricSpec("queues", PARAM)),
    (r"queue\d+_count", MetricSpec("interrupts", PARAM)),
    (r"vcpus|online_cpus", MetricSpec("cpus", PARAM)),
    # every rule: the host CPU its guest's vCPUs got and waited for in its most contended window
    (r"host_vcpu_(wait|run)_pct", MetricSpec("%", PARAM)),
    # every rule: its repeats (--repeats) and what a stored --baseline added
    (r"repeats|repeats_passed", MetricSpec("repeats", PARAM)),
    (r"baseline_metrics_(compared|judged|not_judged|worse)", MetricSpec("metrics", PARAM)),
    (r"baseline_not_judged", MetricSpec("", PARAM)),
    # Text the rules record beside the numbers: what the numbers came from.
    (r".*_source|evidence|notes|baseline|baseline_saved_to|guest_driver|[a-z]+_disk", MetricSpec("", PARAM)),
    # a failed verdict's layer at fault and why (model/blame.py)
    (r"blame|blame_reason", MetricSpec("", PARAM)),
    # limits: the guest's view, the asked ("configured") value and the hypervisor's answer of each limit, as text.
    (r"[a-z]+_[a-z0-9_]+_(guest|configured|advertised)", MetricSpec("", PARAM)),
)

_COMPILED = tuple((re.compile(f"(?:{p})"), spec) for p, spec in METRICS)


def describe(prop: str) -> MetricInfo:
    """The metric a property name records (``qd1_iops.r2`` -> ``qd1_iops``, repeat 2, IO/s, higher-better)."""
    m = REPEAT.match(prop)
    name, repeat = (m.group("name"), int(m.group("k"))) if m else (prop, 0)
    for pattern, spec in _COMPILED:
        if pattern.fullmatch(name):
            return MetricInfo(name, repeat, spec.unit, spec.direction, True)
    return MetricInfo(name, repeat, "", PARAM, False)


def as_number(value: str) -> float | None:
    """A property value as a number (``"25.37"`` -> 25.37), or None for text (``"bpftrace"``)."""
    try:
        x = float(value)
    except ValueError:
        return None
    return x if math.isfinite(x) else None
