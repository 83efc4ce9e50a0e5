"""Rule 2, I/O-size fidelity (the VxFS-on-Solaris-9 breakup case): the verdict arithmetic.

Requests of size S issued with O_DIRECT must reach the host as S, or be split only down to
the maximum transfer the device advertises. The split factor is host requests per guest I/O:
1 when S fits, ceil(S / max transfer) when it does not. A guest that caps its requests below
the device's limit (``max_sectors_kb``) multiplies it.

Example::

    v = judge_io_size(IoSizeMeasurement(1 << 20, 1 << 20, host_request_bytes=65536, ...))
    v.passed  # False: split 16x where the device allows 1 MiB in one request
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from model.rules.figures import Pair, pair_figure
from model.rules.verdict import Number, RuleVerdict, kib

RULE = "io-size"

#: Request size of the workload: 1 MiB, the size of the issue's case (a large sequential
#: copy), below every healthy maximum transfer of the virtio devices (1280 KiB in the Debian
#: 6.1 guest) and above the 128 KiB of MegaRAID and AHCI, where a split of 8 is expected.
REQUEST_BYTES = 1 << 20

#: Highest split factor accepted, as a multiple of the expected one. Measured here (QEMU 7.2,
#: TCG, 5 ms null-co disk, fio 1 MiB libaio reads at depth 4): every traced host request was
#: exactly 1 MiB (split 1.00 on virtio-scsi and virtio-blk, 700-760 requests a window);
#: with io-breakup (max_sectors_kb=64) every request was 64 KiB (split 16.0). 1.25 leaves
#: room for a stray request at the window's edges and is 12x below the fault.
MAX_SPLIT_OVER_EXPECTED = 1.25


@dataclass(frozen=True)
class IoSizeMeasurement:
    """Both sides of one O_DIRECT workload of ``request_bytes`` requests.

    ``max_transfer_bytes``: what the device advertises (the hypervisor's configured value,
    else the guest's as-probed max_sectors_kb). ``host_request_bytes``: the mean size of the
    host's requests in the window; ``host_request_bytes_p50`` the traced median where exact.
    """

    request_bytes: int
    max_transfer_bytes: int
    max_transfer_source: str
    host_request_bytes: float
    host_requests: int
    guest_max_sectors_kb: int
    guest_max_hw_sectors_kb: int
    host_source: str
    fio_iops: float = 0.0
    host_request_bytes_p50: float | None = None

    @property
    def expected_request_bytes(self) -> int:
        return min(self.request_bytes, self.max_transfer_bytes)

    @property
    def expected_split(self) -> int:
        return math.ceil(self.request_bytes / self.expected_request_bytes)

    @property
    def split_factor(self) -> float:
        """Host requests per guest I/O: S over the mean host request size."""
        return self.request_bytes / self.host_request_bytes if self.host_request_bytes else math.inf


def judge_io_size(m: IoSizeMeasurement) -> RuleVerdict:
    """Pass if the host saw requests as large as the device allows."""
    problems: list[str] = []
    lines = [
        (f"workload: {kib(m.request_bytes)} O_DIRECT reads; device maximum transfer {kib(m.max_transfer_bytes)} "
         f"({m.max_transfer_source}); guest max_sectors_kb {m.guest_max_sectors_kb}, "
         f"max_hw_sectors_kb {m.guest_max_hw_sectors_kb}"),
        f"host: {m.host_requests} requests, mean {kib(m.host_request_bytes)}"
        + (f", median {kib(m.host_request_bytes_p50)}" if m.host_request_bytes_p50 is not None else "")
        + f" ({m.host_source}); split factor {m.split_factor:.2f} (expected {m.expected_split})",
    ]
    if m.host_requests == 0:
        problems.append("the host saw no requests in the window: the workload did not reach this disk")
    elif m.split_factor > MAX_SPLIT_OVER_EXPECTED * m.expected_split:
        cause = (f" The guest caps requests at max_sectors_kb={m.guest_max_sectors_kb}, below the device's "
                 f"{kib(m.max_transfer_bytes)}." if m.guest_max_sectors_kb * 1024 < m.expected_request_bytes else "")
        problems.append(
            f"each {kib(m.request_bytes)} I/O reached the host as {m.split_factor:.1f} requests of "
            f"{kib(m.host_request_bytes)}; expected at most {MAX_SPLIT_OVER_EXPECTED} x {m.expected_split} "
            f"request(s) of {kib(m.expected_request_bytes)}.{cause}")
    props: dict[str, Number] = {
        "request_bytes": m.request_bytes, "max_transfer_bytes": m.max_transfer_bytes,
        "max_transfer_source": m.max_transfer_source, "host_request_bytes_mean": round(m.host_request_bytes),
        "host_requests": m.host_requests, "split_factor": round(m.split_factor, 3),
        "expected_split": m.expected_split, "expected_request_bytes": m.expected_request_bytes,
        "guest_max_sectors_kb": m.guest_max_sectors_kb, "guest_max_hw_sectors_kb": m.guest_max_hw_sectors_kb,
        "host_source": m.host_source, "fio_iops": round(m.fio_iops, 1)}
    if m.host_request_bytes_p50 is not None:
        props["host_request_bytes_p50"] = round(m.host_request_bytes_p50)
    figures = pair_figure(Pair("request size: expected / host", m.expected_request_bytes / 1024,
                               m.host_request_bytes / 1024, "KiB"))
    return RuleVerdict(RULE, tuple(lines), tuple(problems), (), props, figures)
