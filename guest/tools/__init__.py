"""One typed class per guest program or file: fio, diskstats, sysfs, interrupts, partitioning,
filesystems, and small ones (page cache, uname, the work directory). See guest/tools/base.py."""

from guest.tools.base import GuestShell, GuestTool, GuestTools, ToolMissing

__all__ = ["GuestShell", "GuestTool", "GuestTools", "ToolMissing"]
