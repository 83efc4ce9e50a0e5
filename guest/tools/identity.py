"""The guest's view of a disk's identity: its size, serial, WWN and SCSI VPD pages 0x80 and 0x83,
read from sysfs as hex (model/parse/identity_files.py reads them).

The kernel shows them where the bus has them: ``/sys/block/<disk>/serial`` (virtio-blk),
``device/serial`` (NVMe), ``device/vpd_pg80``, ``device/vpd_pg83`` and ``device/wwid`` (SCSI, and
ATA through libata's translation); a file the kernel does not show is left out. ``od`` is a POSIX
utility (busybox has it): no program to install.
"""

from __future__ import annotations

from guest.tools.sysfs import valid_disk
from guest.tools.tool import GuestTool

#: The files read, under ``/sys/block/<disk>/``.
IDENTITY_FILES = ("size", "serial", "device/serial", "device/wwid", "device/vpd_pg80", "device/vpd_pg83")
#: The shell that reads them of disk ``{disk}`` (a reproducer bundle's replay runs it too): one
#: ``FILE=HEX`` line per file the guest's kernel shows.
IDENTITY_SCRIPT = (f"for f in {' '.join(IDENTITY_FILES)}; do [ -r /sys/block/{{disk}}/$f ] && "
                   "{ printf '%s=' $f; od -An -v -tx1 /sys/block/{disk}/$f | tr -d ' \\n'; echo; }; done; true")


class Identity(GuestTool):
    name = "identity"
    programs = ()
    install_hint = ""

    def files(self, disk: str) -> str:
        """One ``FILE=HEX`` line per file of :data:`IDENTITY_FILES` the guest's kernel shows, in one command."""
        return self._run(IDENTITY_SCRIPT.replace("{disk}", valid_disk(disk))).stdout
