"""The resize rule's judgement on figures from real runs (the embedded Debian 6.1 guest under TCG,
QEMU 7.2's block_resize on the 1 GiB scratch disk grown by 64 MiB and shrunk back, fio randrw
through both: virtio-blk saw the grow 0.108 s and the shrink 0.09 s after the host's call returned;
virtio-scsi 0.049 s and 0.137 s; then ext4 over the whole disk grown online by resize2fs in 0.10-0.16 s,
statfs's total going from 1020702720 to 1085706240 bytes on both), and on the cases that must fail."""

from __future__ import annotations

import dataclasses

from model.parse.filesystem import FsSize
from model.rules.resize import GROW_BYTES, FsGrow, ResizeRun, ResizeStep, bound_for, judge_resize, mechanism

GIB = 1 << 30
#: the kernel's lines after each step, as the runs printed them
BLK_GROW_LOG = ("<5>[    6.296728] virtio_blk virtio4: [vdb] new size: 2228224 512-byte logical blocks (1.14 GB/1.06 GiB)",
                "<6>[    6.296817] vdb: detected capacity change from 2097152 to 2228224")
SCSI_GROW_LOG = ("<4>[    4.928694] sd 0:0:1:0: Capacity data has changed",
                 "<5>[    4.929176] sd 0:0:1:0: [sdb] 2228224 512-byte logical blocks: (1.14 GB/1.06 GiB)",
                 "<5>[    4.929191] sd 0:0:1:0: [sdb] 4096-byte physical blocks",
                 "<6>[    4.929370] sdb: detected capacity change from 2097152 to 2228224")


def _run(driver: str, disk: str, grow_seen: float | None, shrink_seen: float | None, grow_guest: int = GIB + GROW_BYTES,
         errors: int = 0, log: tuple[str, ...] = BLK_GROW_LOG) -> ResizeRun:
    told = mechanism(log, disk)
    return ResizeRun(disk, driver, (
        ResizeStep("grow", GIB, GIB + GROW_BYTES, 0.004, grow_guest, grow_seen, told),
        ResizeStep("shrink", GIB + GROW_BYTES, GIB, 0.003, GIB, shrink_seen, told)), errors,
        "fio: io_u error on file /dev/vdb: Input/output error" if errors else "")


def test_the_measured_healthy_runs_pass_and_name_the_drivers_notice() -> None:
    blk = judge_resize(_run("virtio_blk", "vdb", 0.108, 0.09), bound_for("virtio_blk"))
    scsi = judge_resize(_run("sd", "sdb", 0.049, 0.137, log=SCSI_GROW_LOG), bound_for("sd"))
    assert blk.passed and scsi.passed, (blk.explain(), scsi.explain())
    assert str(blk.properties["grow_mechanism"]).startswith("virtio_blk's config-change interrupt: ")
    # sd's revalidation, not the unit attention's line (which alone re-reads nothing)
    assert str(scsi.properties["grow_mechanism"]).startswith("sd's revalidation (READ CAPACITY)")
    assert blk.properties["grow_guest_seen_s"] == 0.108 and blk.properties["resize_bound_s"] == 5.0


def test_a_guest_that_never_sees_the_new_size_fails() -> None:
    v = judge_resize(_run("sd", "sdb", None, 0.05, grow_guest=GIB, log=SCSI_GROW_LOG[:1]), bound_for("sd"))
    assert not v.passed
    assert v.problems[0].startswith("grow: the guest still saw 1073741824 bytes 5.0 s after the host grew the disk "
                                    "from 1073741824 to 1140850688 bytes"), v.problems
    assert "grow_guest_seen_s" not in v.properties
    assert str(v.properties["grow_mechanism"]).startswith("a SCSI unit attention 2a/09 only")


def test_another_size_than_the_host_configured_fails() -> None:
    v = judge_resize(_run("virtio_blk", "vdb", None, 0.05, grow_guest=GIB + GROW_BYTES // 2), bound_for("virtio_blk"))
    assert v.problems == (("grow: the guest saw 1107296256 bytes after the host grew the disk from 1073741824 to "
                          "1140850688 bytes: another size than the host configured"),)


def test_a_size_seen_late_and_io_that_failed_fail() -> None:
    late = judge_resize(_run("virtio_blk", "vdb", 0.108, 5.6), bound_for("virtio_blk"))
    assert late.problems == (("shrink: the guest saw the new size 5.60 s after the host shrank the disk, beyond the "
                             "bound of 5.0 s (measured on virtio_blk (SEEN_BOUND_S))"),)
    failed = judge_resize(_run("virtio_blk", "vdb", 0.108, 0.09, errors=1), bound_for("virtio_blk"))
    assert len(failed.problems) == 1 and failed.problems[0].startswith("fio saw 1 error(s) while the host resized")


def test_an_unmeasured_driver_gets_the_default_bound_and_says_so() -> None:
    b = bound_for("ata")
    assert b.seconds == 5.0 and "ata not measured" in b.source
    assert mechanism(("<6>[ 1.0] sdc: detected capacity change from 1 to 2",), "sdc") is not None
    assert mechanism(("<6>[ 1.0] sdc: detected capacity change from 1 to 2",), "sdb") is None
    assert dataclasses.replace(_run("sd", "sdb", 0.1, 0.1), steps=()).steps == ()


def test_a_host_that_cannot_shrink_leaves_a_grow_only_run_that_passes_and_says_the_disk_stays_grown() -> None:
    """vSphere only grows a disk: the suite's shrink back is refused, the grow is what is judged."""
    grown = dataclasses.replace(_run("sd", "sdb", 0.2, None, log=SCSI_GROW_LOG), not_shrunk=(
        "vSphere cannot shrink a virtual disk: disk scsi1:1 of VM vioconform-x-g is 1140850688 bytes and 1073741824 "
        "were asked; it only grows one"))
    grown = dataclasses.replace(grown, steps=grown.steps[:1])
    v = judge_resize(grown, bound_for("sd"))
    assert v.passed, v.explain()
    assert ("shrink: not done (vSphere cannot shrink a virtual disk: disk scsi1:1 of VM vioconform-x-g is 1140850688 "
            "bytes and 1073741824 were asked; it only grows one); the disk keeps its grown size for the rest of the run"
            ) in v.lines
    assert "shrink_host_to_bytes" not in v.properties and v.properties["grow_host_to_bytes"] == GIB + GROW_BYTES
    # a run that shrank says nothing of it
    assert not any("not done" in line for line in judge_resize(_run("sd", "sdb", 0.2, 0.1), bound_for("sd")).lines)


#: statfs of ext4 over the 1 GiB disk, and after resize2fs grew it into the disk's 64 MiB more
BEFORE = FsSize(4096, 249195, 249189, 231986)
AFTER = FsSize(4096, 265065, 265059, 248212)
GROWN = FsGrow(BEFORE, AFTER, GIB + GROW_BYTES, "", GIB + GROW_BYTES, 0.131)


def test_the_filesystem_grown_online_passes_with_its_numbers() -> None:
    v = judge_resize(dataclasses.replace(_run("virtio_blk", "vdb", 0.108, 0.09), fs=GROWN), bound_for("virtio_blk"))
    assert v.passed, v.problems
    assert (v.properties["fs_grow_before_bytes"], v.properties["fs_grow_after_bytes"]) == (1020702720, 1085706240)
    assert v.properties["fs_grow_s"] == 0.131 and v.properties["fs_grow_resize2fs_bytes"] == GIB + GROW_BYTES
    assert "statfs total 1020702720 -> 1085706240 bytes (+65003520; the disk grew by 67108864)" in v.explain()
    assert v.hint is None


def test_a_refused_online_grow_fails_with_its_words_and_blames_the_guest() -> None:
    refused = FsGrow(BEFORE, None, GIB + GROW_BYTES, "resize2fs: Permission denied to resize filesystem", None, 0.02)
    v = judge_resize(dataclasses.replace(_run("virtio_blk", "vdb", 0.108, 0.09), fs=refused), bound_for("virtio_blk"))
    assert v.problems == (("online filesystem grow: resize2fs on the mounted ext4 of vdb (the disk now 1140850688 bytes) "
                           "failed: resize2fs: Permission denied to resize filesystem"),)
    assert v.hint is not None and v.hint.layer == "guest driver" and "resize2fs said" in v.hint.reason
    assert v.properties["fs_grow_ok"] == 0 and "fs_grow_after_bytes" not in v.properties


def test_a_filesystem_that_did_not_take_the_new_space_fails() -> None:
    half = FsGrow(BEFORE, FsSize(4096, BEFORE.total_blocks + 4096, 0, 0), GIB + GROW_BYTES, "", GIB + GROW_BYTES, 0.1)
    v = judge_resize(dataclasses.replace(_run("virtio_blk", "vdb", 0.108, 0.09), fs=half), bound_for("virtio_blk"))
    assert "statfs shows the filesystem 16777216 bytes larger, less than the 63753420 bytes" in v.problems[0]


def test_the_online_grow_is_not_tried_where_the_guest_never_saw_the_disk_grow() -> None:
    unseen = FsGrow(None, None, GIB, not_run="the guest never saw the disk grow (above)")
    v = judge_resize(dataclasses.replace(_run("sd", "sdb", None, 0.05, grow_guest=GIB, log=SCSI_GROW_LOG[:1]), fs=unseen),
                     bound_for("sd"))
    assert len(v.problems) == 1 and v.notes == (("online filesystem grow not tried: the guest never saw the disk grow "
                                                "(above)"),)
    assert not any(k.startswith("fs_grow") for k in v.properties)
