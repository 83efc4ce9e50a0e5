"""The host CPU each test's guest got over its measured windows (model/parse/hostcpu.py).

Every measured window (measure/window.py) and every whole counted run (measure/counted.py) reads
the guest's vCPU times on the host at its two ends and notes the shares here, under the test that
runs (measure/phase_times.py's current test). A test's figure is its most contended window: the one
whose vCPUs waited longest for a host CPU. suites/assertions.py records it with the test's numbers
(``host_vcpu_wait_pct``, ``host_vcpu_run_pct``), so that every stored run carries the evidence a
later ``--baseline`` comparison needs.
"""

from __future__ import annotations

import logging
import threading

from measure import phase_times
from model.parse.hostcpu import HostCpuShare, VcpuTimes

log = logging.getLogger("vioconform.measure")

_lock = threading.Lock()
_worst: dict[str, HostCpuShare] = {}


def note(first: VcpuTimes | None, last: VcpuTimes | None, what: str) -> HostCpuShare | None:
    """The shares between two reads (None where either is unknown), kept for the current test
    if they are its most contended so far."""
    share = HostCpuShare.between(first, last) if first is not None and last is not None else None
    if share is None:
        return None
    log.debug("%s: the guest's vCPUs ran %.0f %% and waited for a host CPU %.0f %% of the window", what,
              share.run_pct, share.wait_pct)
    test = phase_times.current_test()
    with _lock:
        old = _worst.get(test)
        if old is None or share.wait_pct > old.wait_pct:
            _worst[test] = share
    return share


def wait_pct(first: VcpuTimes | None, last: VcpuTimes | None, what: str) -> float | None:
    """How long the vCPUs waited for a host CPU between two reads, in % per vCPU (None: unknown), noted
    as :func:`note` does: a bounded interval's figure (model/judging/host_busy.py)."""
    share = note(first, last, what)
    return None if share is None else share.wait_pct


def wait_unnoted(first: VcpuTimes | None, last: VcpuTimes | None) -> float | None:
    """How long the vCPUs waited for a host CPU between two reads, in % per vCPU (None: unknown), not
    noted for the test: a harness step's figure (fio's stop), not one of its measured windows."""
    share = HostCpuShare.between(first, last) if first is not None and last is not None else None
    return None if share is None else share.wait_pct


def take(test: str) -> HostCpuShare | None:
    """``test``'s most contended window, or None when no window of it had the figures; forgotten
    here once taken (a test concludes once), so a long run keeps no figure of its finished tests."""
    with _lock:
        return _worst.pop(test, None)
