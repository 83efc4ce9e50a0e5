"""The guest's side of a hot-plugged disk: waiting for a disk with a serial to appear, for a disk to go,
and the two guest settings that decide whether a new device is bound or scanned at all
(the ``hotplug-off`` fault: model/rules/hotplug.py's ``off_setting``).

Each wait is one command that polls the guest's own files every 0.1 s and times itself with the guest's
clock (``/proc/uptime``, 10 ms steps), so the guest's side of each step is measured where it happens.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from guest.tools.tool import GuestTool
from model.errors import ParseError

_UPTIME = "$(cut -d' ' -f1 /proc/uptime)"
_SLEEP = "sleep 0.1 2>/dev/null || usleep 100000"
_ELAPSED = "awk -v a=\"$t0\" -v b=\"$now\" 'BEGIN{printf \"%.2f\", b-a}'"


@dataclass(frozen=True)
class Sighting:
    """A disk the guest showed: its name, its size and how long the guest's wait for it took."""

    name: str
    size_bytes: int
    guest_s: float


def _float(text: str, what: str) -> float:
    try:
        return float(text)
    except ValueError as e:
        raise ParseError(f"the guest's {what} is {text!r}, not a number of seconds") from e


class HotplugWatch(GuestTool):
    name = "hotplug"

    def wait_for(self, serial: str, timeout_s: float) -> Sighting | None:
        """The disk whose serial (``/sys/block/*/serial``, ``device/vpd_pg80``, ``device/wwid``) is
        ``serial`` once the guest shows it, or None if it did not within ``timeout_s``."""
        q = shlex.quote(serial)
        script = (f"t0={_UPTIME}; while :; do for d in /sys/block/*; do "
                  f"for f in serial device/serial device/vpd_pg80 device/wwid; do "
                  f"if [ -r $d/$f ] && grep -qiw {q} $d/$f 2>/dev/null; then now={_UPTIME}; "
                  f"echo \"found ${{d##*/}} $(cat $d/size) $({_ELAPSED})\"; exit 0; fi; done; done; "
                  f"now={_UPTIME}; if awk -v a=\"$t0\" -v b=\"$now\" 'BEGIN{{exit !(b-a>={timeout_s:g})}}'; then "
                  f"echo \"timeout $({_ELAPSED})\"; exit 0; fi; {_SLEEP}; done")
        words = self._run(script, timeout_s=timeout_s + 30).stdout.split()
        if words[:1] == ["found"] and len(words) == 4:
            try:
                sectors = int(words[2])
            except ValueError as e:
                raise ParseError(f"the guest's size of {words[1]} is {words[2]!r}, not a number of sectors") from e
            return Sighting(words[1], sectors * 512, _float(words[3], "wait for the new disk"))
        if words[:1] == ["timeout"]:
            return None
        raise ParseError(f"the guest's wait for serial {serial} printed {' '.join(words)!r}")

    def wait_gone(self, disk: str, timeout_s: float) -> float | None:
        """How long the guest took to drop ``/sys/block/<disk>``, or None if it still shows it after ``timeout_s``."""
        d = shlex.quote(f"/sys/block/{disk}")
        script = (f"t0={_UPTIME}; while [ -e {d} ]; do now={_UPTIME}; "
                  f"if awk -v a=\"$t0\" -v b=\"$now\" 'BEGIN{{exit !(b-a>={timeout_s:g})}}'; then "
                  f"echo timeout; exit 0; fi; {_SLEEP}; done; now={_UPTIME}; echo \"gone $({_ELAPSED})\"")
        words = self._run(script, timeout_s=timeout_s + 30).stdout.split()
        if words[:1] == ["gone"] and len(words) == 2:
            return _float(words[1], f"wait for {disk} to go")
        if words[:1] == ["timeout"]:
            return None
        raise ParseError(f"the guest's wait for {disk} to go printed {' '.join(words)!r}")

    def read(self, path: str) -> str | None:
        """The guest setting at ``path`` (PCI_AUTOPROBE, SCSI_SCAN), or None where its kernel has none."""
        out = self._run(f"cat {shlex.quote(path)} 2>/dev/null", check=False)
        return out.stdout.strip() if out.ok else None

    def write(self, path: str, value: str) -> None:
        """Write ``value`` without a newline: scsi_mod's ``scan`` takes at most 6 characters plus its end
        (a 7-byte string parameter), so ``echo manual`` is refused with ENOSPC."""
        self._run(f"printf %s {shlex.quote(value)} > {shlex.quote(path)}")
