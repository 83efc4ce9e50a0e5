"""Where a disk's I/O runs: interrupts per virtio queue, the guest's CPU lists, a disk's virtio device."""

from __future__ import annotations

import re
from typing import Literal

from guest.tools.sysfs import valid_disk
from guest.tools.tool import GuestTool
from model.parse.proc_interrupts import parse_cpu_list, parse_queue_interrupts


class Interrupts(GuestTool):
    name = "interrupts"

    def per_queue(self, virtio_dev: str) -> dict[int, int]:
        """Interrupts per request queue of ``virtio_dev`` ("virtio2") so far, summed over CPUs."""
        return parse_queue_interrupts(self._run("cat /proc/interrupts").stdout, virtio_dev)

    def cpus(self, which: Literal["online", "present"]) -> list[int]:
        """The guest's online or present CPUs."""
        return parse_cpu_list(self._run(f"cat /sys/devices/system/cpu/{which}").stdout)

    def virtio_device(self, disk: str) -> tuple[str | None, str]:
        """The virtio device ("virtio2") under the disk, or None, and the disk's device path it was read from."""
        path = self._run(f"readlink -f /sys/block/{valid_disk(disk)}/device").stdout.strip()
        found = re.findall(r"/(virtio\d+)(?=/|$)", path)
        return (found[-1] if found else None), path
