"""A disk's size as the guest's kernel shows it (``/sys/block/<disk>/size``, in 512-byte sectors
whatever the logical block size), waited for in one guest command: the resize rule."""

from __future__ import annotations

from dataclasses import dataclass

from guest.tools.fio import PAUSE_100MS
from guest.tools.sysfs import valid_disk
from guest.tools.tool import GuestTool

#: ``/sys/block/<disk>/size`` counts 512-byte sectors for every disk (block/genhd.c).
SIZE_SECTOR_BYTES = 512

#: Waits until the disk's size is {sectors} sectors or {timeout} s have passed on the guest's uptime,
#: looking every 0.1 s; prints ``VIOC-SIZE seen|never <sectors> <waited s>``.
WAIT_SCRIPT = r"""
f=/sys/block/{disk}/size
read t0 _ </proc/uptime
r=never
while :; do
  s=$(cat $f); read t _ </proc/uptime
  [ "$s" = {sectors} ] && {{ r=seen; break; }}
  awk -v a="$t0" -v b="$t" 'BEGIN{{exit !(b - a >= {timeout})}}' && break
  {pause}
done
awk -v r=$r -v s="$s" -v a="$t0" -v b="$t" 'BEGIN{{printf "VIOC-SIZE %s %s %.2f\n", r, s, b - a}}'
"""


@dataclass(frozen=True)
class SizeWait:
    """What the guest showed at the end of a wait: its size in bytes, whether it reached the size
    waited for, and the seconds the guest waited (its uptime, 10 ms resolution)."""

    size_bytes: int
    reached: bool
    waited_s: float


class DiskSize(GuestTool):
    name = "disk size"

    def size_bytes(self, disk: str) -> int:
        return int(self._run(f"cat /sys/block/{valid_disk(disk)}/size").stdout.strip()) * SIZE_SECTOR_BYTES

    def settle(self) -> None:
        """Wait until the guest's udev, where it has one, has handled the events already queued: a size
        change and a close after writing each make it probe the disk, reading its last sectors. A
        shrink under such a probe fails its read past the new end ("critical target error" on sd,
        seen on the test image after the online grow), which the kernel-log check rightly reports."""
        self._run("command -v udevadm >/dev/null 2>&1 && udevadm settle -t 10 2>/dev/null; true", timeout_s=30)

    def wait_for(self, disk: str, size_bytes: int, timeout_s: float) -> SizeWait:
        """Wait, in the guest, until ``disk`` shows ``size_bytes`` or ``timeout_s`` have passed."""
        script = WAIT_SCRIPT.format(disk=valid_disk(disk), sectors=size_bytes // SIZE_SECTOR_BYTES,
                                    timeout=f"{timeout_s:.2f}", pause=PAUSE_100MS)
        said = self._run(script, timeout_s=timeout_s + 60).stdout.split()
        at = said.index("VIOC-SIZE")
        return SizeWait(int(said[at + 2]) * SIZE_SECTOR_BYTES, said[at + 1] == "seen", float(said[at + 3]))
