"""A disk's I/O limits in QEMU's block layer, set, lifted and read back under the running guest
(the throttle rule; the stall-tolerance rule's hold uses the same two commands).

QMP ``block_set_io_throttle`` on the disk's block backend (named by its device's QOM path, as
``query-block``'s ``qdev`` gives it: a virtio-blk-pci proxy's backend is its ``virtio-backend``
child) sets the limits: its six limits are mandatory, 0 is none; the burst fields are optional. It
works on every disk QEMU has, the null-co latency disk libvirt does not know too; libvirt's
``<iotune>`` (``--disk iops=``/``bps=``) puts the same throttle there when the domain starts.
``query-block``'s ``inserted`` reads back what QEMU holds (model/parse/throttle_limits.py).
"""

from __future__ import annotations

from typing import Any

from hypervisors.libvirt.qmp import DomainQmp
from model.errors import HypervisorError
from model.parse.throttle_limits import NO_LIMITS, ThrottleLimits, parse_throttle, qmp_arguments


def qmp_error(reply: dict[str, Any]) -> str:
    err = reply.get("error")
    return str(err.get("desc", err)) if isinstance(err, dict) else str(err) if err else ""


def backend_entry(channel: DomainQmp) -> dict[str, Any]:
    """The ``query-block`` entry of the block backend of the channel's device; HypervisorError naming
    the devices it lists where none is the channel's."""
    dev = channel.device
    path = f"/machine/peripheral/{dev}"
    entries = channel.execute({"execute": "query-block"}).get("return", [])
    for entry in entries:
        if entry.get("qdev") in (dev, path, f"{path}/virtio-backend"):
            return dict(entry)
    raise HypervisorError(f"QMP query-block of {channel.domain} lists no block backend of device {dev}; its "
                          f"devices: {[e.get('qdev') for e in entries]}")


def set_io_throttle(channel: DomainQmp, qdev: str, arguments: dict[str, object]) -> None:
    """``block_set_io_throttle`` on the block backend ``qdev``; HypervisorError with QEMU's words where it refuses."""
    reply = channel.execute({"execute": "block_set_io_throttle", "arguments": {"id": qdev, **NO_LIMITS, **arguments}})
    if qmp_error(reply):
        raise HypervisorError(f"QMP block_set_io_throttle on {qdev} of {channel.domain} failed: {qmp_error(reply)}")


class QmpThrottle:
    """One disk's limits through QEMU's monitor (the module docstring); ``restore`` sets back what the
    disk held when the first ``set`` came."""

    def __init__(self, channel: DomainQmp) -> None:
        self.channel = channel
        self._qdev = ""
        self._before: ThrottleLimits | None = None

    @property
    def said_by(self) -> str:
        return f"QMP query-block of {self.channel.domain}, device {self.channel.device}"

    def held(self) -> ThrottleLimits:
        entry = backend_entry(self.channel)
        self._qdev = str(entry["qdev"])
        return parse_throttle(entry.get("inserted", {}), self.said_by)

    def set(self, limits: ThrottleLimits) -> None:
        if self._before is None:
            self._before = self.held()
        set_io_throttle(self.channel, self._qdev, qmp_arguments(limits))

    def restore(self) -> None:
        if self._before is not None:
            set_io_throttle(self.channel, self._qdev, qmp_arguments(self._before))
            self._before = None
