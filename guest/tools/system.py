"""Small guest tools: the page cache, the kernel's release, the suite's work directory."""

from __future__ import annotations

from guest.tools.tool import GuestTool

#: Where the suite keeps the files of a background fio and the in-flight samples in the guest:
#: a small tmpfs of the suite's own, so a guest whose /tmp or root filesystem is full (a
#: ``--guest-setup`` that filled it, a small template disk) cannot take fio's results with it.
#: Each window's files are removed once read. A foreground fio keeps no file: it prints to stdout.
GUEST_WORK_DIR = "/run/vioconform"
GUEST_WORK_TMPFS_OPTIONS = "size=16m,mode=0700"
#: Room one window needs there: fio's JSON is 6-10 KiB, 5 s of in-flight samples about 2 KiB.
GUEST_WORK_MIN_FREE_KIB = 256


class GuestSpaceError(RuntimeError):
    """The guest has no room for fio's output: a harness error that names the directory and its
    free space, never a rule's verdict."""


class WorkDir(GuestTool):
    """``GUEST_WORK_DIR``, mounted as the suite's own tmpfs unless something is mounted there already."""

    name = "work directory"

    #: set once the directory was found ready: later windows skip the guest command (one SSH round
    #: trip, 0.3-0.4 s through sudo under TCG). A --guest-setup command makes the tools forget it.
    _ready: str | None = None

    def ensure(self) -> str:
        """The directory's path; GuestSpaceError if it has no room for one window's files.
        Checked once per guest (each window removes its own files)."""
        if self._ready is not None:
            return self._ready
        d = GUEST_WORK_DIR
        free = self._run(f"mkdir -p {d} && {{ grep -q ' {d} ' /proc/mounts || "
                         f"mount -t tmpfs -o {GUEST_WORK_TMPFS_OPTIONS} vioconform {d}; }} && "
                         f"df -Pk {d} | awk 'NR == 2 {{print $4}}'").stdout.strip()
        if not free.isdigit():
            raise GuestSpaceError(f"cannot tell the free space of the guest's {d}: df printed {free!r}")
        if int(free) < GUEST_WORK_MIN_FREE_KIB:
            raise GuestSpaceError(f"the guest's {d} is full ({free} KiB free; fio's output needs "
                                  f"{GUEST_WORK_MIN_FREE_KIB} KiB): free space there "
                                  "(did a --guest-setup command fill it?)")
        self._ready = d
        return d


class PageCache(GuestTool):
    """The guest's page cache."""

    name = "page cache"

    def drop(self) -> None:
        """Write back dirty pages and drop the clean ones: the next read reaches the disk."""
        self._run("sync; echo 3 > /proc/sys/vm/drop_caches")


class Uname(GuestTool):
    name = "uname"

    def kernel_release(self) -> str:
        """``uname -r``: "6.1.0-28-amd64"."""
        return self._run("uname -r").stdout.strip()
