"""Disk settings on a real guest: libvirt and QEMU take each one (the live XML, query-block and
qom-get say so through the backend's own check), and the guest sees what the device advertises.

One guest: virtio-scsi with an iothread, 4 KiB logical blocks, a serial and a WWN on a qcow2 scratch
disk with an iops limit; virtio-blk with an iothread and writethrough. About 1-2 minutes under TCG.
"""

from __future__ import annotations

import os
from dataclasses import replace

from guest.tools.sysfs import Sysfs
from measure.standalone import standalone_guest
from model.disk_settings import parse_disk_settings
from model.disks import suite_disks

SCSI = parse_disk_settings("iothread=on,logical_block_size=4096,serial=VOLSCSI,wwn=5000c50015ea7100,"
                           "format=qcow2,iops=2000,bps=104857600,detect_zeroes=on,cache=directsync,aio=io_uring")
BLK = parse_disk_settings("iothread=on,cache=writethrough,serial=VOLBLK,discard=ignore")


def test_every_setting_takes_and_the_guest_sees_it() -> None:
    scsi_dut, scsi_scratch, blk_dut, blk_scratch = suite_disks(("virtio-scsi", "virtio-blk"), "file")
    specs = [replace(scsi_dut, settings=replace(SCSI, format=None, iops=None, bps=None)),
             replace(scsi_scratch, settings=SCSI), replace(blk_dut, settings=BLK), replace(blk_scratch, settings=BLK)]
    with standalone_guest(specs, f"vioconform-settings-{os.getpid()}") as (backend, disks):
        seen = backend.disk_settings_seen(disks[0].guest)  # raises on any setting that did not take
        print("\n".join(f"{k} = {v}" for k, v in sorted(seen.items())))
        assert all(" took: " in v for v in seen.values()), seen
        assert seen["disk.virtio-scsi.scratch.setting.format"] == "qcow2 took: query-block drv qcow2"
        assert seen["disk.virtio-scsi.scratch.setting.iops"] == "2000 took: query-block iops 2000"
        assert seen["disk.virtio-blk.setting.cache"] == (
            "writethrough took: query-block cache writeback=false direct=false no-flush=false")
        by_serial = {d.attached.spec.serial: d for d in disks}
        scsi = by_serial["VOLSCSI-0"]
        assert (scsi.limits.logical_block_size, scsi.limits.physical_block_size) == (4096, 4096), scsi.limits
        blk = by_serial["VOLBLK-2"]
        # writethrough: QEMU tells the guest of no volatile write cache
        assert blk.tool(Sysfs).read(blk.kernel_name, "queue/write_cache").strip() == "write through"
