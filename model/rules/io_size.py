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
from collections.abc import Mapping
from dataclasses import dataclass

from model.blame import BlameSettings
from model.judging.figures import Pair, Threshold, pair_figure
from model.judging.spec import HIGHER, LOWER, PARAM, Metrics, MetricSpec
from model.judging.verdict import Number, RuleVerdict, kib

RULE = "io-size"
#: Requests in flight: enough to keep a latency disk busy, few enough that a 1 MiB request
#: never waits for a tag on any controller; the run's and the replay's.
DEPTH = 4
#: The settings (model/blame.py's trail keys) the rule's verdict depends on.
BLAME = BlameSettings(frozenset({"max_hw_sectors_kb", "max_sectors_kb"}))
#: Repeats without --repeats.
DEFAULT_REPEATS = 1
REPEATABLE = True
#: Which of its metrics follow the host CPU the guest gets (model/across/contention.py).
HOST_CPU_BOUND: tuple[str, ...] = ("fio_iops",)

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

#: The smallest piece of a buffer that is sure to be physically contiguous: one x86 page. A
#: request carries at most ``max_segments`` scatter-gather entries, and the block layer merges
#: only physically adjacent pages into one; so a buffer whose pages are scattered is split
#: where the entries run out. Seen on the project's cloud-init test image (Debian 12, systemd,
#: virtio-scsi, max_segments 254, so 1016 KiB of scattered pages): 5 host requests per 4 I/Os
#: of 1 MiB, split 1.25, while the embedded initramfs guest, with fresh unfragmented memory,
#: gives 1.00. Fragmentation is the guest's memory state, not a fault: the bound allows it.
PAGE_BYTES = 4096

#: What the rule records (model/judging/spec.py): bigger requests at the host (fewer splits) are better;
#: the expected and allowed split, the request sizes asked for and the guest's limits are parameters.
#: The suite adds the guest's mean request size over the window.
METRICS: Metrics = (
    (r"allowed_split|expected_split", MetricSpec("x", PARAM)),
    (r"expected_request_bytes", MetricSpec("bytes", PARAM)),
    (r"split_factor", MetricSpec("x", LOWER)),
    (r"host_request_bytes_(mean|p50)|guest_avg_request_bytes", MetricSpec("bytes", HIGHER)),
    (r"fio_iops", MetricSpec("IO/s", HIGHER)),
    (r"request_bytes|max_transfer_bytes", MetricSpec("bytes", PARAM)),
    (r"guest_max_(sectors_kb|hw_sectors_kb)", MetricSpec("KiB", PARAM)),
    (r"guest_max_segments", MetricSpec("segments", PARAM)),
)

#: compare's minimum effect per metric (model/across/moves.py's MIN_EFFECTS says how each is derived from
#: run-to-run noise). Each comment: the CV and the widest change between two healthy runs with 3 s / 2 s
#: windows, and the configuration each came from. Request sizes and the split never moved: the 2 % floor.
MIN_EFFECTS: Mapping[str, float] = {
    "fio_iops": 0.082,  # CV 1.92 % / 0.86 %, widest 5.6 % / 3.2 % (virtio-blk / virtio-blk)
    "guest_avg_request_bytes": 0.020,  # CV 0.00 % / 0.02 %, widest 0.0 % / 0.1 % (virtio-blk / virtio-blk)
    "host_request_bytes_mean": 0.020,  # CV 0.00 % / 0.00 %, widest 0.0 % / 0.0 % (virtio-blk / virtio-blk)
    "host_request_bytes_p50": 0.020,  # CV 0.00 % / 0.00 %, widest 0.0 % / 0.0 % (virtio-blk / virtio-blk)
    "split_factor": 0.020,  # CV 0.00 % / 0.00 %, widest 0.0 % / 0.0 % (virtio-blk / virtio-blk)
}


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
    #: the guest's ``queue/max_segments`` (None where unknown)
    guest_max_segments: int | None = None

    @property
    def expected_request_bytes(self) -> int:
        return min(self.request_bytes, self.max_transfer_bytes)

    @property
    def expected_split(self) -> int:
        return math.ceil(self.request_bytes / self.expected_request_bytes)

    @property
    def scattered_request_bytes(self) -> int:
        """The largest request the guest is sure to build from a buffer whose pages are all
        scattered: ``max_segments`` pages (see PAGE_BYTES), capped by the expected size."""
        if not self.guest_max_segments:
            return self.expected_request_bytes
        return min(self.expected_request_bytes, self.guest_max_segments * PAGE_BYTES)

    @property
    def allowed_split(self) -> float:
        """The highest split factor that passes: MAX_SPLIT_OVER_EXPECTED over the split of
        scattered buffers (equal to the expected split where max_segments pages hold a request)."""
        return MAX_SPLIT_OVER_EXPECTED * math.ceil(self.request_bytes / self.scattered_request_bytes)

    @property
    def split_factor(self) -> float:
        """Host requests per guest I/O: S over the mean host request size."""
        return self.request_bytes / self.host_request_bytes if self.host_request_bytes else math.inf


def max_transfer(probed_max_sectors_kb: int, configured_bytes: int | None) -> tuple[int, str]:
    """What the device advertised as its maximum transfer, and where that comes from: the guest's
    ``max_sectors_kb`` as its driver set it at probe time (min(max_hw_sectors_kb, the kernel's
    1280 KiB default)), or the hypervisor's own configured limit where it sets a lower one."""
    if configured_bytes and configured_bytes < probed_max_sectors_kb * 1024:
        return configured_bytes, "the hypervisor's configured maximum transfer"
    return probed_max_sectors_kb * 1024, f"max_sectors_kb {probed_max_sectors_kb} as probed"


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
    elif m.split_factor > m.allowed_split:
        cause = (f" The guest caps requests at max_sectors_kb={m.guest_max_sectors_kb}, below the device's "
                 f"{kib(m.max_transfer_bytes)}." if m.guest_max_sectors_kb * 1024 < m.expected_request_bytes else "")
        problems.append(
            f"each {kib(m.request_bytes)} I/O reached the host as {m.split_factor:.1f} requests of "
            f"{kib(m.host_request_bytes)}; expected {m.expected_split} request(s) of "
            f"{kib(m.expected_request_bytes)}, at most {m.allowed_split:.2f} with scattered buffers "
            f"({m.guest_max_segments or 'unknown'} segments of {kib(PAGE_BYTES)}).{cause}")
    props: dict[str, Number] = {
        "request_bytes": m.request_bytes, "max_transfer_bytes": m.max_transfer_bytes,
        "max_transfer_source": m.max_transfer_source, "host_request_bytes_mean": round(m.host_request_bytes),
        "host_requests": m.host_requests, "split_factor": round(m.split_factor, 3),
        "expected_split": m.expected_split, "expected_request_bytes": m.expected_request_bytes,
        "guest_max_sectors_kb": m.guest_max_sectors_kb, "guest_max_hw_sectors_kb": m.guest_max_hw_sectors_kb,
        "guest_max_segments": m.guest_max_segments or 0, "allowed_split": round(m.allowed_split, 3),
        "host_source": m.host_source, "fio_iops": round(m.fio_iops, 1)}
    if m.host_request_bytes_p50 is not None:
        props["host_request_bytes_p50"] = round(m.host_request_bytes_p50)
    figures = pair_figure(Pair("request size: expected / host", m.expected_request_bytes / 1024,
                               m.host_request_bytes / 1024, "KiB",
                               Threshold(m.request_bytes / m.allowed_split / 1024) if m.allowed_split else None))
    return RuleVerdict(RULE, tuple(lines), tuple(problems), (), props, figures)
