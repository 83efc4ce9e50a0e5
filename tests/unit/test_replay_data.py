"""The replays of the rules that read the disk's data on the host (replay/rules/data_integrity.py):
their judges on recorded real replays (the guest's console and what the host read of the replay's
backing file), their jobs and host actions as the bundle's configuration asks."""

from __future__ import annotations

import gzip
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from model.faults import LBA_SHIFT_SECTORS
from model.rules.data_integrity import SHIFT_TARGET, Region, fio_args, plan_for
from replay.main import guest_outputs
from replay.qemu import Boot, CannotTest, replay_line
from replay.qmp import Qmp, QmpError
from replay.rules import RULES, Replayed
from replay.rules import data_integrity as replay_di

DATA = Path(__file__).resolve().parents[1] / "data" / "replay"
#: The bundle's configuration as the recorded replays had it (what the rule's replay reads of it).
CONFIG: dict[str, object] = {"host_ref": "ua-vioc-dut01", "measure": {"inject": []},
                             "probed_limits": {"logical_block_size": 512}}
SHIFTED = {**CONFIG, "measure": {"inject": ["lba-shift"]}}


def recorded(name: str, tmp_path: Path, config: dict[str, object], jobs: Sequence[str]) -> Replayed:
    """A recorded replay: its console's lines as one boot gave them (``@OUT@``: its output directory, where
    the host kept what it read of the backing file), those files unpacked into ``tmp_path``."""
    for kept in DATA.glob(f"{name}.*.gz"):
        part = kept.name.removeprefix(f"{name}.").removesuffix(".gz")
        if part != "console":
            (tmp_path / f"dut1.img.{part}").write_bytes(gzip.decompress(kept.read_bytes()))
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
    """QEMU's monitor answering ``query-block`` with ``block`` (no socket)."""

    def __init__(self, block: list[dict[str, Any]]) -> None:
        super().__init__(Path("/nonexistent"))
        self.block = block

    def execute(self, command: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        assert command == "query-block"
        return {"return": self.block}


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

