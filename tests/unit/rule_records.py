"""What each rule records, by rule: every property name its judge writes, driven with the recorded
and synthetic inputs of tests/model and tests/unit (every branch that adds a property), plus what its
suite adds with ``record.add()``, plus what every rule's record gets from the shared code (repeats,
notes, the ``--baseline`` comparison, a failure's blame).

tests/unit/test_metric_table.py checks that each of these names has exactly one declared spec, in its
rule's own module or among the shared ones."""

from __future__ import annotations

import dataclasses
import functools

from model.across.against_baseline import against_baseline
from model.across.moves import Series
from model.advertised import Advertised
from model.device_limits import ConfiguredLimits, DepthLimit, GuestLimits, IoMax, parse_guest_limits
from model.judging.host_busy import Overrun, fold_overruns
from model.judging.verdict import Number, RuleVerdict, combine_repeats
from model.kernel_log_check import InjectedErrors, check_kernel_log, with_kernel_log
from model.parse.dmesg import parse_kernel_log
from model.rules.alignment import count_boundary_crossings, judge_alignment
from model.rules.block_size import DirectProbe, judge_block_size
from model.rules.buffered_direct import judge_regime
from model.rules.data_integrity import PLAN, GuestCheck, Region, check_backing, judge_data_integrity
from model.rules.direct_io import LatencyFloor, judge_direct_io
from model.rules.discard import ZEROES_RANGE, DiscardLimits, ZeroesSeen, judge_discard
from model.rules.error_propagation import WORKLOAD, attempts_for, bound_for, judge_error_propagation
from model.rules.hotplug import Gone, judge_hotplug
from model.rules.identity import ConfiguredIdentity, DeviceIdentity, GuestIdentity, judge_identity
from model.rules.io_size import judge_io_size
from model.rules.limits import judge_limits
from model.rules.multi_queue import judge_multiqueue
from model.rules.queue_depth import DepthPoint, DeviceSaid, GuestPath, judge_queue_depth
from model.rules.resize import bound_for as resize_bound
from model.rules.resize import judge_resize
from model.rules.stall_tolerance import judge_stall_tolerance
from model.rules.throttle import ThrottlePhase, judge_throttle
from model.rules.write_cache import judge_write_cache
from tests.model.test_discard import BLK, SCSI, WHERE, _healthy, _zeroes
from tests.model.test_discard import _trim as _discard_trim
from tests.model.test_error_propagation import HEALED, IGNORING, SCSI_BOUND, _scsi
from tests.model.test_host_busy import LATE_BUSY as HOTPLUG_LATE_BUSY
from tests.model.test_host_busy import RESIZE_LATE_BUSY
from tests.model.test_hotplug import BLK as HOTPLUG_BLK
from tests.model.test_hotplug import BLK_SURPRISE, SCSI_OFF, SCSI_SURPRISE
from tests.model.test_model_integrity import ZERO_GUARDS, window_of, written
from tests.model.test_model_rules import DATA, HEALTHY_DURABILITY, HEALTHY_FIDELITY, _baseline, _file_writes, _io
from tests.model.test_model_stall_tolerance import BLK as STALL_BLK
from tests.model.test_model_stall_tolerance import HEALTHY as STALL
from tests.model.test_model_stall_tolerance import SCSI_30
from tests.model.test_resize import GROWN as RESIZE_GROWN
from tests.model.test_resize import SCSI_GROW_LOG
from tests.model.test_resize import _run as _resize_run
from tests.model.test_throttle import LIMIT as THROTTLE_LIMIT
from tests.model.test_throttle import recorded as recorded_throttle
from tests.model.test_write_cache import _disks as _write_cache_disks
from tests.unit.test_queue_depth_verdict import HEALTHY, scsi_path

#: What suites/test_<rule>.py adds with record.add() besides the verdict's numbers, by rule:
#: queue-depth's exact_summary() and Little's-law depth of each window and the guest's own limits,
#: io-size's guest request size, buffered-direct's saved baseline.
SUITE_PROPERTIES: dict[str, tuple[str, ...]] = {
    "queue-depth": (*(f"qd{n}_{k}" for n in (1, 32) for k in (
        "host_exact_source", "host_exact_requests", "host_exact_depth_median", "host_exact_depth_p90",
        "host_exact_io_length_mean", "host_average_depth")),
        "guest_queue_depth", "guest_nr_requests", "guest_driver"),
    "io-size": ("guest_avg_request_bytes",),
    "buffered-direct": ("baseline_saved_to",),
    "error-propagation": ("injected_device", "injected_first_sector", "injected_sectors", "kernel_error_sectors"),
}

#: What every rule's record can hold besides its own numbers: a note, the repeats (``NAME.rK`` and
#: their counts), the ``--baseline`` comparison, and what the shared code adds around the verdict: the
#: host CPU its guest waited for (suites/assertions.py) and a failure's layer at fault (reports/junit.py).
SHARED_PROPERTIES = ("notes", "repeats", "repeats_passed", "baseline_source", "baseline_metrics_compared",
                     "baseline_metrics_judged", "baseline_metrics_not_judged", "baseline_metrics_worse",
                     "baseline_worse", "baseline_moved", "baseline_not_judged")
#: Written around the verdict rather than by it (so not checked against the shared code's output here).
AROUND_THE_VERDICT = ("host_vcpu_wait_pct", "host_vcpu_run_pct", "blame", "blame_reason")
#: What the kernel-log check adds to every rule's verdict (model/kernel_log_check.py, suites/kernel_log_watch.py).
KERNEL_LOG_PROPERTIES = ("kernel_log_source", "kernel_log_new_lines", "kernel_log_bad_lines", "kernel_log_bad_kinds",
                         "kernel_log_expected_errors")


def _queue_depth() -> list[RuleVerdict]:
    """Every branch of queue-depth's properties: the guest's path read (limits, scheduler, io.max,
    async_depth), the guest's CPU measured, the device's own answer."""
    cpu = [DepthPoint(p.offered_depth, p.iops, p.fio_depth_mode, p.guest_aqu_sz, p.guest_inflight_mean, p.host_depth,
                      p.host_depth_min, p.host_depth_max, p.host_source, guest_cpu_busy_pct=55.0,
                      guest_cpu_all_pct=40.0, fio_cpu_pct=12.0) for p in HEALTHY]
    io_max = scsi_path(io_max=(IoMax("/vioc", riops=400),))
    return [judge_queue_depth(HEALTHY, device_queue_depth=128),
            judge_queue_depth(cpu, 128, guest_path=io_max, advertised=DeviceSaid(128, "cmd_per_lun 128")),
            judge_queue_depth(cpu[:1], 128, guest_path=GuestPath((DepthLimit("/sys/block/vda/queue/nr_requests",
                                                                              8, 256),)))]


def _limits() -> list[RuleVerdict]:
    guest = parse_guest_limits((DATA / "limits-virtio-scsi.txt").read_text())
    asked = ConfiguredLimits(queue_depth=128, max_transfer_bytes=1 << 20, logical_block_bytes=512,
                             physical_block_bytes=4096, optimal_io_bytes=65536, write_cache=True, discard=True,
                             queues=2)
    said = Advertised(source="QEMU", queue_depth=128, max_transfer_bytes=1 << 20, logical_block_bytes=512,
                      physical_block_bytes=4096, optimal_io_bytes=65536, write_cache=True, discard=True, queues=2)
    disks: list[tuple[str, ConfiguredLimits, GuestLimits] | tuple[str, ConfiguredLimits, GuestLimits,
                                                                   Advertised | None]]
    disks = [("dut", asked, guest, said), ("scratch", asked, guest, said)]
    return [judge_limits(disks)]


def _data_integrity() -> list[RuleVerdict]:
    """A healthy run, and lba-shift's (a shift found, written through a mapping)."""
    region, run = Region(), 0x5EED0001
    writes = {p.name: p.writes for p in PLAN}
    guest = GuestCheck("/dev/vdb", region.length_bytes, ())
    healthy = check_backing(window_of(written(run)), ZERO_GUARDS, region, PLAN, run)
    shifted = check_backing(window_of(written(run, shift_sectors=8)), ZERO_GUARDS, region, PLAN, run)
    return [judge_data_integrity(healthy, guest, region, PLAN, run, writes),
            judge_data_integrity(shifted, guest, region, PLAN, run, writes, "device-mapper target vioc-lba-shift")]


def verdicts() -> dict[str, list[RuleVerdict]]:
    """Each rule's verdicts on recorded and synthetic inputs, by rule."""
    base = _baseline()["libvirt:virtio-blk:latency5ms"]
    return {
        "queue-depth": _queue_depth(),
        "io-size": [judge_io_size(_io(65536, max_sectors_kb=64)),
                    judge_io_size(dataclasses.replace(_io(1 << 20), host_request_bytes_p50=1 << 20,
                                                      guest_max_segments=254, fio_iops=120.0))],
        "direct-io": [judge_direct_io(HEALTHY_FIDELITY, HEALTHY_DURABILITY, True, "configured write back",
                                      LatencyFloor(395.3, 171.5, 10.3, 75))],
        "buffered-direct": [judge_regime(base, base, "b.json"), judge_regime(base, None)],
        "alignment": [judge_alignment(count_boundary_crossings(_file_writes(63), 4096, 65536), 63 * 512, "w",
                                      "exact")],
        "multi-queue": [judge_multiqueue(2, 2, 2, {0: 1024, 1: 971}, online_cpus=1)],
        "limits": _limits(),
        # the sizes as asked, advertised and seen, and each of the three reads, read and refused
        "block-size": [judge_block_size([
            (role, ConfiguredLimits(128, logical_block_bytes=512, physical_block_bytes=4096),
             parse_guest_limits((DATA / "limits-virtio-scsi.txt").read_text()),
             Advertised("QEMU", logical_block_bytes=512, physical_block_bytes=4096),
             [DirectProbe("aligned", 0, 512), DirectProbe("short", 0, 256, 22), DirectProbe("offset", 256, 512)])
            for role in ("dut", "scratch")])],
        # every phase measured (the lifted rate over the limit, the vCPUs' wait), and a phase whose fio failed
        "throttle": [judge_throttle([dataclasses.replace(p, vcpu_wait_pct=6.1)
                                     for p in recorded_throttle("phases-virtio-blk-healthy")], THROTTLE_LIMIT, "the rule"),
                     judge_throttle([ThrottlePhase("throttled", THROTTLE_LIMIT, THROTTLE_LIMIT, "q", fio_error="EIO")],
                                    THROTTLE_LIMIT, "the rule")],
        # every side of every identity (what the device has included) and a mismatch
        "identity": [judge_identity([
            (role, ConfiguredIdentity("vioc-dut0", "5000c50015ea7100", 1 << 30, 36, "virtio-scsi"),
             GuestIdentity("sdb", 1 << 30, "vioc-dut0", "device/vpd_pg80", "5000c50015ea71ff", "device/vpd_pg83"),
             DeviceIdentity("vioc-dut0", "5000c50015ea71ff")) for role in ("dut", "scratch")])],
        "data-integrity": _data_integrity(),
        # healthy (every count, the driver's attempts); an unknown driver and no healed run
        "error-propagation": [judge_error_propagation(WORKLOAD, [_scsi("read"), _scsi("write")], HEALED,
                                                      attempts_for("sd"), SCSI_BOUND),
                              judge_error_propagation(WORKLOAD, [_scsi("read", ended=False)], None, None,
                                                      bound_for(None, None)),
                              judge_error_propagation(WORKLOAD, [], None, None, bound_for(None, None),
                                                      policy=IGNORING)],
        "hotplug": [judge_hotplug(dataclasses.replace(HOTPLUG_BLK, surprise=SCSI_SURPRISE)), judge_hotplug(SCSI_OFF),
                    judge_hotplug(dataclasses.replace(HOTPLUG_BLK, surprise=BLK_SURPRISE)),
                    # late on a busy host: the waits of both intervals, the overrun not judged
                    judge_hotplug(dataclasses.replace(HOTPLUG_LATE_BUSY, gone=Gone(0.0, 0.01, 0.28, vcpu_wait_pct=7.1)))],
        # healthy with and without the device's own counts, fstrim and write-zeroes; a device without discard
        "discard": [judge_discard(SCSI, _healthy(SCSI, True), WHERE, "sdb", _discard_trim(True), _zeroes(2147479552)),
                    judge_discard(BLK, _healthy(BLK, False), WHERE, "vdb", _discard_trim(False), _zeroes(2147483136)),
                    judge_discard(DiscardLimits(0, 0, 0), [], WHERE, "hdb", zeroes=ZeroesSeen(ZEROES_RANGE, 0))],
        # healthy (both steps seen), and a grow never seen
        "resize": [judge_resize(dataclasses.replace(_resize_run("sd", "sdb", 0.049, 0.137, log=SCSI_GROW_LOG),
                                                    fs=RESIZE_GROWN), resize_bound("sd")),
                   judge_resize(_resize_run("sd", "sdb", None, 0.05, grow_guest=1 << 30), resize_bound("sd")),
                   judge_resize(RESIZE_LATE_BUSY, resize_bound("sd"))],
        # every property of a judged stall; the timeout's only where the driver has one
        "stall-tolerance": [judge_stall_tolerance(SCSI_30, 30.0, dataclasses.replace(STALL, vcpu_wait_pct=12.5)),
                            judge_stall_tolerance(STALL_BLK, 30.0, None, "x")],
        # the recorded healthy run (every property, the guest's flushes and FUA included)
        "write-cache": [judge_write_cache(_write_cache_disks("healthy", "write back"))],
    }


@functools.cache
def recorded() -> dict[str, list[str]]:
    """Every property name each rule records, by rule: its verdicts' (with notes), its suite's, and
    its repeats' (``NAME.r1``, ``NAME.r2``, ``repeats``). Worked out once per process (the judges
    are pure; each test of tests/unit/test_metric_table.py asks); not to be changed by a caller."""
    out = {}
    for rule, vs in verdicts().items():
        names = [n for v in vs for n in v.record_properties()]
        names += list(combine_repeats([vs[0], vs[0]], exact=False).properties)
        out[rule] = sorted({*names, *SUITE_PROPERTIES.get(rule, ())})
    return out


def shared_recorded() -> list[str]:
    """What the shared code writes into every rule's record: checked here against its own output."""
    v = RuleVerdict("queue-depth", ("measured",), (), ("a note",), {"qd1_iops": 150.0})
    compared = against_baseline(v, v.properties, {"qd1_iops": Series("IO/s", "higher-better", (300.0,))}, "run 7")
    names = {*v.record_properties(), *compared.properties,
             *combine_repeats([v, v], exact=False).properties} - {"qd1_iops", "qd1_iops.r1", "qd1_iops.r2"}
    assert names == set(SHARED_PROPERTIES), sorted(names)
    # the real 6.1 I/O errors of tests/data/guest: one in a range the rule injected errors into, one outside it
    errors = parse_kernel_log((DATA / "dmesg-6.1-io-errors.txt").read_text(), "dmesg")
    checked = with_kernel_log(v, check_kernel_log(errors, "dmesg", injected=[InjectedErrors("sdb", 800, 8)]))
    assert set(checked.properties) - set(v.properties) == set(KERNEL_LOG_PROPERTIES), sorted(checked.properties)
    held: dict[str, Number] = {}
    fold_overruns([Overrun("the guest showed sdc 10.58 s after ...", 60.67)], [], [], held)
    return [*SHARED_PROPERTIES, *KERNEL_LOG_PROPERTIES, *AROUND_THE_VERDICT, *held]

