"""A busy host is not a slower guest: which numbers follow the host CPU, and when not to judge them.

The numbers that follow the host CPU the guest gets (:data:`HOST_CPU_BOUND`: IOPS, latencies, the
depths the guest keeps up, IOPS scaling) move with the host's other work, most under QEMU's TCG,
where every guest instruction is emulated on a host thread. So each run records how long its
guest's vCPUs waited for a host CPU in its most contended window (:data:`WAIT_PROPERTY`,
model/parse/hostcpu.py). A comparison across runs (``python -m reports.compare`` and
``--baseline``, model/rules/against_baseline.py) judges such a number only when neither run's vCPUs
waited more than :data:`WAIT_MAX_PCT`; otherwise its move is reported with both runs' waits
(:func:`busy_host` says why), never as a regression. A run that did not record the figure (an
older run, vSphere) is no evidence: what the other run recorded decides. ``compare`` has whole
runs: a rule that records no wait of its own (buffered-direct, stall-tolerance) is judged by the
run's other rules on the same configuration (model/across/moves.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

#: Most a run's vCPUs may have waited for a host CPU (% of its most contended window, per vCPU)
#: for its host-CPU-bound numbers to be judged against another run's. Measured with the
#: queue-depth rule on virtio-blk and virtio-scsi (2 cores, TCG): on an idle host the guest's own
#: QEMU threads make its vCPU wait 6.0-6.7 %; with the host lightly busy (load 1.3-2) 7.4-9.3 %,
#: and ``qd32_iops`` stayed within 4.7 % (4844-5071 IO/s, inside its 7.8 % minimum effect). From
#: 11 % up it fell: 4707 IO/s at 11.2 %, 4347 at 15.2 %, 3841-3997 at 21-22 % (one to three busy
#: loops beside the guest), moves of 7-24 % that a comparison would call a regression.
WAIT_MAX_PCT = 10.0
#: The numbers that follow the host CPU the guest gets: rates, latencies, the depths the guest
#: keeps up and the scaling of IOPS with depth (names as model/across/metrics.py knows them).
HOST_CPU_BOUND = re.compile(r"(qd\d+_|fio_)iops|iops_scaling|latency_[a-z]+_[a-z0-9]+_us"
                            r"|[a-z0-9_]*(depth|aqu_sz|inflight)[a-z0-9_]*"
                            # stall-tolerance: SSH answers while the disk is held, and the held requests'
                            # slowest (the hold, plus the guest's own completion work)
                            r"|hold_probe_rtt_max_ms|guest_max_latency_ms")
#: The property each run records its vCPUs' wait under (suites/assertions.py).
WAIT_PROPERTY = "host_vcpu_wait_pct"


def busy_host(waits: Mapping[str, Sequence[float]], wait_max_pct: float = WAIT_MAX_PCT) -> str:
    """Why host-CPU-bound numbers cannot be judged ("": they can): ``waits`` holds, per run (by the
    name a reader knows it by: "this run", "run 7"), its recorded :data:`WAIT_PROPERTY` samples; a run
    with none is no evidence. The sentence names every run's highest wait."""
    worst = {who: max(values) for who, values in waits.items() if values}
    if not any(w > wait_max_pct for w in worst.values()):
        return ""
    said = " and ".join(f"{w:g} % in {who}" for who, w in worst.items())
    return (f"the host held the guest's vCPUs back: they waited for a host CPU {said} of a window (above "
            f"{wait_max_pct:g} %, the numbers that follow the host's free CPU are not the guest's to answer for)")
