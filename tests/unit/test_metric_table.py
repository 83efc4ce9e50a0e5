"""Every property the rules' judges and the suites write today has an entry in model/across/metrics.py:
a new property without one is stored as a unit-less parameter, so this test names it."""

from __future__ import annotations

from model.across.metrics import describe
from model.device_limits import ConfiguredLimits, parse_guest_limits
from model.rules.alignment import count_boundary_crossings, judge_alignment
from model.rules.buffered_direct import judge_regime
from model.rules.direct_io import LatencyFloor, judge_direct_io
from model.rules.io_size import judge_io_size
from model.rules.limits import judge_limits
from model.rules.multi_queue import judge_multiqueue
from model.rules.queue_depth import judge_queue_depth
from model.rules.verdict import RuleVerdict
from tests.model.test_model_rules import DATA, HEALTHY_DURABILITY, HEALTHY_FIDELITY, _baseline, _file_writes, _io
from tests.unit.test_queue_depth_verdict import HEALTHY

#: What suites/*.py add with record.add() besides the verdict's numbers (queue-depth's
#: measure.window exact_summary for each depth, io-size's guest request size).
SUITE_PROPERTIES = ("qd1_host_exact_source", "qd1_host_exact_requests", "qd1_host_exact_depth_median",
                    "qd1_host_exact_depth_p90", "qd1_host_exact_io_length_mean", "qd1_host_average_depth",
                    "guest_queue_depth", "guest_nr_requests", "guest_driver", "guest_avg_request_bytes",
                    "baseline_saved_to")


def _verdicts() -> list[RuleVerdict]:
    base = _baseline()["libvirt:virtio-blk:latency5ms"]
    return [judge_io_size(_io(65536, max_sectors_kb=64)),
            judge_queue_depth(HEALTHY, device_queue_depth=128),
            judge_direct_io(HEALTHY_FIDELITY, HEALTHY_DURABILITY, True, "configured write back",
                            LatencyFloor(395.3, 171.5, 10.3, 75)),
            judge_regime(base, base, "b.json"),
            judge_alignment(count_boundary_crossings(_file_writes(63), 4096, 65536), 63 * 512, "w", "exact"),
            judge_multiqueue(2, 2, 2, {0: 1024, 1: 971}),
            judge_limits([("dut", ConfiguredLimits(queue_depth=128, write_cache=True, discard=True, queues=2),
                           parse_guest_limits((DATA / "limits-virtio-scsi.txt").read_text()))])]


def test_every_property_written_today_is_in_the_table() -> None:
    names = [n for v in _verdicts() for n in v.record_properties()] + list(SUITE_PROPERTIES)
    assert len(names) > 100
    assert [n for n in names if not describe(n).known] == []


def test_the_directions_of_the_numbers_rules_judge_by() -> None:
    qd = judge_queue_depth(HEALTHY, device_queue_depth=128).properties
    directions = {n: describe(n).direction for n in qd}
    assert directions["qd32_host_depth"] == "higher-better" and directions["qd32_host_required"] == "parameter"
    assert directions["iops_scaling"] == "higher-better" and directions["iops_scaling_required"] == "parameter"
