"""Rule 10, hot-plug (docs/rules/hotplug.md).

On the controller of the disk under test, the host adds a disk with a serial of its own, the guest waits
for it; then the host removes it while it is idle, and both sides wait for it to go. ``--inject
hotplug-off`` makes the guest neither bind nor scan new devices for the rule's own add, and restores the
guest's setting after. The added disk is removed whatever happens, so later rules see the guest as it was.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from fixtures.options import SuiteOptions
from guest.tools.hotplug import HotplugWatch, off_setting
from hypervisors.base import HotplugDisk, HotplugUnavailable
from measure.disk import GuestDisk
from model.rules.hotplug import GONE_BOUND_S, RULE, SEEN_BOUND_S, Gone, HotplugRun, Seen, judge_hotplug
from model.rules.verdict import RuleVerdict
from reports.baseline import StoredBaseline
from reports.per_test import Record
from suites.assertions import judge_repeated, raw_dir_for
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


def _add_and_remove(disk: GuestDisk, hot: HotplugDisk, watch: HotplugWatch) -> HotplugRun:
    t0 = time.monotonic()
    hot.attach()
    attach_s = time.monotonic() - t0
    sighting = watch.wait_for(hot.serial, SEEN_BOUND_S)
    seen = None if sighting is None else Seen(sighting.name, sighting.size_bytes, sighting.guest_s,
                                              time.monotonic() - t0)
    gone = None
    if sighting is not None:
        t1 = time.monotonic()
        hot.detach()
        detach_s = time.monotonic() - t1
        guest_s = watch.wait_gone(sighting.name, GONE_BOUND_S)
        gone = Gone(detach_s, guest_s, _host_gone(hot, t1, GONE_BOUND_S))
    return HotplugRun(disk.attached.spec.controller, hot.serial, hot.size_bytes, attach_s, seen, gone)


@pytest.mark.rule("hotplug")
def test_hotplug(disk: GuestDisk, suite_options: SuiteOptions, record: Record,
                 stored_baseline: StoredBaseline | None) -> None:
    watch = needed(disk, HotplugWatch, RULE)
    fault = off_setting(disk.limits.driver) if "hotplug-off" in suite_options.inject else None

    def once(_raw: Path) -> RuleVerdict:
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
            return judge_hotplug(_add_and_remove(disk, hot, watch))
        except HotplugUnavailable as e:
            pytest.skip(f"{RULE} cannot run on {disk.config_id}: {e}")
        finally:
            hot.remove()
            _host_gone(hot, time.monotonic(), GONE_BOUND_S)
            if restore is not None:
                watch.write(*restore)

    # Whether a disk appears and goes is exact: every repeat must pass.
    judge_repeated(record, disk.config_id, raw_dir_for(suite_options.results_dir, disk.config_id) / RULE,
                   suite_options.repeats_for(RULE), once, exact=True, baseline=stored_baseline, disks=(disk,))
