"""The stall-tolerance rule's guest commands (guest/tools/stall_tolerance.py): after the stall, the kernel
log after the mark and the disk's read-only mounts in one command, each read as it was alone; a failing
log read still the error it was; and the mark ahead of fio's start, its failure raised. The script is run
with the host's ``sh`` and a stand-in ``dmesg`` and ``grep``-able mounts file."""

from __future__ import annotations

from pathlib import Path

import pytest

from guest.tools.stall_tolerance import MARK_LINE, Stall
from guest.tools.tool import GuestTools, rode_ok
from tests.unit.fake_shell import RidingFakeShell
from tests.unit.host_shell import with_stand_ins
from transport.ssh import GuestCommandError

LOG = ("<6>[   10.000000] virtio_blk virtio2: [vdb] 2097152 512-byte logical blocks\n"
       f"<5>[   20.000000] {MARK_LINE.format(token='ab12')[3:]}\n"
       "<3>[   41.905906] INFO: task fio:216 blocked for more than 1 seconds.\n")


def test_the_log_and_the_read_only_mounts_are_one_command(tmp_path: Path) -> None:
    shell = with_stand_ins(tmp_path, ("dmesg", "journalctl"))
    (shell.bin_dir / "out-dmesg").write_text(LOG)
    stall = GuestTools(shell).get(Stall)
    shell.commands.clear()
    lines, readonly = stall.after_run("ab12", "vdzz")
    assert lines == ["<3>[   41.905906] INFO: task fio:216 blocked for more than 1 seconds."]
    assert readonly == []  # the host has no /dev/vdzz mounted
    assert len(shell.commands) == 1 and "/proc/mounts" in shell.commands[0]
    assert stall.since("ab12") == lines
    (shell.bin_dir / "fail-dmesg").write_text("dmesg: read kernel buffer failed: Operation not permitted")
    (shell.bin_dir / "fail-journalctl").write_text("No journal files were found.")
    with pytest.raises(GuestCommandError, match=r"reading the guest's kernel log \(dmesg, else journalctl -k\)"):
        stall.after_run("ab12", "vdzz")


def test_the_mark_rides_ahead_of_the_next_command_and_its_failure_is_raised() -> None:
    refused = "sh: can't create /dev/kmsg: Permission denied"
    shell = RidingFakeShell(handlers=[(r"> /dev/kmsg$", lambda c: (1, "", refused)), (r"^fio ", lambda c: "")])
    token, rider = GuestTools(shell).get(Stall).mark_with_next()
    assert rider is not None and rider.pending and token in rider.script
    shell.run("fio --name=stall")
    assert shell.commands == ["fio --name=stall"] and shell.sent[0].startswith("+echo ")
    with pytest.raises(GuestCommandError, match=r"exit 1\): echo .* > /dev/kmsg\nstdout: sh: can't create /dev/kmsg"):
        rode_ok(rider)
