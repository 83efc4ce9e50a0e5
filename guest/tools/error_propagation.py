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

from dataclasses import dataclass

from guest.tools.sysfs import valid_disk
from guest.tools.tool import GuestTool
from model.parse.kernel_io_errors import RATELIMIT_BURST, RATELIMIT_INTERVAL_S

#: Where the mark is kept in the guest (one at a time: the rule's windows do not overlap).
MARK_FILE = "/tmp/vioc-kernel-log.mark"
#: How many times nvme_core retries a failed command (a module parameter, default 5).
NVME_MAX_RETRIES = "/sys/module/nvme_core/parameters/max_retries"
#: The line between the mark and the log in ``log_command``'s output (no kernel line holds it).
MARK_END = "--vioconform-kernel-log--"


@dataclass(frozen=True)
class Timeouts:
    """The disk's command timeouts as its driver set them (None where the driver has none), and NVMe's retries."""

    scsi_timeout_s: float | None  # /sys/block/X/device/timeout (SCSI disks)
    io_timeout_ms: int | None  # /sys/block/X/queue/io_timeout (blk-mq drivers with a timeout handler)
    nvme_max_retries: int | None = None  # /sys/module/nvme_core/parameters/max_retries (where nvme_core is loaded)


class ErrorPath(GuestTool):
    name = "kernel log"
    programs = ("dmesg",)
    install_hint = "dmesg is part of util-linux (or busybox): install it in the image"

    def timeouts(self, disk: str) -> Timeouts:
        d = f"/sys/block/{valid_disk(disk)}"
        said = self._run(f"for f in {d}/device/timeout {d}/queue/io_timeout {NVME_MAX_RETRIES}; do "
                         'cat "$f" 2>/dev/null || echo -; done').stdout.split()
        scsi, io, nvme = [*said, "-", "-", "-"][:3]
        return Timeouts(float(scsi) if scsi != "-" else None, int(io) if io != "-" else None,
                        int(nvme) if nvme != "-" else None)

    def mark_command(self, room_for: int = 0) -> str:
        """A command that keeps the kernel log's last line as the mark; with ``room_for`` N, first waits
        (at most the rate limit's interval) until the kernel has printed few enough block-layer error
        lines in the last interval that N more are all printed (model/parse/kernel_io_errors.py: at most
        RATELIMIT_BURST in RATELIMIT_INTERVAL_S, for all disks together)."""
        mark = f"dmesg | tail -n 1 > {MARK_FILE}"
        if room_for <= 0:
            return mark
        allowed = RATELIMIT_BURST - room_for
        # printk's clock and /proc/uptime agree within milliseconds in a VM; half a second more for that
        window = RATELIMIT_INTERVAL_S + 0.5
        count = ("dmesg | awk -v now=\"$(cut -d' ' -f1 /proc/uptime)\" "
                 f"'match($0, /^\\[ *[0-9]+\\.[0-9]+\\]/) && index($0, \" error, dev \") "
                 f"{{ if (substr($0, 2, RLENGTH - 2) + 0 > now - {window:g}) n++ }} END {{ print n + 0 }}'")
        tries = int(window / 0.5) + 1
        return (f"i=0; while [ $i -lt {tries} ] && [ \"$({count})\" -gt {allowed} ]; do sleep 0.5 2>/dev/null || usleep 500000; i=$((i + 1)); "
                f"done; {mark}")

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
