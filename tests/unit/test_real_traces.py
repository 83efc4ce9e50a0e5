"""The QEMU trace parser on traces recorded from the embedded guest (QEMU 7.2, fio randrw 8 KiB, depth 4).

Recorded with the suite's own tracer (events on for 0.25 s mid-run), so the first requests'
starts and the last ones' completions fall outside the window and are dropped.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from model.parse.histogram import HistogramKind
from model.parse.qemutrace import histograms_from_requests, parse_qemu_trace

DATA = Path(__file__).resolve().parent.parent / "data"


@pytest.mark.parametrize("family", ["scsi", "virtio-blk", "ahci"])
def test_real_trace_pairs_into_depth_4_requests(family: str) -> None:
    text = (DATA / f"qemu-trace-real-{family}.log").read_text()
    reqs = parse_qemu_trace(text, source=family)
    assert 100 < len(reqs) < 200
    assert {r.length_bytes for r in reqs} == {8192}
    assert any(r.is_write for r in reqs) and any(not r.is_write for r in reqs)
    assert max(r.outstanding_at_issue for r in reqs) <= 4  # fio iodepth=4
    # 5 ms null-co latency: every request takes at least 5 ms at the device
    assert min(r.latency_us for r in reqs) >= 5000
    h = histograms_from_requests(reqs)
    depth = h.get(HistogramKind.OUTSTANDING_IOS)
    assert depth.count == len(reqs) and sum(depth.counts) == depth.count
    assert depth.percentile(50) == 4


def test_nvme_same_cid_on_two_queues_stays_two_requests() -> None:
    """Each NVMe queue has its own cids: a detail belongs to the io_cmd just before it, and a
    detail whose command was issued before the trace started adds no phantom request."""
    lines = [
        "1@100.000000:pci_nvme_read cid 7 nsid 1 nlb 8 count 4096 lba 0x0",  # command issued before the trace
        "1@100.000100:pci_nvme_io_cmd cid 7 nsid 0x1 sqid 1 opc 0x2 opname 'NVME_NVM_CMD_READ'",
        "1@100.000101:pci_nvme_read cid 7 nsid 1 nlb 8 count 4096 lba 0x100",
        "1@100.000200:pci_nvme_io_cmd cid 7 nsid 0x1 sqid 2 opc 0x2 opname 'NVME_NVM_CMD_READ'",
        "1@100.000201:pci_nvme_read cid 7 nsid 1 nlb 8 count 4096 lba 0x200",
        "1@100.005000:pci_nvme_enqueue_req_completion cid 7 cqid 1 dw0 0x0 dw1 0x0 status 0x0",
        "1@100.005100:pci_nvme_enqueue_req_completion cid 7 cqid 2 dw0 0x0 dw1 0x0 status 0x0",
        "1@100.006000:pci_nvme_io_cmd cid 7 nsid 0x1 sqid 1 opc 0x2 opname 'NVME_NVM_CMD_READ'",
        "1@100.006001:pci_nvme_read cid 7 nsid 1 nlb 8 count 4096 lba 0x400",
        "1@100.011000:pci_nvme_enqueue_req_completion cid 7 cqid 1 dw0 0x0 dw1 0x0 status 0x0",
    ]
    reqs = parse_qemu_trace("\n".join(lines), source="two queues")
    assert [r.offset_lbn for r in reqs] == [0x100, 0x200, 0x400]  # 512-byte LBAs
    assert [r.outstanding_at_issue for r in reqs] == [1, 2, 1]
