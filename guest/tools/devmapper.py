"""Device-mapper's mirror target in the guest: the ``swallow-errors`` fault's layer over the scratch disk.

The fault stacks device-mapper's ``mirror`` target (dm-raid1) over the failing disk and a good one
(a RAM disk, ``brd``): a read that fails on the first leg is read again from the second, a write that
fails on one leg is done when the other took it (without the ``handle_errors`` feature dm-raid1
"pretends that the I/O succeeded", drivers/md/dm-raid1.c). No error reaches the application, which
is the swallowing layer the error-propagation rule must catch. ``nosync``: the legs are taken as in
sync, so no copy runs. The mirror maps sector for sector, so the rule's offsets stay the disk's.

dmsetup runs without udev (``DM_DISABLE_UDEV=1``, ``--noudevsync``): it makes ``/dev/mapper/<name>``
itself, in the embedded guest and in an image with udev alike. (guest/tools/data_integrity.py's
``DeviceMapper`` makes the data-integrity rule's linear target.)
"""

from __future__ import annotations

import shlex

from guest.tools.sysfs import valid_disk
from guest.tools.tool import GuestTool
from model.error_injection import GOOD_LEG, mirror_table

_DM = "DM_DISABLE_UDEV=1 dmsetup --noudevsync"


class MirrorUnavailable(RuntimeError):
    """The guest's kernel cannot make the mirror (a module it lacks): the fault cannot apply, a skip."""


class SwallowingMirror(GuestTool):
    name = "device-mapper mirror"
    programs = ("dmsetup", "modprobe")
    install_hint = "install dmsetup (Debian: dmsetup; the embedded guest has it) and the dm_mirror and brd modules"

    def create(self, disk: str, size_bytes: int, name: str) -> str:
        """A mirror of the first ``size_bytes`` of ``disk`` and a RAM disk of that size, named ``name``: its
        device path. MirrorUnavailable where the kernel lacks dm_mirror or brd; RuntimeError where a
        /dev/ram0 the suite did not make is there (it would be written)."""
        table, ram_kib = mirror_table(valid_disk(disk), size_bytes)
        if self.shell.run(f"[ -b {GOOD_LEG} ]", check=False).ok:
            raise RuntimeError(f"{GOOD_LEG} exists in the guest already: the mirror's good leg would be a disk the "
                               "suite did not make")
        for module in ("dm_mirror", f"brd rd_nr=1 rd_size={ram_kib}"):
            loaded = self.shell.run(f"modprobe {module} 2>&1", check=False)
            if not loaded.ok:
                said = (loaded.stdout.strip().splitlines() or ["nothing"])[-1]
                raise MirrorUnavailable(f"the guest's kernel cannot load {module.split()[0]} (modprobe said: {said})")
        self._run(f"{_DM} create {shlex.quote(name)} --table {shlex.quote(table)}")
        return f"/dev/mapper/{name}"

    def remove(self, name: str) -> None:
        """Remove the mapping ``name`` and the RAM disk under it (nothing left behind); nothing to do for
        a mapping that is not there."""
        self._run(f"{_DM} remove {shlex.quote(name)} 2>/dev/null; rmmod brd 2>/dev/null; true")
