"""Blame: which layer a failing verdict is the fault of, decided from each setting as asked, as the
hypervisor says the device advertises it, as the guest probed it and as it is now (model/blame.py),
and QEMU's answer mapped from the QOM properties read on QEMU 7.2 here (model/advertised.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from model.advertised import Advertised, QomValue, advertised_from_qom, qom_reads
from model.blame import Blame, Trail, disk_trails
from model.device_limits import ConfiguredLimits, DepthLimit, GuestLimits, parse_guest_limits
from model.rules import blame
from model.rules.alignment import count_boundary_crossings, judge_alignment
from model.rules.limits import judge_limits
from model.rules.queue_depth import DepthPoint, DeviceSaid, GuestPath, judge_queue_depth

DATA = Path(__file__).resolve().parents[1] / "data" / "guest"
#: What the suite asks of a virtio-scsi disk (hypervisors/libvirt/controllers.py CONTROLLERS).
ASKED = ConfiguredLimits(queue_depth=128, write_cache=True, discard=True, queues=2)
HBA = "/machine/peripheral/ua-vioc-virtio-scsi"
DISK = "/machine/peripheral/ua-vioc-dut00"
#: QEMU 7.2's answers for the virtio-scsi disk under test (qom-get, measured here); cmd_per_lun
#: as a wrapper's -global virtio-scsi-pci.cmd_per_lun=1 leaves it
QEMU_72: dict[tuple[str, str], QomValue] = {(f"{HBA}/virtio-backend", "cmd_per_lun"): 128, (f"{HBA}/virtio-backend", "num_queues"): 2,
           (f"{HBA}/virtio-backend", "max_sectors"): 65535, (f"{HBA}/virtio-backend", "virtqueue_size"): 256,
           (f"{HBA}/virtio-backend", "seg_max_adjust"): True, (DISK, "logical_block_size"): 512,
           (DISK, "physical_block_size"): 512, (DISK, "opt_io_size"): 0, (DISK, "write-cache"): "auto",
           (DISK, "max_io_size"): 2147483647}


def scsi_guest(**changed: Any) -> GuestLimits:
    """virtio-scsi's disk as the embedded guest probed it (recorded), with ``changed`` settings."""
    return dataclasses.replace(parse_guest_limits((DATA / "limits-virtio-scsi.txt").read_text()), **changed)


def advertised(**qom: QomValue) -> Advertised:
    answers = {**QEMU_72, **{(f"{HBA}/virtio-backend", k): v for k, v in qom.items()}}
    return advertised_from_qom(qom_reads("virtio-scsi", DISK, HBA), answers, "QEMU 7.2.22, QMP qom-get",
                               writeback=True)


def test_qemus_answer_maps_to_what_the_device_advertises() -> None:
    adv = advertised(cmd_per_lun=1)
    assert (adv.queue_depth, adv.queues, adv.max_transfer_bytes) == (1, 2, 65535 * 512)
    assert (adv.logical_block_bytes, adv.physical_block_bytes, adv.optimal_io_bytes) == (512, 512, 0)
    assert adv.write_cache is True and adv.discard is None  # scsi-hd has no discard property: not said
    assert adv.said_by["queue_depth"] == f"cmd_per_lun 1 of {HBA}/virtio-backend"
    assert "auto: the block backend's write cache" in adv.said_by["write_cache"]
    record = adv.record()
    assert record["advertised.queue_depth"] == "1" and record["advertised.discard"] == "not said"
    assert record["device.ua-vioc-virtio-scsi/virtio-backend.cmd_per_lun"] == "1"


def test_a_property_an_older_qemu_does_not_know_is_a_note_not_an_error() -> None:
    reads = qom_reads("virtio-scsi", DISK, HBA)
    missing = (f"{HBA}/virtio-backend", "seg_max_adjust")
    adv = advertised_from_qom(reads, {k: v for k, v in QEMU_72.items() if k != missing}, "QEMU 2.12", [missing])
    assert adv.queue_depth == 128
    assert adv.notes == (f"QEMU has no property seg_max_adjust on {HBA}/virtio-backend (an older QEMU?): not read",)
    assert adv.write_cache is None  # write-cache=auto and no query-block answer: not said
    assert adv.record()["device.ua-vioc-virtio-scsi/virtio-backend.seg_max_adjust"] == "unknown to this hypervisor"


def test_nvme_says_its_transfer_and_logical_block_and_records_the_rest() -> None:
    reads = qom_reads("nvme", DISK)
    answers: dict[tuple[str, str], QomValue] = {(DISK, "mdts"): 7, (DISK, "max_ioqpairs"): 64, (DISK, "logical_block_size"): 512,
               (DISK, "physical_block_size"): 4096, (DISK, "opt_io_size"): 65536, (DISK, "write-cache"): "auto"}
    adv = advertised_from_qom(reads, answers, "QEMU 7.2.22, QMP qom-get", writeback=True)
    assert adv.max_transfer_bytes == 512 * 1024 and adv.logical_block_bytes == 512
    # QEMU 7.2's NVMe does not pass physical_block_size on (the guest sees 512): never "advertised 4096"
    assert adv.physical_block_bytes is None and "by its own rules" in adv.why_not_said("physical_block_bytes")
    assert adv.optimal_io_bytes is None and adv.write_cache is None


def trails(asked: ConfiguredLimits = ASKED, adv: Advertised | None = None, probed: GuestLimits | None = None,
           now: GuestLimits | None = None) -> list[Trail]:
    p = probed or scsi_guest()
    return disk_trails("dut disk sda", asked, adv if adv is not None else advertised(), p, now or p)


def test_a_device_advertising_less_than_asked_is_the_hypervisors() -> None:
    b = blame("queue-depth", trails(adv=advertised(cmd_per_lun=1), probed=scsi_guest(scsi_queue_depth=1)))
    assert b.layer == "hypervisor"
    assert b.reason == (f"dut disk sda: the device advertises queue depth 1 (cmd_per_lun 1 of {HBA}/virtio-backend) "
                        "where the suite asked for 128")


def test_a_guest_seeing_other_than_the_device_advertised_is_the_drivers() -> None:
    b = blame("queue-depth", trails(probed=scsi_guest(scsi_queue_depth=64)))
    assert b.layer == "guest driver" and "advertises queue depth 128 as asked" in b.reason
    assert "the guest's driver set 64 when it probed the disk" in b.reason


def test_a_setting_changed_after_boot_is_the_guest_configuration() -> None:
    # --guest-setup 'echo 1 > /sys/block/{disk}/device/queue_depth': probed 128, now 1
    b = blame("queue-depth", trails(now=scsi_guest(scsi_queue_depth=1)))
    assert b == Blame("guest configuration", "dut disk sda: queue depth was 128 when the guest probed the disk and "
                      "is 1 now: changed after boot (a fault, a --guest-setup command or the image's own tuning)")
    # nr_requests is the guest's alone: changed after boot, it is the configuration too
    assert blame("queue-depth", trails(now=scsi_guest(nr_requests=8))).layer == "guest configuration"


def test_a_hypervisor_that_did_not_say_is_never_blamed() -> None:
    b = blame("queue-depth", trails(adv=Advertised(unavailable="QMP refused"), probed=scsi_guest(scsi_queue_depth=1)))
    assert b.layer == "unknown" and "the hypervisor or the guest's driver" in b.reason
    assert "the hypervisor could not be asked: QMP refused" in b.reason


def test_only_the_settings_a_rule_depends_on_are_blamed() -> None:
    odd = trails(adv=advertised(num_queues=1), now=scsi_guest(max_sectors_kb=64))
    assert blame("multi-queue", odd).layer == "hypervisor"  # queues: 1 advertised, 2 asked
    assert blame("queue-depth", odd).layer == "unknown"  # neither matters to queue depth
    assert blame("io-size", odd).layer == "guest configuration"  # io-breakup's max_sectors_kb does


def test_the_rules_own_evidence_counts_where_no_setting_differs() -> None:
    hint = Blame("guest configuration", "io.max riops=400 in cgroup /vioc caps the depth")
    assert blame("queue-depth", trails(), hint) == hint
    b = blame("queue-depth", trails())
    assert b.layer == "unknown" and "the failure is in the I/O path itself" in b.reason


def test_limits_names_the_hypervisor_from_its_own_answer_never_from_what_was_asked() -> None:
    guest = scsi_guest(scsi_queue_depth=1)
    v = judge_limits([("dut", ASKED, guest, advertised(cmd_per_lun=1))])
    assert not v.passed
    assert v.problems == ((f"dut disk sda: queue depth: the suite asked for 128, the device advertises 1 (cmd_per_lun 1 "
                          f"of {HBA}/virtio-backend), the guest sees 1 [blame: hypervisor]"),)
    assert "the hypervisor configured" not in v.explain()
    assert v.properties["dut_queue_depth_advertised"] == "1" and v.properties["dut_queue_depth_configured"] == "128"
    # the device advertises 128 as asked, the guest sees 1: the guest's driver
    v = judge_limits([("dut", ASKED, guest, advertised())])
    assert v.problems[0].endswith(f"the device advertises 128 as asked (cmd_per_lun 128 of {HBA}/virtio-backend), "
                                  "the guest's driver sees 1 [blame: guest driver]")
    # the limits rule judges the probe-time view: a setting changed after boot does not fail it
    assert judge_limits([("dut", ASKED, scsi_guest(), advertised())]).passed


def point(depth: int, host: float, aqu: float) -> DepthPoint:
    return DepthPoint(depth, 150.0 * host, str(depth), aqu, aqu, host, host, host, "exact", guest_cpu_busy_pct=60)


def test_a_depth_the_driver_took_from_the_device_is_not_the_guest_configuration() -> None:
    """cmd_per_lun 1: the driver set queue_depth 1 from it. Before the hypervisor was asked, the rule
    blamed "the guest's configuration" for a queue_depth of 1 under the asked 128."""
    path = GuestPath((DepthLimit("/sys/block/sda/device/queue_depth", 1, 1),))
    pts = [point(1, 0.9, 0.9), point(32, 1.0, 30.0)]
    said = DeviceSaid(1, f"cmd_per_lun 1 of {HBA}/virtio-backend")
    v = judge_queue_depth(pts, 128, guest_path=path, advertised=said)
    assert not v.passed and v.hint is None, v.explain()
    assert not any("guest's configuration" in p for p in v.problems), v.problems
    assert v.lines[0] == f"device queue depth: 128; the device advertises 1 where 128 was asked (cmd_per_lun 1 of " \
                         f"{HBA}/virtio-backend)"
    assert v.properties["device_queue_depth_advertised"] == 1
    # the same limit lowered after boot (the driver set 128) is the guest's configuration, and the verdict says so
    lowered = GuestPath((DepthLimit("/sys/block/sda/device/queue_depth", 1, 128),))
    v = judge_queue_depth(pts, 128, guest_path=lowered, advertised=DeviceSaid(128, "cmd_per_lun 128"))
    assert v.hint is not None and v.hint.layer == "guest configuration"


def test_a_partition_off_the_devices_grid_is_the_guest_configuration() -> None:
    """--inject misaligned: no sysfs setting differs; the rule's own evidence (the partition start) names the layer."""
    writes = [(63 * 512 + k * 4096, 4096) for k in range(400)]
    v = judge_alignment(count_boundary_crossings(writes, 4096, 65536), 63 * 512, "w", "exact")
    assert not v.passed and v.hint is not None
    b = blame("alignment", trails(), v.hint)
    assert b == Blame("guest configuration", "the partition starts at 32256 bytes, not a multiple of the device's "
                                             "optimal I/O size")
