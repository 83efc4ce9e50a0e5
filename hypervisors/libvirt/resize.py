"""A disk grown or shrunk under its running guest: QMP ``block_resize`` on the disk's top block node.

QEMU finds the node from the device (``query-block``'s ``qdev``: the device id, or its
``virtio-backend`` child for virtio devices) and resizes it; the device then tells the guest as its
bus allows: virtio-blk raises a config-change interrupt, scsi-hd queues a CAPACITY DATA HAS CHANGED
unit attention and, on virtio-scsi with ``param_change`` (on by default), sends a parameter-change
event; nvme raises a namespace-attribute-changed notice. The command goes through libvirt's monitor
(``DomainQmp``), so a remote libvirt host works as a local one. ``block_resize`` is what libvirt's
``virDomainBlockResize`` sends; QMP is used directly because a disk the suite attaches as a raw
``-device`` (an HBA libvirt has no XML for) has no libvirt target to name.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from hypervisors.base import HostResize, ResizeUnavailable
from hypervisors.libvirt.qmp import DomainQmp
from model.errors import HypervisorError

PERIPHERAL = "/machine/peripheral"


@dataclass
class QmpResizer:
    """Resizes the disk whose QEMU device id is ``qmp.device``."""

    qmp: DomainQmp

    def _block(self) -> dict[str, Any]:
        reply = self.qmp.execute({"execute": "query-block"})
        if "error" in reply:
            raise HypervisorError(f"QMP query-block on {self.qmp.domain} failed: {reply['error']}")
        device = self.qmp.device
        names = (device, f"{PERIPHERAL}/{device}", f"{PERIPHERAL}/{device}/virtio-backend")
        for b in reply.get("return", []):
            if b.get("qdev") in names and "inserted" in b:
                return dict(b["inserted"])
        raise ResizeUnavailable(f"QEMU's query-block has no medium for device {device}")

    def size_bytes(self) -> int:
        """The disk's size as QEMU reports it (its top node's virtual size)."""
        return int(self._block()["image"]["virtual-size"])

    def resize(self, size_bytes: int) -> HostResize:
        node = self._block().get("node-name")
        if not node:
            raise ResizeUnavailable(f"device {self.qmp.device} has no named block node to resize")
        began = time.monotonic()
        reply = self.qmp.execute({"execute": "block_resize", "arguments": {"node-name": node, "size": size_bytes}})
        took = time.monotonic() - began
        if "error" in reply:
            err = reply["error"]
            said = err.get("desc", err) if isinstance(err, dict) else err
            raise ResizeUnavailable(f"QEMU refused to resize device {self.qmp.device} to {size_bytes} bytes: {said}")
        return HostResize(self.size_bytes(), took)
