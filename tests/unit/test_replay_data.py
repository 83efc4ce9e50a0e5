"""The replays of the rules that read the disk's file on the host (replay/rules/data_integrity.py,
discard.py, backing_file.py): their judges on recorded real replays (the guest's console and what the
host kept of the replay's backing file and QEMU's trace), their jobs and host actions as the bundle's
configuration asks."""

from __future__ import annotations

import gzip
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from model.faults import LBA_SHIFT_SECTORS
from model.rules.data_integrity import SHIFT_TARGET, Region, fio_args, plan_for
from model.rules.discard import MAX_SETTING, MOUNT, ZEROES_RANGE, ranges_for
from replay.main import guest_outputs
from replay.qemu import Boot, CannotTest, replay_line
from replay.qmp import Qmp, QmpError
from replay.rules import RULES, Replayed, backing_file
from replay.rules import data_integrity as replay_di
from replay.rules import discard as replay_dc

DATA = Path(__file__).resolve().parents[1] / "data" / "replay"
#: The bundle's configuration as the recorded replays had it (what the rule's replay reads of it).
CONFIG: dict[str, object] = {"host_ref": "ua-vioc-dut01", "measure": {"inject": []},
                             "probed_limits": {"logical_block_size": 512}}
SHIFTED = {**CONFIG, "measure": {"inject": ["lba-shift"]}}


def recorded(name: str, tmp_path: Path, config: dict[str, object], jobs: Sequence[str],
             kept_as: str = "dut1.img.{}") -> Replayed:
    """A recorded replay: its console's lines as one boot gave them (``@OUT@``: its output directory, where
    the host kept what it read), those files unpacked into ``tmp_path`` (each part's file named ``kept_as``)."""
    for kept in DATA.glob(f"{name}.*.gz"):
        part = kept.name.removeprefix(f"{name}.").removesuffix(".gz")
        if part != "console":
            (tmp_path / kept_as.format(part)).write_bytes(gzip.decompress(kept.read_bytes()))
    console = gzip.decompress((DATA / f"{name}.console.gz").read_bytes()).decode()
    b = Boot()
    for raw in console.replace("@OUT@", str(tmp_path)).splitlines():
        line = replay_line(raw)
        if line is not None:
            b.lines.append(line)
            word = line.split(" ")
            if word[0] in ("BEGIN", "END"):
                b.marks[f"{word[0]} {word[1]}"] = float(len(b.lines))
    device, outputs = guest_outputs(b, jobs)
    return Replayed(config, outputs, [], device)


def integrity(name: str, tmp_path: Path, config: dict[str, object]) -> Replayed:
    return recorded(name, tmp_path, config, [replay_di.JOB, replay_di.READ])


def test_a_healthy_replay_of_data_integrity_passes_on_the_replays_backing_file(tmp_path: Path) -> None:
    v = RULES["data-integrity"].judge(integrity("data-integrity-healthy-virtio-scsi", tmp_path, CONFIG))
    assert v.passed, v.explain()
    assert v.properties["host_sectors_checked"] == 8192 and v.properties["host_bad_sectors"] == 0
    assert v.properties["rand1k_writes"] == 512 and v.properties["guest_bytes_read"] == Region().length_bytes
    assert f"the backing file {tmp_path}/dut1.img on this machine" in v.explain()


def test_a_replay_through_the_shifted_target_fails_as_the_run_did(tmp_path: Path) -> None:
    v = RULES["data-integrity"].judge(integrity("data-integrity-lba-shift-virtio-scsi", tmp_path, SHIFTED))
    assert not v.passed
    assert v.properties["host_shift_sectors"] == LBA_SHIFT_SECTORS and v.properties["host_misplaced_sectors"] == 8184
    assert v.properties["host_lost_sectors"] == 8 and v.properties["host_outside_sectors"] == 8
    assert v.properties["guest_bad_sectors"] == 0  # the guest reads its own shifted blocks back whole
    assert f"device-mapper target {SHIFT_TARGET} (/dev/dm-0: linear over /dev/sda from sector 8)" in v.explain()
    assert "a shifted mapping" in v.problems[0]


def test_the_same_recording_judged_without_the_fault_cannot_be_judged(tmp_path: Path) -> None:
    """Without lba-shift the guest wrote to the disk itself: a console that says otherwise is not that run."""
    r = integrity("data-integrity-lba-shift-virtio-scsi", tmp_path, SHIFTED)
    without = Replayed(CONFIG, r.outputs, [], r.device)
    assert not RULES["data-integrity"].judge(without).passed  # the shift is in the file: the judge sees it
    gone = Replayed(SHIFTED, {**r.outputs, replay_di.READ: r.outputs[replay_di.JOB]}, [], r.device)
    with pytest.raises(CannotTest, match="could not read the backing file's range: no answer"):
        RULES["data-integrity"].judge(gone)


def test_the_data_integrity_jobs_are_the_runs_fio_plan_and_host_reads() -> None:
    first, after = replay_di.jobs(CONFIG)
    run_id = int(next(w for w in first.prepare.split() if w.startswith("run="))[4:], 16)
    assert list(first.args) == fio_args(replay_di.DISK_LINK, plan_for(512), Region(), run_id)[2:]
    assert first.target == replay_di.DISK_LINK and "dmsetup" not in first.prepare
    r = Region()
    assert f"host backing ua-vioc-dut01 {r.window_start_bytes} {r.guard_bytes} guard-before" in first.prepare
    assert f"host backing ua-vioc-dut01 {r.end_bytes} {r.guard_bytes} guard-after" in first.prepare
    assert after.args == () and f"host backing ua-vioc-dut01 {r.window_start_bytes} {r.window_bytes} window" in after.prepare
    shifted, after = replay_di.jobs({**SHIFTED, "probed_limits": {"logical_block_size": 4096}})
    assert shifted.target == "/dev/dm-0" and "--filename=/dev/dm-0" in shifted.args
    assert f'dmsetup create {SHIFT_TARGET} --table "0 $((s - {LBA_SHIFT_SECTORS})) linear /dev/$DEV 8"' in shifted.prepare
    assert "--name=rand1k-as-4k" in shifted.args and "--bs=1024" not in shifted.args
    assert f"dmsetup remove --retry {SHIFT_TARGET}" in after.prepare
    assert replay_di.jobs(CONFIG)[0].prepare != replay_di.jobs(CONFIG)[0].prepare  # a fresh run id each boot
    with pytest.raises(CannotTest, match="has no host_ref"):
        replay_di.jobs({})


class Monitor(Qmp):
    """QEMU's monitor answering ``query-block`` with ``block`` and other commands from ``replies`` (no
    socket); the commands it was given, in ``sent``."""

    def __init__(self, block: list[dict[str, Any]], replies: dict[str, Any] | None = None) -> None:
        super().__init__(Path("/nonexistent"))
        self.block, self.replies = block, replies or {}
        self.sent: list[tuple[str, dict[str, Any] | None]] = []

    def execute(self, command: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        self.sent.append((command, arguments))
        return {"return": self.block if command == "query-block" else self.replies[command]}


def test_the_host_reads_the_disks_own_file_found_through_query_block_and_keeps_it(tmp_path: Path) -> None:
    disk = tmp_path / "dut1.img"
    disk.write_bytes(bytes(range(256)) * 16)
    block = [{"device": "", "qdev": "ua-vioc-dut00", "inserted": {"drv": "raw", "file": str(tmp_path / "dut0.img")}},
             {"device": "", "qdev": "/machine/peripheral/ua-vioc-dut01/virtio-backend",
              "inserted": {"drv": "raw", "file": str(disk)}}]
    kept = Path(replay_di.backing(Monitor(block), ["ua-vioc-dut01", "512", "1024", "window"]))
    assert kept == tmp_path / "dut1.img.window" and kept.read_bytes() == disk.read_bytes()[512:1536]
    past = Path(replay_di.backing(Monitor(block), ["ua-vioc-dut01", "4000", "200", "end"]))
    assert past.read_bytes() == disk.read_bytes()[4000:] + bytes(104)  # past the file's end: zeros
    with pytest.raises(QmpError, match="lists no disk ua-vioc-dut02"):
        replay_di.backing(Monitor(block), ["ua-vioc-dut02", "0", "1", "x"])
    block[1] = {**block[1], "inserted": {"drv": "qcow2", "file": str(disk)}}
    with pytest.raises(QmpError, match="is a qcow2 image, not raw"):
        replay_di.backing(Monitor(block), ["ua-vioc-dut01", "0", "1", "x"])


def test_the_same_failure_in_a_replay_is_the_same_words_whatever_its_files_and_run_id() -> None:
    from bench.replay_faithfulness import failures
    run = "FAIL: host (the backing file /tmp/vioconform-run-i3/dut1.img on this machine): 8 lost; of run 10538b47"
    replayed = "FAIL: host (the backing file /tmp/o1/r1/dut1.img on this machine): 8 lost; of run e43dfea3"
    assert failures(run) == failures(replayed)
    assert failures(run) == {"FAIL: host (the backing file dutN.img on this machine): N lost; of run ID"}



# --- discard -------------------------------------------------------------------------------------------

def discarded(name: str, tmp_path: Path) -> Replayed:
    return recorded(name, tmp_path, CONFIG, [replay_dc.JOB], kept_as="qemu-trace.log.{}")


def test_a_healthy_replay_of_discard_passes_with_both_sides_of_each_range(tmp_path: Path) -> None:
    v = RULES["discard"].judge(discarded("discard-healthy-virtio-scsi", tmp_path))
    assert v.passed, v.explain()
    p = v.properties
    assert (p["aligned_host_bytes"], p["aligned_allocated_before_bytes"], p["aligned_allocated_after_bytes"]) == (1 << 20, 1 << 20, 0)
    assert p["beyond_max_guest_max_bytes"] == 262144 and p["beyond_max_host_requests"] == 8  # lowered as in the run
    assert p["fstrim_guest_trimmed_bytes"] == p["fstrim_host_bytes"] == 58650624
    assert (p["zeroes_host_zero_requests"], p["zeroes_host_zero_bytes"], p["zeroes_host_data_bytes"]) == (1, 1 << 20, 0)
    assert f"the backing file {tmp_path}/dut1.img on this machine" in v.lines[0]


def test_a_replay_with_discard_off_fails_as_the_run_did(tmp_path: Path) -> None:
    v = RULES["discard"].judge(discarded("discard-discard-off-virtio-blk", tmp_path))
    assert not v.passed and len(v.problems) == 4
    assert all("the guest could not discard it (blkdiscard: /dev/vdb: BLKDISCARD failed: Operation not supported)"
               in p and p.endswith("the guest passes no discard on") for p in v.problems[:3])
    assert "fstrim failed (fstrim: FITRIM: Operation not supported)" in v.problems[3]
    assert v.properties["discard_max_bytes"] == 0 and v.properties["aligned_host_requests"] == 0
    assert v.properties["zeroes_host_zero_bytes"] == 1 << 20  # write-zeroes does not depend on discard_max_bytes


def test_the_discard_jobs_are_the_runs_ranges_trim_and_zeroes(tmp_path: Path) -> None:
    from model.ext4_options import BLOCK_BYTES, MKFS_OPTIONS, MOUNT_OPTIONS
    (job,) = replay_dc.jobs(CONFIG)
    assert job.args == () and "$ref" not in job.prepare and "{" not in job.prepare.replace("seen() {", "")
    for r in ranges_for(512):
        assert f"{r.name} {r.offset_bytes} {r.length_bytes}" in job.prepare
    assert f"echo $LOW > /sys/block/$DEV/{MAX_SETTING}" in job.prepare and f"echo $MAX > /sys/block/$DEV/{MAX_SETTING}" in job.prepare
    assert f"-b {BLOCK_BYTES} -E {MKFS_OPTIONS.replace('nodiscard', 'discard')} " in job.prepare
    assert f"-o {MOUNT_OPTIONS} /dev/$DEV {MOUNT}" in job.prepare and f"fstrim -v {MOUNT}" in job.prepare
    assert f"-z -o {ZEROES_RANGE.offset_bytes} -l {ZEROES_RANGE.length_bytes} /dev/$DEV" in job.prepare
    (four_k,) = replay_dc.jobs({**CONFIG, "probed_limits": {"logical_block_size": 4096}})
    unaligned = ranges_for(4096)[1]
    assert f"seen unaligned {unaligned.offset_bytes} {unaligned.length_bytes}" in four_k.prepare
    with pytest.raises(CannotTest, match="has no host_ref"):
        replay_dc.jobs({})


def test_discards_host_actions_read_the_counters_the_allocation_and_the_trace(tmp_path: Path) -> None:
    disk = tmp_path / "dut1.img"
    with open(disk, "wb") as f:
        f.truncate(1 << 20)
        f.seek(64 << 10)
        f.write(b"x" * (64 << 10))
    block = [{"qdev": "ua-vioc-dut01", "inserted": {"drv": "raw", "file": str(disk)}}]
    stats = {"unmap_operations": 3, "unmap_bytes": 4096, "failed_unmap_operations": 0, "rd_operations": 0,
             "wr_operations": 2, "flush_operations": 0, "rd_bytes": 0, "wr_bytes": 8192, "rd_total_time_ns": 0,
             "wr_total_time_ns": 0, "flush_total_time_ns": 0}
    q = Monitor(block, {"query-blockstats": [{"device": "", "qdev": "ua-vioc-dut01", "stats": stats}],
                        "trace-event-get-state": [{"name": "blk_co_pwritev", "state": "disabled"}],
                        "trace-event-set-state": {}})
    assert backing_file.file_of(q, ["ua-vioc-dut01"]) == str(disk)
    assert backing_file.allocated(q, ["ua-vioc-dut01", "0", str(1 << 20)]) == str(64 << 10)
    assert json.loads(backing_file.unmapped(q, ["ua-vioc-dut01"]))["operations"] == 3
    assert replay_dc.split(q, ["4096", str(1 << 30), str(1 << 30)]) == "262144"
    assert replay_dc.split(q, ["4096", "0", str(1 << 30)]) == "none"
    log = tmp_path / replay_dc.TRACE_LOG
    log.write_text("1@1.0:scsi_req_parsed x\n")
    written, offset = replay_dc.trace_start(q, ["ua-vioc-dut01"]).split()
    assert (written, offset) == ("8192", str(log.stat().st_size))
    assert q.sent[-1] == ("trace-event-set-state", {"name": "blk_co_pwritev", "enable": True})
    with open(log, "a") as f:
        f.write("1@2.0:blk_co_pwritev blk 0x1 bs 0x2 offset 545259520 bytes 1048576 flags 0x2\n")
    stats["wr_bytes"] = 8192 + (1 << 20)
    grown, kept = replay_dc.trace_stop(q, ["ua-vioc-dut01", written, offset]).split()
    assert int(grown) == 1 << 20 and Path(kept).read_text().startswith("1@2.0:blk_co_pwritev")
    assert ("trace-event-set-state", {"name": "blk_co_pwritev", "enable": False}) in q.sent[-2:]
