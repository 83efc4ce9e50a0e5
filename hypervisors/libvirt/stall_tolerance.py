"""A storage stall at the host, on QEMU: every request of one disk held in QEMU's block layer, and
the device model's aborts and resets watched through its trace events (the stall-tolerance rule).

The hold is QMP ``block_set_io_throttle`` on the disk's block backend with a limit of 1 byte/s
(:data:`HOLD_LIMITS`): QEMU's throttle queues every request in its own coroutine queue (the guest's
vCPUs and QEMU's main loop run on) and lets the first one through only after about an hour (a 4 KiB
request's bytes at 1 B/s). ``block_set_io_throttle`` with every limit 0 releases them at once (its
drain restarts the queue). Measured here on QEMU 7.2 under TCG, every controller (virtio-blk,
virtio-scsi, nvme, ahci, lsi53c895a, mptsas1068, megasas): 0 requests completed at the host through a
3 s hold while the guest had 8 in flight, SSH answered in 20-80 ms throughout, and every held request
completed 3.0-3.2 s after it was issued. Nothing in the domain's configuration changes: the disk's
chain stays as it is.

The release needs QEMU's monitor, and a QEMU whose main loop waits on a held request cannot answer
it: QEMU 7.2's NVMe (deleting its queues in the guest's controller reset) and AHCI (resetting the
port) cancel the guest's requests with the synchronous ``bdrv_aio_cancel``, which polls until the
held request completes, holding the big lock: the guest's vCPUs and the monitor stop with it
(measured: a 6-8 s hold against a 2 s guest timeout). The suite bounds the release and then
:meth:`ThrottleHold.give_up` destroys the domain.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import PurePath

from hypervisors.libvirt.qmp import DomainQmp
from hypervisors.libvirt.throttle import backend_entry, set_io_throttle
from hypervisors.libvirt.trace import EventLogWindow, LogFiles
from model.errors import HypervisorError
from model.parse.blockstats import HostBlockCounters
from model.parse.stall_evidence import HostEvent, parse_recovery_events
from model.parse.throttle_limits import NO_LIMITS

log = logging.getLogger("vioconform.libvirt")

#: The hold: 1 byte/s in all, the smallest limit QEMU takes. Its leaky bucket starts empty, so the
#: first request after it may pass (0 did here); the next waits its size in seconds.
HOLD_LIMITS: dict[str, object] = {**NO_LIMITS, "bps": 1}
#: query-block's limit fields: any non-zero one means the disk was throttled before the suite held it.
_LIMIT_FIELDS = tuple(NO_LIMITS)

#: QEMU 7.2's trace events that show each controller's device model aborting, cancelling or
#: resetting (model/parse/stall_evidence.py says which each is). SCSI HBAs share ``scsi_req_cancel``
#: (the SCSI layer's cancel of a queued request) and have their own reset and abort events;
#: virtio-blk has no abort, only a device reset (``virtio_set_status`` 0, as any virtio device).
RECOVERY_EVENTS: dict[str, tuple[str, ...]] = {
    "virtio-blk": ("virtio_set_status",),
    "virtio-scsi": ("virtio_scsi_tmf_req", "scsi_req_cancel", "virtio_set_status"),
    "mptsas1068": ("scsi_req_cancel", "mptsas_reset"),
    "lsi53c895a": ("scsi_req_cancel", "lsi_do_msgout_abort", "lsi_do_msgout_clearqueue",
                   "lsi_do_msgout_busdevicereset", "lsi_reset"),
    "megasas": ("scsi_req_cancel", "megasas_abort_frame", "megasas_reset", "megasas_dcmd_reset_ld"),
    "megasas-gen2": ("scsi_req_cancel", "megasas_abort_frame", "megasas_reset", "megasas_dcmd_reset_ld"),
    "nvme": ("pci_nvme_admin_cmd", "pci_nvme_mmio_stopped"),
    "ahci": ("ahci_reset_port", "ahci_reset", "ide_cancel_dma_sync_buffered", "ide_cancel_dma_sync_remaining"),
    "ide": ("ide_reset", "ide_bus_reset_aio", "ide_cancel_dma_sync_buffered", "ide_cancel_dma_sync_remaining"),
}


class ThrottleHold:
    """Holds every request of one disk in QEMU's throttle (see the module docstring).

    ``channel`` is the domain's monitor through a libvirt connection of the hold's own: a call that
    waits for a stuck QEMU blocks every later call on its connection (measured: libvirt 9.0 answered
    ``virDomainGetState`` on another connection, never on the stuck one), and the suite's own must
    stay free to see the guest and destroy it. ``destroy``: stops the domain, for :meth:`give_up`."""

    def __init__(self, channel: DomainQmp, destroy: Callable[[], None]) -> None:
        self.channel = channel
        self._destroy = destroy
        self._qdev: str | None = None
        self._held = False

    def qdev(self) -> str:
        """The QOM path or id of the device whose block backend the throttle goes on (a virtio-blk-pci
        proxy's backend is its ``virtio-backend`` child), as query-block names it."""
        if self._qdev is None:
            entry = backend_entry(self.channel)
            inserted = entry.get("inserted", {})
            limited = [k for k in _LIMIT_FIELDS if inserted.get(k)]
            if limited:
                raise HypervisorError(f"disk {self.channel.device} of {self.channel.domain} is throttled already "
                                      f"({', '.join(f'{k}={inserted[k]}' for k in limited)}): the suite "
                                      "holds only a disk it set up itself")
            self._qdev = str(entry["qdev"])
        return self._qdev

    def _throttle(self, limits: dict[str, object]) -> None:
        set_io_throttle(self.channel, self.qdev(), limits)

    def counters(self) -> HostBlockCounters:
        return self.channel.counters()

    def hold(self) -> None:
        self.qdev()
        self._held = True  # before the command: a release after an error in it is harmless
        self._throttle(HOLD_LIMITS)

    def release(self) -> None:
        if self._held:
            self._throttle(NO_LIMITS)
            self._held = False

    def give_up(self) -> None:
        """QEMU did not answer the release: stop the domain (its main loop waits on a held request)."""
        log.error("%s: QEMU did not answer the release of %s; destroying the domain", self.channel.domain,
                  self.channel.device)
        self._held = False
        self._destroy()


class TraceRecoveryWatch(EventLogWindow):
    """Switches a controller's abort and reset events (:data:`RECOVERY_EVENTS`) on for a window and
    reads them back from the domain's trace log (``log_path``, where ``files`` finds it)."""

    def __init__(self, channel: DomainQmp, controller: str, log_path: PurePath, files: LogFiles) -> None:
        super().__init__(channel, RECOVERY_EVENTS.get(controller, ()), log_path, files)

    @property
    def watched(self) -> str:
        return f"QEMU trace events {', '.join(self.events)}" if self.events else "no QEMU event known for it"

    def stop(self) -> tuple[HostEvent, ...]:
        return tuple(parse_recovery_events(self.stop_text()))
