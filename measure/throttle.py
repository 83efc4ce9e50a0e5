"""One phase of the throttle rule: the disk's I/O limits set at the host (or left as they are), read
back, then one measured window of the rule's workload from both sides (measure/window.py).

fio's own error while the limit holds (a guest that times its requests out and fails them) is the
rule's evidence, not a harness error: it is returned as ``fio_error``, with no window.

Example::

    p = measure_phase(disk, throttle, "throttled", ThrottleLimits(iops=200), JOB, 2.0, raw)
    p.window.host.iops  # about 200
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from guest.tools.fio import FioJob
from hypervisors.base import DiskThrottle
from measure.disk import GuestDisk
from measure.window import IntervalMeasurement, measure, save_measurement
from model.errors import FioError
from model.parse.throttle_limits import ThrottleLimits

log = logging.getLogger("vioconform.measure")


@dataclass(frozen=True)
class PhaseMeasurement:
    """What one phase set (``set_to``; None: left as the disk held it), what the host then held
    (``held``, read back, ``said_by`` where), and the window (None where fio failed: ``fio_error``)."""

    name: str
    set_to: ThrottleLimits | None
    held: ThrottleLimits
    said_by: str
    window: IntervalMeasurement | None
    fio_error: str = ""


def measure_phase(disk: GuestDisk, throttle: DiskThrottle, name: str, set_to: ThrottleLimits | None, job: FioJob,
                  window_s: float, raw_dir: Path) -> PhaseMeasurement:
    """Set ``set_to`` on the disk (None: keep what it holds), read the limits back and measure ``job``
    over a ``window_s`` window; the raw files go to ``raw_dir/name``."""
    if set_to is not None:
        throttle.set(set_to)
    held = throttle.held()
    log.info("%s: throttle phase %s, the host holds %s", disk.config_id, name, held.describe())
    raw = raw_dir / name
    try:
        m = measure(disk, job, window_s, raw_dir=raw, exact=False)
    except FioError as e:
        return PhaseMeasurement(name, set_to, held, throttle.said_by, None, e.said or str(e))
    save_measurement(m, raw / f"throttle-{name}.json")
    return PhaseMeasurement(name, set_to, held, throttle.said_by, m)
