"""The resize rule's host side without a guest: the param-change-off fault's ``<qemu:override>`` on the
virtio-scsi HBA, and QmpResizer's QMP commands against a recorded monitor."""

from __future__ import annotations

from typing import Any

import pytest

from tests.libvirt_python import REASON

pytest.importorskip("libvirt", reason=REASON)

from hypervisors.base import ResizeUnavailable
from hypervisors.libvirt.controllers import disk_overrides
from hypervisors.libvirt.resize import QmpResizer
from model.disks import suite_disks

PROPERTY = "<qemu:property name='param_change' type='bool' value='false'/>"


def test_param_change_off_overrides_the_virtio_scsi_hba_only() -> None:
    disks = suite_disks(("virtio-scsi", "virtio-blk"), "latency", 5.0)
    assert PROPERTY not in disk_overrides(disks)
    off = disk_overrides(disks, param_change=False)
    assert off.count(PROPERTY) == 1 and "<qemu:device alias='ua-vioc-virtio-scsi'>" in off, off
    assert PROPERTY not in disk_overrides(suite_disks(("virtio-blk",), "latency", 5.0), param_change=False)


class _Monitor:
    domain = "d"
    device = "ua-vioc-dut1"

    def __init__(self, refuse: bool = False) -> None:
        self.size = 1 << 30
        self.refuse = refuse
        self.sent: list[dict[str, Any]] = []

    def execute(self, command: dict[str, Any]) -> dict[str, Any]:
        self.sent.append(command)
        if command["execute"] == "query-block":
            return {"return": [{"qdev": "/machine/peripheral/ua-vioc-dut0/virtio-backend", "inserted": {}},
                               {"qdev": "/machine/peripheral/ua-vioc-dut1/virtio-backend",
                                "inserted": {"node-name": "libvirt-1-format", "image": {"virtual-size": self.size}}}]}
        if self.refuse:
            return {"error": {"class": "GenericError", "desc": "Permission conflict on node 'vioc-node13'"}}
        self.size = command["arguments"]["size"]
        return {"return": {}}


def test_the_resizer_resizes_the_devices_node_and_reports_the_hosts_size() -> None:
    mon = _Monitor()
    done = QmpResizer(mon).resize((1 << 30) + (64 << 20))  # type: ignore[arg-type]
    assert done.size_bytes == (1 << 30) + (64 << 20) and done.seconds >= 0
    assert {"execute": "block_resize", "arguments": {"node-name": "libvirt-1-format", "size": done.size_bytes}} in mon.sent


def test_a_refused_resize_is_unavailable_with_qemus_words() -> None:
    with pytest.raises(ResizeUnavailable, match=r"QEMU refused to resize device ua-vioc-dut1 .*Permission conflict"):
        QmpResizer(_Monitor(refuse=True)).resize(1 << 31)  # type: ignore[arg-type]
