"""Rule 10, resize (docs/rules/resize.md).

On the scratch disk, while fio reads and writes its first MiBs: the host grows the disk by
GROW_BYTES (QMP ``block_resize``), the guest is asked, in one command that waits up to the bound,
whether ``/sys/block/<disk>/size`` shows the size the host then reports; then the host shrinks the
disk back to its size and the guest is asked again, so that later rules find the disk as the suite
made it (also when the rule fails or errors: the shrink is in a ``finally``); a host that cannot
shrink a disk (vSphere) leaves it grown, and the verdict says so. The kernel log after a mark says
which path told the guest.

Then, with fio stopped: ext4 over the whole disk, mounted; the host grows the disk again and, once
the guest sees it, ``resize2fs`` grows the mounted filesystem online; then it is unmounted, its
superblock zeroed and the disk shrunk back (also when that fails). Not tried where the guest never
saw the first grow, nor where the host cannot shrink the disk back.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from fixtures.options import SuiteOptions
from guest.tools.ext4 import Ext4, Resize2fs
from guest.tools.fio import Fio, FioJob
from guest.tools.kernel_log_reader import KernelLog, Mark
from guest.tools.resize import DiskSize
from guest.tools.system import WorkDir
from guest.tools.tool import ToolMissing
from hypervisors.base import DiskResizer, ResizeUnavailable
from measure import hostload
from measure.disk import GuestDisk
from model.errors import FioError
from model.judging.host_busy import busy_stop
from model.judging.verdict import RuleVerdict
from model.parse.filesystem import parse_resize2fs
from model.parse.fio_json import fio_messages, parse_fio_json
from model.rules.resize import (
    FIO_STOP_S,
    GROW_BYTES,
    IO_BLOCK_BYTES,
    IO_DEPTH,
    IO_REGION_BYTES,
    IO_RUNTIME_S,
    MOUNT,
    RULE,
    Bound,
    FsGrow,
    ResizeRun,
    ResizeStep,
    bound_for,
    judge_resize,
    mechanism,
)
from reports.records import Record
from reports.store.baseline import StoredBaseline
from suites.assertions import judge_rule
from suites.needs import needed

#: The fault of this rule: a device property set when the guest starts (model/faults.py).
FAULT = "param-change-off"
#: The I/O in flight through the resizes (model/rules/resize.py's IO_*).
JOB = FioJob("resize-io", rw="randrw", bs_bytes=IO_BLOCK_BYTES, iodepth=IO_DEPTH, size_bytes=IO_REGION_BYTES,
             runtime_s=IO_RUNTIME_S)


def _mark(name: str, disk: GuestDisk) -> Mark:
    """The kernel-log mark of a step, riding ahead of the guest's next command (the step's fio start or
    udev settle, before the host resizes): no round trip of its own."""
    return disk.tool(KernelLog).mark_with_next(f"{RULE} {name} {disk.config_id}")


def _step(name: str, disk: GuestDisk, resizer: DiskResizer, to_bytes: int, bound: Bound, raw: Path,
          mark: Mark) -> ResizeStep:
    """One resize by the host and the guest's wait for it; the kernel log after ``mark`` (:func:`_mark`,
    made before the guest's last command ahead of the resize) read back after the wait."""
    klog = disk.tool(KernelLog)
    klog.written(mark)
    before = resizer.size_bytes()
    host = resizer.resize(to_bytes)
    cpu0 = disk.vcpu_times()  # the vCPUs' wait for a host CPU over the bounded interval (model/judging/host_busy.py)
    sent = time.monotonic()
    # the guest waits for the size the host reports, not the one asked: QEMU may round it
    wait = disk.tool(DiskSize).wait_for(disk.kernel_name, host.size_bytes, bound.seconds)
    # from the host's call returning to the guest's answer that it shows the size: an upper bound,
    # the SSH round trip included (the guest's own wait, wait.waited_s, is a lower one)
    seen = time.monotonic() - sent if wait.reached else None
    vcpu_wait = hostload.wait_pct(cpu0, disk.vcpu_times(), f"{disk.config_id}: {RULE} {name}")
    # a command of its own: riding with the wait it would add its read to the guest_seen_s the bound judges
    lines = klog.since(mark.token).text
    raw.mkdir(parents=True, exist_ok=True)
    (raw / f"resize-{name}.kernel-log").write_text(lines)
    return ResizeStep(name, before, host.size_bytes, host.seconds, wait.size_bytes, seen,
                      mechanism(lines.splitlines(), disk.kernel_name), vcpu_wait)


def _grow_mounted(disk: GuestDisk, resizer: DiskResizer, original: int, bound: Bound) -> FsGrow:
    """ext4 over the whole disk, mounted; the host grows the disk by GROW_BYTES and, once the guest sees
    it, resize2fs grows the mounted filesystem; taken off afterwards (unmounted, its superblock zeroed),
    whatever happened."""
    try:
        ext4, resize2fs = disk.tool(Ext4), disk.tool(Resize2fs)
    except ToolMissing as e:
        return FsGrow(None, None, original, not_run=str(e))
    try:
        before = ext4.make_mounted(disk.device_path, MOUNT)
        host = resizer.resize(original + GROW_BYTES)
        wait = disk.tool(DiskSize).wait_for(disk.kernel_name, host.size_bytes, bound.seconds)
        if not wait.reached:
            return FsGrow(before, None, wait.size_bytes, not_run=(
                f"the guest still saw {wait.size_bytes} bytes {bound.seconds:.1f} s after the host grew the disk to "
                f"{host.size_bytes} bytes"))
        started = time.monotonic()
        grown = resize2fs.grow(disk.device_path, MOUNT)
        seconds = time.monotonic() - started
        said = parse_resize2fs(grown.said)
        error = "" if grown.ok else said.last_line or f"resize2fs exited {grown.exit_status}"
        return FsGrow(before, grown.size, host.size_bytes, error, said.size_bytes, seconds)
    finally:
        ext4.take_off(disk.device_path, MOUNT)


def _grow_fs(disk: GuestDisk, resizer: DiskResizer, original: int, bound: Bound) -> FsGrow:
    """:func:`_grow_mounted`, then the disk back at ``original`` bytes and seen so by the guest (whatever
    happened: later rules find the disk as the suite made it)."""
    try:
        return _grow_mounted(disk, resizer, original, bound)
    finally:
        if resizer.size_bytes() != original:
            disk.tool(DiskSize).settle()  # no probe of the grown disk's end left in flight
            host = resizer.resize(original)
            back = disk.tool(DiskSize).wait_for(disk.kernel_name, host.size_bytes, bound.seconds)
            if not back.reached:
                raise RuntimeError(f"{RULE}: the guest still shows {back.size_bytes} bytes {bound.seconds:.1f} s after "
                                   f"the host shrank {disk.device_path} back to {host.size_bytes} bytes: later rules "
                                   "would find it at another size than the suite made")


@pytest.mark.rule("resize")
def test_resize(scratch_disk: GuestDisk, suite_options: SuiteOptions, record: Record,
                stored_baseline: StoredBaseline | None) -> None:
    disk = scratch_disk
    try:
        resizer = disk.backend.resizer(disk.guest, disk.attached)
    except ResizeUnavailable as e:
        pytest.skip(f"{RULE} cannot run on {disk.config_id}: {e}")
    if FAULT in suite_options.inject and disk.attached.spec.controller != "virtio-scsi":
        pytest.skip(f"--inject {FAULT} cannot apply on {disk.config_id}: only virtio-scsi has a resize notice a device "
                    "property withholds (virtio-blk has none: docs/rules/resize.md)")
    needed(disk, DiskSize, RULE)
    needed(disk, KernelLog, RULE)
    fio = needed(disk, Fio, RULE)
    bound = bound_for(disk.limits.driver)

    def once(raw: Path) -> RuleVerdict:
        original = resizer.size_bytes()
        grow = _mark("grow", disk)
        run = fio.start(JOB, disk.device_path, disk.tool(WorkDir).ensure(), f"vioc-resize-{disk.kernel_name}")
        steps: list[ResizeStep] = []
        not_shrunk = ""
        try:
            try:
                steps.append(_step("grow", disk, resizer, original + GROW_BYTES, bound, raw, grow))
            except ResizeUnavailable as e:
                pytest.skip(f"{RULE} cannot run on {disk.config_id}: {e}")
            finally:
                if resizer.size_bytes() != original:  # back to the suite's size, whatever happened
                    shrink = _mark("shrink", disk)
                    disk.tool(DiskSize).settle()  # no probe of the grown disk's end left in flight
                    try:
                        steps.append(_step("shrink", disk, resizer, original, bound, raw, shrink))
                    except ResizeUnavailable as e:  # vSphere only grows a disk: it stays grown, and the verdict says so
                        not_shrunk = str(e)
        finally:
            cpu_stop = disk.vcpu_times()
            finished = run.finish(FIO_STOP_S)
        if not finished.ended:  # no JSON to judge: the host's load, where the vCPUs' wait accounts for it
            late = f"{RULE}: fio {JOB.name} on {disk.device_path} was still running {FIO_STOP_S:g} s after the suite stopped it"
            raise busy_stop(late, hostload.wait_unnoted(cpu_stop, disk.vcpu_times()), FIO_STOP_S) or FioError(late, -1, "")
        out = finished.output
        (raw / "resize.fio.json").write_text(out.stdout)
        (raw / "resize.fio.stderr").write_text(out.stderr)
        errors = sum(j.error != 0 for j in parse_fio_json(out.stdout, f"fio {JOB.name} on {disk.device_path}").jobs)
        if out.status != 0:
            errors = max(errors, 1)
        if steps and steps[0].guest_seen_s is None:
            fs = FsGrow(None, None, original, not_run="the guest never saw the disk grow (above)")
        elif not_shrunk:
            fs = FsGrow(None, None, resizer.size_bytes(), not_run=f"the host cannot shrink the disk back ({not_shrunk}): "
                        "a second grow would leave it larger still")
        else:
            fs = _grow_fs(disk, resizer, original, bound)
        return judge_resize(ResizeRun(disk.kernel_name, disk.limits.driver, tuple(steps), errors,
                                      fio_messages(out.stdout, out.stderr), not_shrunk, fs), bound)

    # A size seen or not is exact: every repeat must pass.
    judge_rule(record, suite_options, once, exact=True, baseline=stored_baseline, disks=(disk,))

