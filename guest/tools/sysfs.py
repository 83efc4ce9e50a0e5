"""A disk's files under ``/sys/block``: its limits, finding it by serial or WWN, its settings.

The limits are printed as ``key=value`` lines that ``model.device_limits.parse_guest_limits`` reads
(the parser stays pure, in model/). A setting is a path relative to ``/sys/block/<disk>/`` and a
value; only plain sysfs names are accepted, so no caller can slip a shell command in.

A setting a rule changes for a while is set back by ``Sysfs.changed`` (also when the rule fails or
errors), and every rule's disks are read before and after the rule (``Sysfs.settings``, the ones in
``KEPT_SETTINGS``) and set back where the rule left one changed (measure/kept.py). Where the kernel
refuses the value it showed, what it takes instead is ``takeable``'s (docs/rules/discard.md,
"Setting discard_max_bytes back").
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

from guest.tools.tool import GuestTool
from model.device_limits import GuestLimits, GuestPathLimits, parse_guest_limits, parse_guest_path_limits
from transport.ssh import CommandResult

#: Prints the ``key=value`` lines parse_guest_limits understands; ``{disk}`` is the kernel name
#: of the disk (sdb, vda, nvme0n1). Files are read with the shell's own ``read``, globs counted by the
#: shell: no process per file (a fork and exec costs 10-20 ms under TCG; only ``readlink`` runs one).
LIMITS_SCRIPT = r"""
d=/sys/block/{disk}
r() { [ -r "$1" ] || return 1; v=; read -r v < "$1"; echo "$2=$v"; }
echo name={disk}
r $d/queue/nr_requests nr_requests
r $d/queue/max_sectors_kb max_sectors_kb
r $d/queue/max_hw_sectors_kb max_hw_sectors_kb
r $d/queue/logical_block_size logical_block_size
r $d/queue/physical_block_size physical_block_size
r $d/queue/optimal_io_size optimal_io_size
r $d/queue/write_cache write_cache
r $d/queue/discard_max_bytes discard_max_bytes
r $d/queue/rotational rotational
r $d/queue/read_ahead_kb read_ahead_kb
r $d/queue/fua fua
r $d/queue/max_segments max_segments
r $d/queue/io_timeout io_timeout_ms
n=0; for q in $d/mq/*; do [ -e "$q" ] && n=$((n + 1)); done
echo nr_hw_queues=$n
r $d/device/queue_depth scsi_queue_depth
h=; for x in $d/device/../../../host*/scsi_host/host*; do [ -e "$x" ] && h=$x && break; done
[ -n "$h" ] && r $h/can_queue can_queue && r $h/cmd_per_lun cmd_per_lun
drv=$(readlink $d/device/driver 2>/dev/null || readlink $d/device/device/driver 2>/dev/null)
echo driver=${drv##*/}
"""

#: What the guest's configuration lets be in flight on the disk's path (model.device_limits.GuestPathLimits):
#: its depth settings, its SCSI host (the ``hostN`` above the disk, however deep: SAS adds ports and
#: end devices), the active I/O scheduler and its async_depth, and the io.max
#: entries for the disk in the cgroup v2 of this shell (which fio's shell shares: one SSH session)
#: and every cgroup above it. POSIX shell and builtins only (the busybox guest has them).
PATH_SCRIPT = r"""
d=/sys/block/{disk}
r() { [ -r "$1" ] || return 1; v=; read -r v < "$1"; echo "$2=$v"; }
r $d/dev dev
r $d/queue/nr_requests nr_requests
r $d/device/queue_depth queue_depth
p=$(readlink -f $d/device 2>/dev/null)
while [ -n "$p" ] && [ "$p" != /sys/devices ]; do
  case ${p##*/} in host[0-9]*) [ -d "$p/scsi_host/${p##*/}" ] && echo "scsi_host=${p##*/}" && r "$p/scsi_host/${p##*/}/can_queue" can_queue; break ;; esac
  p=${p%/*}
done
r $d/queue/scheduler scheduler
r $d/queue/iosched/async_depth async_depth
dev=; read -r dev < $d/dev
m=
while read -r _ mp fs _; do [ "$fs" = cgroup2 ] && m=$mp && break; done < /proc/mounts
c=
while IFS=: read -r id _ path; do [ "$id" = 0 ] && c=$path; done < /proc/$$/cgroup
if [ -n "$m" ] && [ -n "$c" ]; then
  echo "cgroup=$c"
  p=$m${c%/}
  while [ "${#p}" -gt "${#m}" ]; do
    [ -r "$p/io.max" ] && while read -r dv rest; do [ "$dv" = "$dev" ] && echo "io_max=${p#$m} $rest"; done < "$p/io.max"
    p=${p%/*}
  done
fi
true
"""

#: The Linux drivers bound along a block device's sysfs path (disk, SCSI host, HBA), one a line.
DRIVERS_SCRIPT = ("p=$(readlink -f /sys/block/{disk}); while [ \"$p\" != /sys/devices ]; do "
                  "[ -e $p/driver ] && basename $(readlink $p/driver); p=${{p%/*}}; done; true")

_DISK = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]*")
_SETTING = re.compile(r"[A-Za-z0-9_]+(/[A-Za-z0-9_]+)*")


def valid_disk(name: str) -> str:
    """``name`` if it is a plain block device name (sdb, nvme0n1), else ValueError."""
    if not _DISK.fullmatch(name):
        raise ValueError(f"not a block device name: {name!r}")
    return name


def _setting(path: str) -> str:
    if not _SETTING.fullmatch(path):
        raise ValueError(f"not a sysfs setting under /sys/block/<disk>/: {path!r}")
    return path


DISCARD_MAX = "queue/discard_max_bytes"
DISCARD_GRANULARITY = "queue/discard_granularity"
SCHEDULER = "queue/scheduler"
#: The settings under ``/sys/block/<disk>/`` a rule may change and the next rule must find as they
#: were (measure/kept.py), in the order they are set back: the scheduler first, since choosing one
#: resets ``nr_requests`` (and ``wbt_lat_usec``) to its own default. A kernel without one shows
#: none of it, and it is not kept. ``discard_granularity`` is read only: ``takeable`` needs it.
KEPT_SETTINGS = (SCHEDULER, "queue/nr_requests", "queue/max_sectors_kb", "queue/read_ahead_kb",
                 "queue/write_cache", DISCARD_MAX, "queue/nomerges", "queue/rq_affinity", "queue/rotational",
                 "queue/io_timeout", "queue/wbt_lat_usec", "device/queue_depth", "device/timeout")
_READ_ONLY = (DISCARD_GRANULARITY,)


def shown(setting: str, value: str) -> str:
    """The value of ``setting`` as it is written back: the scheduler file lists every scheduler with
    the active one in brackets (``none [mq-deadline] kyber``), and takes that one's name."""
    if setting == SCHEDULER:
        m = re.search(r"\[([^\]]+)\]", value)
        return m.group(1) if m else value
    return value


def takeable(setting: str, was: str, settings: Mapping[str, str]) -> str | None:
    """A value the guest's kernel takes for ``setting`` and then shows as ``was``, where it refused
    ``was`` itself; None where there is none.

    ``queue/discard_max_bytes``: Linux takes only multiples of ``discard_granularity``
    (block/blk-sysfs.c, 6.1 and 6.12 alike), but shows the device's own maximum, which need not be one
    (Linux 6.12 raises the granularity of a disk with 4 KiB physical blocks to 4096 while virtio-blk's
    maximum stays 2 GiB - 512). The next multiple up is taken, and the kernel clamps it to the device's
    maximum (6.1 when it stores it, 6.12 when it works the limit out), so it shows ``was`` again."""
    granularity = settings.get(DISCARD_GRANULARITY, "")
    if setting != DISCARD_MAX or not was.isdigit() or not granularity.isdigit():
        return None
    g = max(int(granularity), 512)
    up = -(-int(was) // g) * g
    return str(up) if up != int(was) else None


def find_script(ident: str) -> str:
    """Prints the name of each disk whose serial or WWN is ``ident`` in the kernel's own files
    (``Sysfs.find_disk``), one a line."""
    q = shlex.quote(ident)
    return (f"for d in /sys/block/*; do for f in serial device/serial device/vpd_pg80 device/wwid; do "
            f"[ -r $d/$f ] && grep -qiw {q} $d/$f 2>/dev/null && echo ${{d##*/}}; "
            "done; done | sort -u")


def settings_script(disk: str) -> str:
    """Prints the disk's KEPT_SETTINGS (and its discard granularity) as ``setting=value`` lines, those
    the kernel shows; ``disk``: a kernel name, or a shell variable that holds one."""
    d = f"/sys/block/{disk}"
    names = " ".join(KEPT_SETTINGS + _READ_ONLY)
    # the shell's own read, not cat: no process per file (a fork and exec costs 10-20 ms under TCG)
    return f'for f in {names}; do [ -r {d}/$f ] && read -r v < {d}/$f && echo "$f=$v"; done; true'


def parse_settings(text: str) -> dict[str, str]:
    """``settings_script``'s lines as a dict."""
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


class SettingNotRestored(RuntimeError):
    """A setting the suite changed that the guest's kernel did not take back: the disk is left changed."""


@dataclass(frozen=True)
class Restored:
    """A setting set back after a change: what the kernel showed before (``was``), what the suite
    wrote back, what the kernel shows now, and its words where it refused ``was`` ("" where it took it)."""

    disk: str
    setting: str
    was: str
    written: str
    now: str
    refused: str = ""

    def note(self) -> str:
        """"" where ``was`` itself was written back, else what was written instead and why."""
        if not self.refused:
            return ""
        return (f"/sys/block/{self.disk}/{self.setting} set back as {self.written}: the guest's kernel refused the "
                f"{self.was} it had shown ({self.refused}); it shows {self.now} again")


class Sysfs(GuestTool):
    name = "sysfs"

    def limits(self, disk: str) -> GuestLimits:
        """The disk's limits as the guest sees them now."""
        return parse_guest_limits(self._run(LIMITS_SCRIPT.replace("{disk}", valid_disk(disk))).stdout)

    def path_limits(self, disk: str) -> GuestPathLimits:
        """What the guest's configuration lets be in flight on the disk's path now (PATH_SCRIPT)."""
        return parse_guest_path_limits(self._run(PATH_SCRIPT.replace("{disk}", valid_disk(disk))).stdout, disk)

    def block_devices(self) -> list[str]:
        return self._run("ls /sys/block", check=False).stdout.split()

    def find_disk(self, ident: str) -> str:
        """The guest's name (sdb, vda, nvme0n1) of the disk whose serial (or WWN) is ``ident``;
        LookupError, listing the guest's disks, unless exactly one has it.

        Whatever udev named the disk: the kernel's own files first, ``/sys/block/*/serial``
        (virtio-blk), ``device/serial`` (NVMe: the controller's, or the subsystem's under native
        NVMe multipath), ``device/vpd_pg80`` and ``device/wwid`` (SCSI and ATA, Linux 4.18 to 6.x);
        then udev's ``/dev/disk/by-id`` links whose name ends in ``_<ident>`` or ``-<ident>``
        (``scsi-0QEMU_QEMU_HARDDISK_vioc-dut0``, ``virtio-vioc-dut1``), for a kernel that shows
        the serial in none of those files."""
        return self.one_disk(ident, self._run(find_script(ident)).stdout.split())

    def one_disk(self, ident: str, names: list[str]) -> str:
        """The one name of ``names`` (what ``find_script`` printed for ``ident``); where it printed
        none, udev's ``/dev/disk/by-id`` links are asked (``find_disk``); LookupError unless exactly one."""
        if not names:
            q = shlex.quote(ident)
            names = self._run(f"for l in /dev/disk/by-id/*[-_]{q}; do [ -L \"$l\" ] && readlink -f \"$l\"; done "
                              "2>/dev/null | sed 's|^/dev/||' | sort -u", check=False).stdout.split()
        if len(names) != 1:
            raise LookupError(f"the guest shows {len(names)} disks with serial {ident} ({names}); its disks are "
                              f"{self.block_devices()}. Did the driver for this controller load? See the console log.")
        return names[0]

    def read(self, disk: str, setting: str) -> str:
        """``/sys/block/<disk>/<setting>``, stripped: ``read("sdb", "sdb1/start")``."""
        return self._run(f"cat /sys/block/{valid_disk(disk)}/{_setting(setting)}").stdout.strip()

    def exists(self, disk: str, setting: str) -> bool:
        """Whether the guest's kernel shows ``/sys/block/<disk>/<setting>`` (a kernel lacks some)."""
        return self._run(f"test -e /sys/block/{valid_disk(disk)}/{_setting(setting)}", check=False).ok

    def write(self, disk: str, setting: str, value: str, check: bool = True) -> CommandResult:
        """Write ``value`` to ``/sys/block/<disk>/<setting>``: ``write("sdb", "queue/nomerges", "2")``.
        With ``check`` False a refusal is in the result (the kernel's words on stderr)."""
        return self._run(f"echo {shlex.quote(value)} > /sys/block/{valid_disk(disk)}/{_setting(setting)}", check=check)

    def settings(self, disk: str) -> dict[str, str]:
        """The disk's KEPT_SETTINGS as the kernel shows them now (and its discard granularity), in
        one guest command; a setting the kernel does not show is left out."""
        return parse_settings(self._run(settings_script(valid_disk(disk))).stdout)

    def restore(self, disk: str, setting: str, was: str, settings: Mapping[str, str] | None = None) -> Restored:
        """Write ``was`` (what the kernel showed before a change) back to ``setting``; where the kernel
        refuses it, ``takeable``'s value instead (``settings``: the disk's as ``settings`` read them, read
        now where not given). SettingNotRestored unless the kernel then shows ``was`` again."""
        done = self.write(disk, setting, was, check=False)
        written, refused = was, ""
        if not done.ok:
            refused = done.error_line()
            instead = takeable(setting, was, settings if settings is not None else self.settings(disk))
            if instead is None:
                raise SettingNotRestored(f"/sys/block/{disk}/{setting} cannot be set back to {was}: the guest's "
                                         f"kernel refused it ({refused}); the disk is left changed")
            written = instead
            again = self.write(disk, setting, written, check=False)
            if not again.ok:
                raise SettingNotRestored(f"/sys/block/{disk}/{setting} cannot be set back to {was}: the guest's "
                                         f"kernel refused it ({refused}) and {written} ({again.error_line()}); "
                                         "the disk is left changed")
        now = shown(setting, self.read(disk, setting))
        if now != was:
            raise SettingNotRestored(f"/sys/block/{disk}/{setting} shows {now} after the suite wrote {written} back; "
                                     f"it showed {was} before the change: the disk is left changed")
        return Restored(disk, setting, was, written, now, refused)

    @contextmanager
    def changed(self, disk: str, setting: str, value: str) -> Iterator[list[Restored]]:
        """``setting`` at ``value`` for the ``with`` block, set back (``restore``) when it ends, whatever
        happened in it; the list it gives holds the ``Restored`` afterwards (its ``note()`` says where
        the kernel took another value back)::

            with sysfs.changed("vdb", "queue/discard_max_bytes", "262144") as restored:
                ...
            notes = [r.note() for r in restored if r.note()]
        """
        was = shown(setting, self.read(disk, setting))
        self.write(disk, setting, value)
        restored: list[Restored] = []
        try:
            yield restored
        finally:
            restored.append(self.restore(disk, setting, was))

    def drivers(self, disk: str) -> list[str]:
        """The drivers bound along the disk's device path, the disk's own first: ["sd", "virtio_scsi", ...]."""
        return self._run(DRIVERS_SCRIPT.format(disk=valid_disk(disk))).stdout.split()
