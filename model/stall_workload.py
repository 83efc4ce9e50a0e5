"""The storage stall the stall-tolerance rule measures (docs/rules/stall-tolerance.md): fio's workload
on the held disk, the pace of the guest's probes and the bounds on each step, shared by the run's
measurement (measure/stall_tolerance.py) and the reproducer's replay (replay/rules/stall_tolerance.py).
"""

from __future__ import annotations

from model.parse.throttle_limits import NO_LIMITS

#: The hold: QEMU's throttle at 1 byte/s in all, the smallest limit QEMU takes. Its leaky bucket starts
#: empty, so the first request after it may pass (0 did here); the next waits its size in seconds.
HOLD_LIMITS: dict[str, object] = {**NO_LIMITS, "bps": 1}

#: Requests fio keeps queued: 8, which every controller's queue takes but IDE's (one at a time,
#: where the other 7 wait in the guest's block layer and the one at the device is held).
STALL_DEPTH = 8
#: fio's region: random 4 KiB reads and writes over the first 64 MiB of the scratch disk.
REGION_BYTES = 64 << 20
#: Seconds between the guest's probes while the disk is held: each is one SSH command in the run
#: (20-725 ms under TCG here, on a loaded host), so a 2 s hold gets 4-6 answers; the replay's go over
#: the guest's console at the same pace.
PROBE_PERIOD_S = 0.3
#: After the hold is in place, before the host's counters are read: a request the backing file had
#: taken before the hold completes within it (the file's service time, milliseconds), and counts
#: as before the hold.
HOLD_SETTLE_S = 0.2
#: How long QEMU's monitor may take to answer the release: it answers in milliseconds (QMP round
#: trips of 5-50 ms on this loaded host); 20 s of silence is a QEMU stuck on the held requests.
RELEASE_ANSWER_S = 20.0
#: After the release, how long fio may take to end (its held requests complete, then SIGINT): 0.3-0.5 s
#: here for a hold under the guest's timeout; 20 s is beyond a loaded host's worst by far. A hold as
#: long as the timeout or longer adds the guest's error handling: two of its timeouts (the abort, and
#: the retried command's own).
DRAIN_S = 20.0


def drain_bound_s(hold_s: float, timeout_s: float | None) -> float:
    """How long after the release fio's held requests may take before the guest counts as hung."""
    if timeout_s is None or hold_s < timeout_s:
        return DRAIN_S
    return DRAIN_S + 2 * timeout_s
