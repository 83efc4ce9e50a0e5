"""Disk settings on a real guest: libvirt and QEMU take each one (the live XML, query-block and
qom-get say so through the backend's own check), and the guest sees what the device advertises.

One guest: virtio-scsi with an iothread, 4 KiB logical blocks, a serial and a WWN on a qcow2 scratch
disk with an iops limit; virtio-blk with an iothread and writethrough, its disk under test the null-co
latency disk (QEMU arguments, not libvirt XML). About 1 minute under TCG.
"""

from __future__ import annotations

import os
from dataclasses import replace

from guest.tools.sysfs import Sysfs
from measure.standalone import standalone_guest
from model.disk_settings import parse_disk_settings
from model.disks import suite_disks
from model.settings_seen import properties, raise_if_missing

SCSI = parse_disk_settings("iothread=on,logical_block_size=4096,serial=VOLSCSI,wwn=5000c50015ea7100,"
                           "format=qcow2,iops=2000,bps=104857600,detect_zeroes=on,cache=directsync,aio=io_uring")
BLK = parse_disk_settings("iothread=on,cache=writethrough,serial=VOLBLK,discard=ignore")


def test_every_setting_takes_and_the_guest_sees_it() -> None:
    scsi_dut, scsi_scratch, blk_dut, blk_scratch = suite_disks(("virtio-scsi", "virtio-blk"), "file")
    # virtio-blk's disk under test is the null-co latency disk: its settings go in QEMU arguments
    specs = [replace(scsi_dut, settings=replace(SCSI, format=None, iops=None, bps=None)),
             replace(scsi_scratch, settings=SCSI), replace(blk_dut, backing="latency", settings=BLK),
             replace(blk_scratch, settings=BLK)]
    with standalone_guest(specs, f"vioconform-settings-{os.getpid()}") as (backend, disks):
        checked = backend.disk_settings_seen(disks[0].guest)
        raise_if_missing(checked)  # as the guest fixture does before any rule
        seen = properties(checked)
        print("\n".join(f"{k} = {v}" for k, v in sorted(seen.items())))
        assert seen["disk.virtio-blk.setting.discard"] == (
            "ignore not-applicable: the null-co latency disk has no file under it")
        assert all(" took: " in v for k, v in seen.items() if k != "disk.virtio-blk.setting.discard"), seen
        assert seen["disk.virtio-scsi.scratch.setting.format"] == "qcow2 took: query-block drv qcow2"
        assert seen["disk.virtio-scsi.scratch.setting.iops"] == "2000 took: query-block iops 2000"
        assert seen["disk.virtio-blk.setting.cache"] == (
            "writethrough took: query-block cache writeback=false direct=false no-flush=false")
        by_serial = {d.attached.spec.serial: d for d in disks}
        scsi = by_serial["VOLSCSI-0"]
        assert (scsi.limits.logical_block_size, scsi.limits.physical_block_size) == (4096, 4096), scsi.limits
        blk = by_serial["VOLBLK-2"]
        # writethrough: QEMU tells the guest of no volatile write cache, on the null-co disk as on the file
        for d in (blk, by_serial["VOLBLK-3"]):
            assert d.tool(Sysfs).read(d.kernel_name, "queue/write_cache").strip() == "write through", d.kernel_name
