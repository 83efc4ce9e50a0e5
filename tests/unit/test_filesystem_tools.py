"""What the filesystem tools print and how the rules read it (model/parse/filesystem.py,
model/parse/backend_writes.py), and the discard and resize rules' guest tools against a scripted shell
(guest/tools/ext4.py, guest/tools/discard.py) for the answers a healthy guest does not give: a refusal,
a guest whose blkdiscard cannot zero. The outputs are those of the embedded guest (busybox 1.35,
e2fsprogs 1.47, util-linux 2.38) and of QEMU 7.2's log trace backend, as the runs printed them."""

from __future__ import annotations

from pathlib import Path

import pytest

from guest.tools.discard import NO_ZEROOUT, NO_ZEROOUT_STATUS, Discard
from guest.tools.ext4 import Ext4, Resize2fs
from guest.tools.mkfs import Filesystem, FilesystemUnsupported
from guest.tools.tool import GuestTools
from model.errors import ParseError
from model.parse.backend_writes import BackendWrite, parse_backend_writes, writes_in
from model.parse.filesystem import FsSize, parse_fstrim, parse_resize2fs, parse_statfs
from tests.unit.fake_shell import FakeShell, RidingFakeShell
from tests.unit.host_shell import with_stand_ins
from transport.ssh import GuestCommandError

#: QEMU's trace log over the guest's `blkdiscard -z` of 1 MiB at 520 MiB on virtio-blk, then two 64 KiB
#: writes of data by dd elsewhere (flags 0x8 there: virtio-blk's registered buffers)
TRACE = """\
28583@1795719361.968374:blk_co_pwritev blk 0x55bec49d5d80 bs 0x55bec3b4a7f0 offset 545259520 bytes 1048576 flags 0x2
28583@1795719361.968418:bdrv_co_pwrite_zeroes bs 0x55bec3b444d0 offset 545259520 bytes 1048576 flags 0x0
28583@1795719363.432953:blk_co_pwritev blk 0x55bec49e3710 bs 0x55bec3b58b70 offset 550502400 bytes 65536 flags 0x8
28583@1795719363.433810:blk_co_pwritev blk 0x55bec49e3710 bs 0x55bec3b58b70 offset 550567936 bytes 65536 flags 0x8
"""
MIB = 1 << 20


def test_fstrim_lines_of_util_linux_and_busybox() -> None:
    assert parse_fstrim("/mnt/vioc-discard: 55.9 MiB (58650624 bytes) trimmed\n") == 58650624
    assert parse_fstrim("/mnt/vioc-discard: 58650624 bytes trimmed\n") == 58650624
    assert parse_fstrim("/mnt/x: 0 B (0 bytes) trimmed\n") == 0
    assert parse_fstrim("") is None  # without -v, or a refusal: it said nothing of what it trimmed
    assert parse_fstrim("fstrim: /mnt/x: the discard operation is not supported\n") is None


def test_statfs_numbers_are_the_block_size_then_total_free_and_available_blocks() -> None:
    """ext4 over 64 MiB: 14325 blocks of 4 KiB left after its inode tables, bitmaps and 4 MiB journal."""
    size = parse_statfs("4096 14325 14319 13173\n")
    assert size == FsSize(4096, 14325, 14319, 13173)
    assert (size.total_bytes, size.available_bytes) == (58675200, 53956608)
    with pytest.raises(ParseError, match=r"stat -f /mnt/x: expected four numbers .* got \"stat: can't read"):
        parse_statfs("stat: can't read file system information for '/mnt/x'", "stat -f /mnt/x")


def test_resize2fs_says_the_size_it_grew_to_or_why_not() -> None:
    grew = parse_resize2fs("resize2fs 1.47.0 (5-Feb-2023)\nFilesystem at /dev/vdb is mounted on /mnt/vioc-resize; "
                           "on-line resizing required\nold_desc_blocks = 1, new_desc_blocks = 1\nThe filesystem on "
                           "/dev/vdb is now 278528 (4k) blocks long.\n\n")
    assert (grew.blocks, grew.size_bytes, grew.nothing_to_do) == (278528, 1140850688, False)
    same = parse_resize2fs("resize2fs 1.47.0 (5-Feb-2023)\nThe filesystem is already 262144 (4k) blocks long.  "
                           "Nothing to do!\n")
    assert (same.size_bytes, same.nothing_to_do) == (1 << 30, True)
    refused = parse_resize2fs("resize2fs 1.47.0 (5-Feb-2023)\nFilesystem at /dev/loop0 is mounted on /tmp/hl-mnt; "
                              "on-line resizing required\nold_desc_blocks = 1, new_desc_blocks = 1\nresize2fs: "
                              "Permission denied to resize filesystem\n")
    assert (refused.size_bytes, refused.last_line) == (None, "resize2fs: Permission denied to resize filesystem")


def test_the_trace_tells_write_zeroes_from_writes_of_data_in_a_range() -> None:
    writes = parse_backend_writes(TRACE)
    assert writes == [BackendWrite(545259520, MIB, 0x2), BackendWrite(550502400, 65536, 0x8),
                      BackendWrite(550567936, 65536, 0x8)]
    seen = writes_in(writes, 545259520, MIB)
    assert (seen.zero_requests, seen.zero_bytes, seen.data_requests, seen.data_bytes) == (1, MIB, 0, 0)
    # a write that straddles the range's end counts with its bytes inside only
    assert writes_in(writes, 550502400 + 32768, 65536).data_bytes == 65536
    with pytest.raises(ParseError, match=r"line 1: blk_co_pwritev without QEMU 7\.2.s"):
        parse_backend_writes("1@2.000003:blk_co_pwritev blk 0x1 bs 0x2 offset 7\n", "qemu-trace.log")


def test_write_zeroes_needs_a_blkdiscard_with_z_and_reads_the_range_back() -> None:
    ok = FakeShell(handlers=[(r'"\$b" -z -o 545259520 -l 1048576 /dev/vdb', lambda c: "VIOC-NONZERO 0\n")])
    assert Discard(ok, GuestTools(ok)).zero("/dev/vdb", 545259520, MIB).nonzero_bytes == 0
    busybox = FakeShell(handlers=[(r"blkdiscard", lambda c: (NO_ZEROOUT_STATUS, "", NO_ZEROOUT + "\n"))])
    assert Discard(busybox, GuestTools(busybox)).zero("/dev/vdb", 545259520, MIB).unable == NO_ZEROOUT
    refused = FakeShell(handlers=[(r"blkdiscard", lambda c: (1, "", ("blkdiscard: /dev/vdb: BLKZEROOUT ioctl failed: "
                                                             "Input/output error\n")))])
    done = Discard(refused, GuestTools(refused)).zero("/dev/vdb", 545259520, MIB)
    assert (done.error, done.nonzero_bytes) == ("blkdiscard: /dev/vdb: BLKZEROOUT ioctl failed: Input/output error", None)
    with pytest.raises(ValueError, match="not a multiple of 65536"):
        Discard(ok, GuestTools(ok)).zero("/dev/vdb", 512, MIB)


def test_a_disk_without_write_zeroes_is_not_filled() -> None:
    shell = FakeShell(handlers=[(r"write_zeroes_max_bytes", lambda c: "0\n")])
    assert Discard(shell, GuestTools(shell)).prepare_zeroes("vdb", "/dev/vdb", 545259520, MIB) == 0
    assert "if [ \"$m\" -gt 0 ]; then" in shell.commands[0]


def test_a_refused_online_grow_is_the_guests_answer_with_its_words() -> None:
    said = ("resize2fs 1.47.0 (5-Feb-2023)\nresize2fs: Permission denied to resize filesystem\n"
            "VIOC-STATFS 4096 249195 249189 231986\n")
    shell = FakeShell(handlers=[(r"^resize2fs /dev/vdb 2>&1; s=\$\?", lambda c: (1, said, ""))])
    grown = Resize2fs(shell, GuestTools(shell)).grow("/dev/vdb", "/mnt/vioc-resize")
    assert not grown.ok and grown.size is None
    assert grown.said.endswith("resize2fs: Permission denied to resize filesystem")
    good = FakeShell(handlers=[(r"^resize2fs", lambda c: "The filesystem on /dev/vdb is now 278528 (4k) blocks long.\n"
                                                          "VIOC-STATFS 4096 265065 265059 248212\n")])
    assert Resize2fs(good, GuestTools(good)).grow("/dev/vdb", "/mnt/x").size == FsSize(4096, 265065, 265059, 248212)


def test_the_filesystem_is_made_mounted_and_taken_off_in_one_command_each() -> None:
    shell = FakeShell(handlers=[(r"mkfs\.ext4", lambda c: "4096 14325 14319 13173\n"), (r"^umount .*; dd", lambda c: "")])
    fs = Ext4(shell, GuestTools(shell))
    assert fs.make_mounted("/dev/vdb", "/mnt/vioc-discard", 64 * MIB, discard=True).total_bytes == 58675200
    fs.take_off("/dev/vdb", "/mnt/vioc-discard")
    made, off = shell.commands
    assert "-E discard,lazy_itable_init=1" in made and made.endswith("/dev/vdb 65536k && mkdir -p /mnt/vioc-discard "
                                                                     "&& mount -t ext4 -o noatime,noinit_itable /dev/vdb "
                                                                     "/mnt/vioc-discard && stat -f -c '%S %b %f %a' "
                                                                     "/mnt/vioc-discard")
    assert off.startswith("umount /mnt/vioc-discard 2>/dev/null; dd if=/dev/zero of=/dev/vdb bs=1048576 count=1")


def test_the_filesystem_is_made_mounted_and_laid_out_in_one_command_each_failure_its_own(tmp_path: Path) -> None:
    """alignment's filesystem: three steps, one round trip; a mount the kernel cannot do is still the skip's
    FilesystemUnsupported, a failing mkfs still the error that names mkfs; run with the host's sh."""
    shell = with_stand_ins(tmp_path, ("mke2fs", "mount", "dd", "sync"))
    fs = GuestTools(shell).get(Filesystem)
    mnt = tmp_path / "mnt"
    shell.commands.clear()
    fs.make_mounted_file("/dev/sdb1", 4096, str(mnt), f"{mnt}/data", 3 << 20)
    assert len(shell.commands) == 1 and mnt.is_dir()
    assert shell.log() == [
        "mke2fs -q -F -b 4096 /dev/sdb1", f"mount -o noatime /dev/sdb1 {mnt}", f"dd if=/dev/zero of={mnt}/data bs=1M count=3",
        "sync"]
    said = "mount: /mnt/vioc-align: unknown filesystem type 'ext2'."
    (shell.bin_dir / "fail-mount").write_text(said)
    with pytest.raises(FilesystemUnsupported, match=rf"^the guest's kernel \S+ cannot mount ext2 \({said}\)"):
        fs.make_mounted_file("/dev/sdb1", 4096, str(mnt), f"{mnt}/data", 3 << 20)
    (shell.bin_dir / "fail-mke2fs").write_text("mke2fs: No such file or directory while trying to determine size")
    with pytest.raises(GuestCommandError, match=r"^guest command failed \(exit 32\): mke2fs -q -F -b 4096 /dev/sdb1\n"
                                                r"stdout: \(empty\)\nstderr: mke2fs: No such file"):
        fs.make_mounted_file("/dev/sdb1", 4096, str(mnt), f"{mnt}/data", 3 << 20)
    (shell.bin_dir / "fail-mke2fs").write_text("")
    (shell.bin_dir / "fail-mount").write_text("mount: /dev/sdb1: can't read superblock")
    with pytest.raises(GuestCommandError, match=r"\(exit 32\): mkdir -p \S+ && mount -o noatime /dev/sdb1 .*\n"
                                                r"stdout: \(empty\)\nstderr: mount: /dev/sdb1: can't read superblock\n"
                                                r"mounting /dev/sdb1 \(ext2\)"):
        fs.make_mounted_file("/dev/sdb1", 4096, str(mnt), f"{mnt}/data", 3 << 20)


def test_an_unmount_whose_answer_nobody_reads_rides_with_the_next_command() -> None:
    shell = RidingFakeShell(has={"mke2fs"}, handlers=[(r"^umount ", lambda c: (1, "", "")), (r"^dd ", lambda c: "")])
    fs = GuestTools(shell).get(Filesystem)
    fs.unmount_with_next("/mnt/vioc-align")
    shell.run("dd if=/dev/zero of=/dev/sdb bs=1M count=1")
    assert shell.sent[-2:] == ["+umount /mnt/vioc-align 2>/dev/null", "dd if=/dev/zero of=/dev/sdb bs=1M count=1"]
    assert sum(c.startswith("umount") for c in shell.commands) == 0
    plain = FakeShell(has={"mke2fs"}, handlers=[(r"^umount ", lambda c: (1, "", ""))])
    GuestTools(plain).get(Filesystem).unmount_with_next("/mnt/x")  # a shell that cannot carry it: now
    assert plain.commands[-1] == "umount /mnt/x 2>/dev/null"
