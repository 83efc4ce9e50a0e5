"""Rule 10, hot-plug (docs/rules/hotplug.md).

On the controller of the disk under test, the host adds a disk with a serial of its own, the guest waits
for it; then the host removes it while it is idle, and both sides wait for it to go. ``--inject
hotplug-off`` makes the guest neither bind nor scan new devices for the rule's own add, and restores the
guest's setting after. Last, the disk is added again and removed while fio reads it (a surprise removal): fio must end with
errors within a bound, the guest must answer, both sides must let the disk go, and the guest's kernel log
(the kernel-log check) must show no oops or hung task; the read errors the removal causes are declared
to it. The added disk is removed whatever happens, so later rules see the guest as it was.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import pytest

from fixtures.options import SuiteOptions
from guest.tools.fio import Fio, FioJob
from guest.tools.hotplug import HotplugWatch
from guest.tools.sysfs import Sysfs
from guest.tools.system import WorkDir
from hypervisors.base import HotplugDisk, HotplugUnavailable
from measure import hostload
from measure.disk import GuestDisk
from model.errors import ParseError
from model.judging.verdict import RuleVerdict
from model.kernel_log_check import InjectedErrors
from model.parse.fio_json import parse_fio_json
from model.rules.hotplug import (
    FIO_BEFORE_REMOVAL_S,
    FIO_END_BOUND_S,
    GONE_BOUND_S,
    RULE,
    SEEN_BOUND_S,
    SURPRISE_BS_BYTES,
    SURPRISE_DEPTH,
    SURPRISE_FIO_RUNTIME_S,
    SURPRISE_REMOVAL,
    Gone,
    HotplugRun,
    Seen,
    Surprise,
    first_error,
    judge_hotplug,
    off_setting,
)
from model.rules.limits import compare_limits
from reports.records import Record
from reports.store.baseline import StoredBaseline
from suites.assertions import judge_rule
from suites.kernel_log_watch import expect_io_errors
from suites.needs import needed

#: How often the host's configuration is read while waiting for a removed disk to go.
HOST_POLL_S = 0.1


def _host_gone(hot: HotplugDisk, since: float, bound_s: float) -> float | None:
    """Seconds from ``since`` until the host no longer shows ``hot``, or None if it still does after ``bound_s``."""
    while hot.present():
        if time.monotonic() - since >= bound_s:
            return None
        time.sleep(HOST_POLL_S)
    return time.monotonic() - since


def _surprise(disk: GuestDisk, hot: HotplugDisk, watch: HotplugWatch, record: Record, raw: Path) -> Surprise | None:
    """Add the disk again, start fio on it, remove it under fio: how fio ends, whether the guest answers,
    when both sides let the disk go. None if the guest did not show the disk again."""
    hot.attach()
    sighting = watch.wait_for(hot.serial, SEEN_BOUND_S)
    if sighting is None:
        return None
    # the reads the removal fails are the rule's own: the kernel-log check is told (the whole disk)
    expect_io_errors(record, InjectedErrors(sighting.name))
    job = FioJob("hotplug-surprise", rw="randread", bs_bytes=SURPRISE_BS_BYTES, iodepth=SURPRISE_DEPTH,
                 runtime_s=SURPRISE_FIO_RUNTIME_S, size_bytes=hot.size_bytes)
    run = disk.tool(Fio).start(job, f"/dev/{sighting.name}", disk.tool(WorkDir).ensure(), "hotplug-surprise")
    time.sleep(FIO_BEFORE_REMOVAL_S)
    t0 = time.monotonic()
    hot.detach()
    ended = run.wait(FIO_END_BOUND_S)
    fio_s = time.monotonic() - t0 if ended else None
    out = run.output() if ended else run.finish(GONE_BOUND_S).output
    raw.mkdir(parents=True, exist_ok=True)
    (raw / "surprise-fio.out").write_text(out.stdout)
    (raw / "surprise-fio.err").write_text(out.stderr)
    responsive = watch.read("/proc/uptime") is not None
    guest_s = watch.wait_gone(sighting.name, GONE_BOUND_S)
    reads = read_bytes = None
    with contextlib.suppress(ParseError, IndexError):
        read = parse_fio_json(out.stdout, f"fio hotplug-surprise on /dev/{sighting.name}").jobs[0].read
        reads, read_bytes = read.io_count, read.io_bytes
    return Surprise(sighting.name, fio_s, out.exit_status, first_error(out.stdout, out.stderr), responsive, guest_s,
                    _host_gone(hot, t0, GONE_BOUND_S + FIO_END_BOUND_S), fio_reads=reads, fio_read_bytes=read_bytes,
                    request_bytes=job.bs_bytes)


def _add_and_remove(disk: GuestDisk, hot: HotplugDisk, watch: HotplugWatch, record: Record, raw: Path,
                    surprise_removal: bool) -> HotplugRun:
    # the guest's vCPUs' wait for a host CPU over each bounded interval (model/judging/host_busy.py)
    cpu0 = disk.vcpu_times()
    t0 = time.monotonic()
    hot.attach()
    attach_s = time.monotonic() - t0
    sighting = watch.wait_for(hot.serial, SEEN_BOUND_S)
    seen_wait = hostload.wait_pct(cpu0, disk.vcpu_times(), f"{disk.config_id}: {RULE} add")
    seen = None
    if sighting is not None:
        seen_s = time.monotonic() - t0
        # the limits rule's comparison on the added disk: the guest's view as the driver set it at probe
        limits = tuple(compare_limits(hot.configured, disk.tool(Sysfs).limits(sighting.name)))
        seen = Seen(sighting.name, sighting.size_bytes, sighting.guest_s, seen_s, limits)
    gone = None
    if sighting is not None:
        cpu1 = disk.vcpu_times()
        t1 = time.monotonic()
        hot.detach()
        detach_s = time.monotonic() - t1
        guest_s = watch.wait_gone(sighting.name, GONE_BOUND_S)
        host_s = _host_gone(hot, t1, GONE_BOUND_S)
        gone = Gone(detach_s, guest_s, host_s,
                    hostload.wait_pct(cpu1, disk.vcpu_times(), f"{disk.config_id}: {RULE} removal"))
    surprise = None
    if surprise_removal and gone is not None and gone.host_s is not None:
        surprise = _surprise(disk, hot, watch, record, raw)
    return HotplugRun(disk.attached.spec.controller, hot.serial, hot.size_bytes, attach_s, seen, gone,
                      surprise=surprise, seen_vcpu_wait_pct=seen_wait)


@pytest.mark.rule("hotplug")
def test_hotplug(disk: GuestDisk, suite_options: SuiteOptions, record: Record,
                 stored_baseline: StoredBaseline | None) -> None:
    watch = needed(disk, HotplugWatch, RULE)
    fault = off_setting(disk.limits.driver) if "hotplug-off" in suite_options.inject else None

    def once(raw: Path) -> RuleVerdict:
        try:
            hot = disk.backend.hotplug_disk(disk.guest, disk.attached)
        except HotplugUnavailable as e:
            pytest.skip(f"{RULE} cannot run on {disk.config_id}: {e}")
        restore = None
        try:
            if fault is not None:
                path, value = fault
                was = watch.read(path)
                if was is None:
                    pytest.skip(f"--inject hotplug-off cannot apply on {disk.config_id}: the guest's kernel has no {path}")
                restore = (path, was)
                watch.write(path, value)
            return judge_hotplug(_add_and_remove(disk, hot, watch, record, raw, suite_options.option(SURPRISE_REMOVAL)))
        except HotplugUnavailable as e:
            pytest.skip(f"{RULE} cannot run on {disk.config_id}: {e}")
        finally:
            hot.remove()
            _host_gone(hot, time.monotonic(), GONE_BOUND_S)
            if restore is not None:
                watch.write(*restore)

    # Whether a disk appears and goes is exact: every repeat must pass.
    judge_rule(record, suite_options, once, exact=True, baseline=stored_baseline, disks=(disk,))
