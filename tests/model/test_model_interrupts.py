"""/proc/interrupts per request queue across kernels: recorded in the embedded guest (6.1) with
virtio-scsi, virtio-blk, NVMe, AHCI and MPT SAS disks, and synthetic lines in the formats of other
kernels (the chip column and the queue names are what differ)."""

from __future__ import annotations

from pathlib import Path

import pytest

from model.parse.proc_interrupts import parse_queue_interrupts

DATA = Path(__file__).resolve().parents[1] / "data" / "guest"


def test_recorded_guest_with_five_controllers() -> None:
    text = (DATA / "proc-interrupts-5-controllers.txt").read_text()
    assert parse_queue_interrupts(text, "virtio1") == {0: 16, 1: 276}  # virtio-scsi: "virtio1-request" twice
    assert parse_queue_interrupts(text, "virtio2") == {0: 1, 1: 7}  # virtio-blk: req.0, req.1
    assert parse_queue_interrupts(text, "virtio0") == {}  # the network device has no request queues
    assert parse_queue_interrupts(text, "nvme0") == {}  # NVMe's queues are nvme0qN: not virtio


@pytest.mark.parametrize("line", [
    " 26:        10         20   PCI-MSI 311298-edge      virtio2-req.0",  # 4.18 (RHEL 8) to 6.1
    " 26:        10         20   IR-PCI-MSI 311298-edge      virtio2-req.0",  # with an IOMMU's remapping
    " 26:        10         20  PCI-MSIX-0000:00:13.0   1-edge      virtio2-req.0",  # per-device MSI domains
    " 26:        10         20   PCI-MSI-edge      virtio2-requests",  # single-queue virtio-blk, older kernels
])
def test_other_kernels_formats(line: str) -> None:
    assert parse_queue_interrupts(line, "virtio2") == {0: 30}


def test_queues_sharing_one_vector_have_no_per_queue_count() -> None:
    assert parse_queue_interrupts(" 11:   500   20   IO-APIC   11-fasteoi   virtio2-virtqueues\n", "virtio2") == {}
