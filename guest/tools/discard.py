"""What the discard rule does in the guest: fill a byte range of a disk with data, discard a range
with ``blkdiscard`` (busybox's and util-linux's take the same ``-o``/``-l`` in bytes), zero one with
util-linux's ``blkdiscard -z`` and read it back, and read the disk's discard and write-zeroes limits
from ``/sys/block/<disk>/queue``.

Example::

    tool = disk.tool(Discard)
    tool.fill("/dev/vdb", 256 << 20, 8 << 20)
    done = tool.discard("/dev/vdb", 256 << 20, 1 << 20)  # a CommandResult: the guest's answer
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from guest.tools.sysfs import valid_disk
from guest.tools.tool import GuestTool
from model.rules.discard import FILL_BLOCK_BYTES, DiscardLimits
from transport.ssh import CommandResult

#: What ``zero``'s command says where no blkdiscard of the guest can zero (busybox's has no -z).
NO_ZEROOUT = "no blkdiscard with -z (--zeroout) on PATH: util-linux's blkdiscard zeroes, busybox's cannot"
NO_ZEROOUT_STATUS = 127
NONZERO_MARK = "VIOC-NONZERO"


def _blocks(offset_bytes: int, length_bytes: int) -> tuple[int, int]:
    """The range in FILL_BLOCK_BYTES blocks (dd's seek or skip, and count); ValueError unless it is whole blocks."""
    if offset_bytes % FILL_BLOCK_BYTES or length_bytes % FILL_BLOCK_BYTES:
        raise ValueError(f"range {offset_bytes}+{length_bytes} is not a multiple of {FILL_BLOCK_BYTES}")
    return offset_bytes // FILL_BLOCK_BYTES, length_bytes // FILL_BLOCK_BYTES


def _fill(device: str, offset_bytes: int, length_bytes: int) -> str:
    seek, count = _blocks(offset_bytes, length_bytes)
    return f"dd if=/dev/zero of={shlex.quote(device)} bs={FILL_BLOCK_BYTES} seek={seek} count={count} conv=fsync 2>/dev/null"


@dataclass(frozen=True)
class Zeroed:
    """The guest's write-zeroes of a range: its error ("" where it succeeded), why it could not ask
    ("" where it could), and how many bytes of the range read back other than zero (None: not read)."""

    error: str
    unable: str
    nonzero_bytes: int | None


class Discard(GuestTool):
    name = "discard"
    programs = ("blkdiscard",)
    install_hint = "blkdiscard is part of util-linux (or busybox): install it in the image"

    def limits(self, disk: str, fill: tuple[str, int, int] | None = None) -> DiscardLimits:
        """The disk's discard granularity and largest discard, as the guest's block layer has them now;
        ``fill`` (device, offset, length): then :meth:`fill` in the same guest command."""
        q = f"/sys/block/{valid_disk(disk)}/queue"
        then = "" if fill is None else f" && {_fill(*fill)}"
        said = self._run(f"cat {q}/discard_granularity {q}/discard_max_bytes {q}/discard_max_hw_bytes{then}",
                         timeout_s=120).stdout.split()
        granularity, max_bytes, max_hw = (int(v) for v in said[:3])
        return DiscardLimits(granularity, max_bytes, max_hw)

    def fill(self, device: str, offset_bytes: int, length_bytes: int) -> None:
        """Write data over ``[offset, offset + length)`` of ``device`` (both multiples of FILL_BLOCK_BYTES)
        and make it reach the device, so that the host's file holds blocks there."""
        self._run(_fill(device, offset_bytes, length_bytes), timeout_s=120)

    def discard(self, device: str, offset_bytes: int, length_bytes: int) -> CommandResult:
        """``blkdiscard`` of the range: its result as the guest answered (not checked: a refusal is a finding)."""
        return self._run(f"blkdiscard -o {offset_bytes} -l {length_bytes} {shlex.quote(device)}", check=False,
                         timeout_s=120)

    def prepare_zeroes(self, disk: str, device: str, offset_bytes: int, length_bytes: int) -> int:
        """The disk's ``queue/write_zeroes_max_bytes`` (0: the device does not advertise write-zeroes) and,
        where it is above 0, data that is not zeroes written over the range (FILL_BLOCK_BYTES multiples,
        O_DIRECT) for write-zeroes to clear: one guest command."""
        seek, count = _blocks(offset_bytes, length_bytes)
        said = self._run(
            f"m=$(cat /sys/block/{valid_disk(disk)}/queue/write_zeroes_max_bytes) && echo $m && "
            f"if [ \"$m\" -gt 0 ]; then tr '\\0' 'Z' </dev/zero | dd of={shlex.quote(device)} bs={FILL_BLOCK_BYTES} "
            f"seek={seek} count={count} iflag=fullblock "
            "oflag=direct 2>/dev/null; fi", timeout_s=120).stdout
        return int(said.split()[0])

    def zero(self, device: str, offset_bytes: int, length_bytes: int) -> Zeroed:
        """``blkdiscard -z`` of the range (BLKZEROOUT) by the first blkdiscard on PATH that has ``-z``
        (util-linux's; called by its path, since a busybox shell runs its own applet for a bare name),
        then the range read back (O_DIRECT): one guest command."""
        seek, count = _blocks(offset_bytes, length_bytes)
        dev = shlex.quote(device)
        done = self._run(
            'b=; for d in $(echo "$PATH" | tr : " "); do if [ -x "$d/blkdiscard" ] && "$d/blkdiscard" -h 2>&1 | '
            'grep -q zeroout; then b="$d/blkdiscard"; break; fi; done; '
            f'[ -n "$b" ] || {{ echo "{NO_ZEROOUT}" >&2; exit {NO_ZEROOUT_STATUS}; }}; '
            f'"$b" -z -o {offset_bytes} -l {length_bytes} {dev} || exit $?; '
            f"echo {NONZERO_MARK} $(dd if={dev} bs={FILL_BLOCK_BYTES} skip={seek} "
            f"count={count} iflag=direct 2>/dev/null | tr -d '\\0' | wc -c)",
            check=False, timeout_s=120)
        if done.exit_status == NO_ZEROOUT_STATUS and NO_ZEROOUT in done.stderr:
            return Zeroed("", NO_ZEROOUT, None)
        if not done.ok:
            return Zeroed(done.error_line(), "", None)
        words = done.stdout.split()
        return Zeroed("", "", int(words[words.index(NONZERO_MARK) + 1]))
