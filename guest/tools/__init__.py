"""One typed class per guest program or file: fio, diskstats, sysfs, interrupts, partitioning,
filesystems, and small ones (page cache, uname, the work directory). See guest/tools/tool.py."""

from guest.tools.tool import GuestShell, GuestTool, GuestTools, ToolMissing

__all__ = ["GuestShell", "GuestTool", "GuestTools", "ToolMissing"]
