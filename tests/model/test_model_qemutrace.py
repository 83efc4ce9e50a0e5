"""QEMU log-backend traces: real SeaBIOS boot reads (QEMU 7.2) and synthetic traces with queueing."""

from __future__ import annotations

from pathlib import Path

import pytest

from model.errors import ParseError
from model.parse.histogram import HistogramKind
from model.parse.qemutrace import TracedRequest, histograms_from_requests, parse_qemu_trace

DATA = Path(__file__).resolve().parents[1] / "data"
T0 = 1_700_000_000_000_000


def trace(name: str) -> list[TracedRequest]:
    return parse_qemu_trace((DATA / name).read_text(), source=name)


@pytest.mark.parametrize("controller", ["virtio-blk", "virtio-scsi", "nvme"])
def test_real_seabios_boot_read(controller: str) -> None:
    # SeaBIOS reads the 512-byte boot sector once; SCSI's INQUIRY etc. and NVMe admin commands are left out
    (req,) = trace(f"qemu-trace-seabios-{controller}.log")
    assert (req.is_write, req.is_flush, req.offset_lbn, req.length_bytes) == (False, False, 0, 512)
    assert req.outstanding_at_issue == 1
    assert 200 <= req.latency_us < 100_000  # the null-co disk has a 200 us service time


def test_virtio_blk_pairs_by_request_pointer() -> None:
    reqs = trace("qemu-trace-synthetic-virtio-blk.log")
    # the unmatched completion (a flush: no start event in QEMU 7.2) and the request in flight at the end are dropped
    assert [(r.start_us - T0, r.latency_us, r.is_write, r.offset_lbn, r.length_bytes, r.outstanding_at_issue)
            for r in reqs] == [(100, 5000, False, 0, 4096, 1), (110, 5190, False, 8, 4096, 2),
                               (120, 6000, True, 2048, 131072, 3), (5200, 5000, False, 16, 4096, 3)]


def test_scsi_pairs_by_tag_and_reads_opcodes() -> None:
    reqs = trace("qemu-trace-synthetic-scsi.log")
    assert [(r.is_write, r.is_flush, r.offset_lbn, r.length_bytes, r.outstanding_at_issue) for r in reqs] == [
        (False, False, 1000, 65536, 1), (True, False, 5000, 4096, 2), (False, False, 1128, 8192, 3),
        (False, True, 0, 0, 3)]
    assert [r.latency_us for r in reqs] == [3000, 1990, 3080, 1100]
    text = (DATA / "qemu-trace-synthetic-scsi.log").read_text()
    assert parse_qemu_trace(text, scsi_block_bytes=4096)[0].offset_lbn == 8000  # LBAs of 4 KiB = 8 LBNs


def test_nvme_pairs_by_queue_and_cid() -> None:
    # cid 5 is in flight on queues 1 and 2 at once; lba is in 4 KiB blocks (count / nlb)
    reqs = trace("qemu-trace-synthetic-nvme.log")
    assert [(r.latency_us, r.is_write, r.is_flush, r.offset_lbn, r.length_bytes, r.outstanding_at_issue)
            for r in reqs] == [(1000, False, False, 128, 8192, 1), (700, True, False, 2048, 4096, 2),
                               (900, False, True, 0, 0, 3)]


def test_ahci_ncq_pairs_by_hba_port_and_tag() -> None:
    # QEMU 7.2's format: "ahci(%p)[port][tag:N]: NCQ op 0x%02x on sectors [first,last]" (inclusive)
    ahci = "ahci(0x55e1019)"
    text = "\n".join([
        f"1@100.000100:process_ncq_command {ahci}[0][tag:3]: NCQ op 0x60 on sectors [2048,2055]",
        f"1@100.000200:process_ncq_command {ahci}[1][tag:3]: NCQ op 0x61 on sectors [63,70]",  # same tag, port 1
        f"1@100.000300:process_ncq_command {ahci}[0][tag:4]: NCQ op 0x64 on sectors [0,0]",  # SEND FPDMA (TRIM)
        f"1@100.005100:ncq_finish {ahci}[0][tag:3]: NCQ transfer finished",
        f"1@100.005300:ncq_finish {ahci}[1][tag:3]: NCQ transfer finished",
        f"1@100.005400:ncq_finish {ahci}[0][tag:9]: NCQ transfer finished",  # begun before the trace
    ]) + "\n"
    reqs = parse_qemu_trace(text)
    assert [(r.latency_us, r.is_write, r.offset_lbn, r.length_bytes, r.outstanding_at_issue) for r in reqs] == [
        (5000, False, 2048, 4096, 1), (5100, True, 63, 4096, 2)]
    with pytest.raises(ParseError, match=r"line 1: process_ncq_command arguments .* not in QEMU 7\.2's format"):
        parse_qemu_trace("1@1.000001:process_ncq_command ahci(0x1)[0][tag:1]: NCQ op on sectors\n")


def test_timestamp_forms() -> None:
    line = "virtio_blk_handle_read vdev 0x1 req 0x2 sector 8 nsectors 1"
    done = "virtio_blk_req_complete vdev 0x1 req 0x2 status 0"
    iso = f"2023-11-14T22:13:20.000100Z {line}\n2023-11-14T22:13:20.000350Z {done}\n"
    (req,) = parse_qemu_trace(iso)
    assert (req.start_us, req.latency_us, req.offset_lbn) == (T0 + 100, 250, 8)
    both = f"2023-11-14T22:13:21.000000Z 77@1700000000.000100:{line}\n77@1700000000.000400:{done}\n"
    assert parse_qemu_trace(both)[0].latency_us == 300  # PID@SEC.USEC wins over the message prefix
    with pytest.raises(ParseError, match=r"t.log line 1: trace line has no timestamp; run QEMU with -msg timestamp=on"):
        parse_qemu_trace(f"{line}\n", source="t.log")


def test_malformed_event_is_an_error() -> None:
    with pytest.raises(ParseError, match=r"line 2: no 'tag' argument.*7\.2"):
        parse_qemu_trace("unrelated_event foo 1\n1@1.000001:scsi_req_dequeue target 0 lun 0\n")
    with pytest.raises(ParseError, match=r"line 1: sector='x' is not a number"):
        parse_qemu_trace("1@1.000001:virtio_blk_handle_read vdev 0x1 req 0x2 sector x nsectors 1\n")


def test_histograms_from_virtio_blk_trace() -> None:
    hs = histograms_from_requests(trace("qemu-trace-synthetic-virtio-blk.log"))
    oio = hs.get(HistogramKind.OUTSTANDING_IOS)
    assert oio.counts[:3] == (1, 1, 2) and oio.count == 4 and oio.max == 3
    read_oio = hs.get(HistogramKind.OUTSTANDING_IOS, "read")  # only reads in flight count
    assert (read_oio.min, read_oio.max, read_oio.count) == (1, 2, 3)
    seek = hs.get(HistogramKind.SEEK_DISTANCE)
    assert (seek.count, seek.min, seek.max) == (3, -2287, 2033)
    read_seek = hs.get(HistogramKind.SEEK_DISTANCE, "read")
    assert (read_seek.min, read_seek.max) == (1, 1)  # sequential reads are +1, as in vscsiStats
    assert hs.get(HistogramKind.IO_LENGTH, "write").max == 131072
    assert hs.get(HistogramKind.LATENCY_US).percentile(100) == 15000
    inter = hs.get(HistogramKind.INTERARRIVAL_US)
    assert (inter.count, inter.min, inter.max) == (3, 10, 5080)
    assert hs.get(HistogramKind.SEEK_DISTANCE_PREV16).min == 1


def test_flushes_count_in_depth_but_not_in_lengths() -> None:
    hs = histograms_from_requests(trace("qemu-trace-synthetic-scsi.log"))
    assert hs.get(HistogramKind.OUTSTANDING_IOS).count == 4
    assert hs.get(HistogramKind.IO_LENGTH).count == 3
    assert hs.get(HistogramKind.SEEK_DISTANCE, "read").min == 1  # 1128 follows 1000 + 128 blocks
    assert hs.get(HistogramKind.LATENCY_US, "write").count == 1


def test_empty_trace_gives_empty_histograms() -> None:
    hs = histograms_from_requests([])
    assert hs.get(HistogramKind.OUTSTANDING_IOS).count == 0
