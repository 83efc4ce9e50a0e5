"""What the error-propagation rule reads in the guest: the disk's command timeouts, and the kernel log
from a mark on.

The kernel log is read with ``dmesg`` (busybox's and util-linux's print the same lines). The mark is
the log's last line when a window opens, kept in a guest file so that another tool's command can set
it (``Fio.start``'s ``first``) and another read the log after it (``BackgroundFio.finish``'s ``also``);
model/parse/kernel_io_errors.py's ``window_after`` finds the lines after it.

Example::

    tool = disk.tool(ErrorPath)
    fio.start(job, ..., first=tool.mark_command())
    finished = run.finish(10, also=tool.log_command())
    mark, log = tool.split_log(finished.also_stdout)
"""

from __future__ import annotations

from guest.tools.sysfs import valid_disk
from guest.tools.tool import GuestTool
from model.error_injection import TIMEOUTS_SCRIPT, Timeouts, parse_timeouts
from model.parse.kernel_io_errors import room_then

#: Where the mark is kept in the guest (one at a time: the rule's windows do not overlap).
MARK_FILE = "/tmp/vioc-kernel-log.mark"
#: The line between the mark and the log in ``log_command``'s output (no kernel line holds it).
MARK_END = "--vioconform-kernel-log--"


class ErrorPath(GuestTool):
    name = "kernel log"
    programs = ("dmesg",)
    install_hint = "dmesg is part of util-linux (or busybox): install it in the image"

    def timeouts(self, disk: str) -> Timeouts:
        return parse_timeouts(self._run(TIMEOUTS_SCRIPT.replace("{disk}", valid_disk(disk))).stdout)

    def mark_command(self, room_for: int = 0) -> str:
        """A command that keeps the kernel log's last line as the mark; with ``room_for`` N, first waits
        (at most the rate limit's interval) until the kernel has printed few enough block-layer error
        lines in the last interval that N more are all printed (model/parse/kernel_io_errors.py: at most
        RATELIMIT_BURST in RATELIMIT_INTERVAL_S, for all disks together)."""
        return room_then(f"dmesg | tail -n 1 > {MARK_FILE}", room_for)

    def log_command(self) -> str:
        """A command that prints the mark, MARK_END and the whole kernel log."""
        return f"cat {MARK_FILE} 2>/dev/null; echo {MARK_END}; dmesg"

    def mark(self) -> None:
        self._run(self.mark_command())

    def log(self) -> tuple[str, str]:
        """The mark and the kernel log now."""
        return self.split_log(self._run(self.log_command()).stdout)

    @staticmethod
    def split_log(printed: str) -> tuple[str, str]:
        """``log_command``'s output as (mark, log)."""
        mark, _, log = printed.partition(f"{MARK_END}\n")
        return mark.strip("\n"), log
