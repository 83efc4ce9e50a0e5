"""The QEMU trace parser on traces recorded from the embedded guest (QEMU 7.2, fio randrw 8 KiB, depth 4).

Recorded with the suite's own tracer (events on for 0.25 s mid-run), so the first requests'
starts and the last ones' completions fall outside the window and are dropped.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from model.histogram import HistogramKind
from model.qemutrace import histograms_from_requests, parse_qemu_trace

DATA = Path(__file__).resolve().parent.parent / "data"


@pytest.mark.parametrize("family", ["scsi", "virtio-blk"])
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
