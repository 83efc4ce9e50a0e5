"""buffered-direct's and multi-queue's replays (replay/rules/buffered_direct.py, multi_queue.py): their jobs
follow the bundle's configuration, buffered-direct judges against the baseline the bundle carries (what the
run compared with: fixtures/reproducer_baseline.py), and both judge what a real replay recorded
(tests/data/replay/) with the rules' own judges."""

from __future__ import annotations

import gzip
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from fixtures.reproducer_baseline import baseline_file, stored_baseline
from fixtures.reproducer_files import configuration
from model.across.moves import Series
from model.parse.qemutrace import TracedRequest, parse_qemu_trace
from model.rules.buffered_direct import DEFAULT_REPEATS, RegimeSample, RegimeSeries, merge_baseline
from replay import main as cli
from replay.qemu import Boot, CannotTest, replay_line
from replay.rules import RULES, JobOutput, Replayed
from replay.rules.buffered_direct import in_flight_per_second
from reports.store.baseline import StoredBaseline
from reports.store.engine import StoredRun

DATA = Path(__file__).resolve().parents[1] / "data" / "replay"
CONFIG_ID = "libvirt:virtio-scsi:latency5ms"
MIB = 1 << 20


def test_buffered_direct_runs_the_runs_copies_each_after_a_cache_drop() -> None:
    jobs = RULES["buffered-direct"].jobs({"measure": {"repeats": 3, "window_s": 3.0}})
    assert [j.name for j in jobs] == ["buffered0", "buffered1", "buffered2", "direct0", "direct1", "direct2"]
    assert {"--rw=read", "--bs=1048576", "--iodepth=1", "--ioengine=psync", "--direct=0", "--runtime=4.5s",
            "--time_based"} <= set(jobs[0].args)
    assert "--direct=1" in jobs[3].args
    assert all("echo 3 > /proc/sys/vm/drop_caches" in j.prepare for j in jobs)
    assert len(RULES["buffered-direct"].jobs({})) == 2 * DEFAULT_REPEATS


def test_the_requests_in_flight_each_second_are_the_time_they_spent_in_it() -> None:
    # one request the whole first second, two overlapping halves of the second, one across both
    requests = [TracedRequest(10_000_000, 11_000_000, False, False, 0, MIB, 1),
                TracedRequest(11_000_000, 11_500_000, False, False, 0, MIB, 1),
                TracedRequest(11_250_000, 11_750_000, False, False, 0, MIB, 2),
                TracedRequest(10_500_000, 11_500_000, False, False, 0, MIB, 2)]
    assert in_flight_per_second(requests, 10.0, 2.0) == [1.5, 1.5]
    assert in_flight_per_second(requests, 10.0, 0.5) == [1.0]


def _copies(size: int, depth_us: int = 5000) -> tuple[dict[str, JobOutput], list[TracedRequest]]:
    """Two buffered and two direct copies of 3 s each (a 1 s ramp, a 2 s window), back to back: one
    request of ``size`` at a time, each ``depth_us`` long, one every 10 ms (0.5 in flight)."""
    outputs, requests = {}, []
    for k, job in enumerate(("buffered0", "buffered1", "direct0", "direct1")):
        begin = 100.0 + 10 * k
        outputs[job] = JobOutput({"fio": "{}"}, begin, begin + 3.2, 0)
        length = size if job.startswith("buffered") else MIB
        requests += [TracedRequest(int(begin * 1e6) + i * 10_000, int(begin * 1e6) + i * 10_000 + depth_us, False, False,
                                   i * 2048, length, 1) for i in range(300)]
    return outputs, requests


def _series(request_bytes: float, depth: float) -> dict[str, RegimeSeries]:
    return {m: RegimeSeries(m, (RegimeSample(request_bytes, depth), RegimeSample(request_bytes, depth)))
            for m in ("buffered", "direct")}


def _carried(tmp_path: Path, request_bytes: float = MIB, depth: float = 0.5) -> dict[str, object]:
    """configuration.json's baseline_file as a run with --baseline FILE writes it."""
    path = tmp_path / "base.json"
    path.write_text(merge_baseline(None, CONFIG_ID, _series(request_bytes, depth), {}))
    carried = baseline_file(path, "buffered-direct", CONFIG_ID)
    assert carried is not None
    return {"measure": {"repeats": 2, "window_s": 2.0}, "baseline_file": carried}


def test_buffered_direct_judges_the_copies_against_the_baseline_the_bundle_carries(tmp_path: Path) -> None:
    config = _carried(tmp_path)
    healthy = RULES["buffered-direct"].judge(Replayed(config, *_copies(MIB), "sda"))
    assert healthy.passed, healthy.explain()
    assert healthy.properties["buffered_request_bytes_median"] == MIB
    assert healthy.properties["buffered_depth_median"] == 0.5
    assert healthy.properties["baseline"] == str(tmp_path / "base.json")  # named as the run's verdict named it
    faulted = RULES["buffered-direct"].judge(Replayed(config, *_copies(4096), "sda"))
    assert not faulted.passed
    assert faulted.problems == ((f"buffered copy: host request size 4 KiB against 1024 KiB in the baseline "
                                f"({tmp_path / 'base.json'}); the noise allows 256 KiB (spreads of both runs, at "
                                "least 25%)"),)


def test_the_baselines_allowance_is_the_runs(tmp_path: Path) -> None:
    """A baseline whose copies spread widely allows what the run allowed: the same copies pass against it."""
    wide = tmp_path / "wide.json"
    wide.write_text(merge_baseline(None, CONFIG_ID, {m: RegimeSeries(m, (RegimeSample(MIB, 0.5), RegimeSample(MIB, 2.5)))
                                                   for m in ("buffered", "direct")}, {}))
    config = {"measure": {"window_s": 2.0}, "baseline_file": baseline_file(wide, "buffered-direct", CONFIG_ID)}
    outputs, requests = _copies(MIB, depth_us=9_000)  # 0.9 in flight: 0.6 from the baseline's median of 1.5
    verdict = RULES["buffered-direct"].judge(Replayed(config, outputs, requests, "sda"))
    assert verdict.passed, verdict.explain()
    assert verdict.properties["buffered_depth_allowed_change"] == 2.0


def test_a_bundle_without_the_runs_baseline_cannot_judge_buffered_direct() -> None:
    with pytest.raises(CannotTest, match="carries no baseline"):
        RULES["buffered-direct"].judge(Replayed({"measure": {"repeats": 2}}, *_copies(MIB), "sda"))
    with pytest.raises(CannotTest, match="baseline_file holds no copies"):
        RULES["buffered-direct"].judge(Replayed({"baseline_file": {"source": "x"}}, *_copies(MIB), "sda"))


def test_the_baseline_file_is_carried_only_for_buffered_direct_and_only_where_the_run_had_one(tmp_path: Path) -> None:
    assert baseline_file(None, "buffered-direct", CONFIG_ID) is None
    path = tmp_path / "base.json"
    path.write_text(merge_baseline(None, CONFIG_ID, _series(MIB, 1.0), {}))
    assert baseline_file(path, "queue-depth", CONFIG_ID) is None
    carried = baseline_file(path, "buffered-direct", CONFIG_ID)
    assert carried == {"source": str(path), "series": json.loads(path.read_text())["configs"][CONFIG_ID]}


def _stored(series: dict[str, Series] | None) -> StoredBaseline:
    run = StoredRun(7, "/tmp/results-7", None, None, {}, {}, "", True)
    return StoredBaseline(run, "sqlite://", {("buffered-direct", CONFIG_ID): series} if series is not None else {})


def test_a_stored_baseline_is_carried_and_compared_as_the_run_compared_it() -> None:
    before = {f"{m}_request_bytes_median": Series("bytes", "higher-better", (float(MIB), float(MIB)))
              for m in ("buffered", "direct")}
    carried = stored_baseline(_stored(before), "buffered-direct", CONFIG_ID)
    assert carried is not None and carried["source"] == "run 7 (/tmp/results-7)" and carried["missing"] == ""
    config = {"measure": {"window_s": 2.0}, "stored_baseline": json.loads(json.dumps(carried))}
    healthy = RULES["buffered-direct"].judge(Replayed(config, *_copies(MIB), "sda"))
    assert healthy.passed and healthy.properties["baseline_metrics_judged"] == 2, healthy.explain()
    faulted = RULES["buffered-direct"].judge(Replayed(config, *_copies(4096), "sda"))
    assert [p.split(":")[0] for p in faulted.problems] == ["worse than the baseline run 7 (/tmp/results-7)"]
    assert "buffered_request_bytes_median" in faulted.problems[0]


def test_a_stored_baseline_without_this_configuration_fails_nothing_and_passes_nothing() -> None:
    carried = stored_baseline(_stored(None), "buffered-direct", CONFIG_ID)
    assert carried is not None and carried["series"] is None and "no baseline for buffered-direct" in str(carried["missing"])
    with pytest.raises(CannotTest, match="would have ended in an ERROR"):
        RULES["buffered-direct"].judge(Replayed({"stored_baseline": carried}, *_copies(MIB), "sda"))
    with pytest.raises(CannotTest, match="stored_baseline could not be read"):
        RULES["buffered-direct"].judge(Replayed({"stored_baseline": {"source": "x", "series": {"a": 1}}},
                                                *_copies(MIB), "sda"))
    assert stored_baseline(None, "buffered-direct", CONFIG_ID) is None


# --- judging a recorded replay --------------------------------------------------------------------------

def _recorded(name: str, trace: bool = True) -> Replayed:
    """A real replay's guest lines, job marks and QEMU trace (tests/data/replay/<name>.*), with the
    configuration keys of its bundle the judge reads."""
    config = json.loads((DATA / f"{name}.configuration.json").read_text())
    lines = [x for x in map(replay_line, (DATA / f"{name}.console.log").read_text().splitlines()) if x is not None]
    b = Boot(lines, json.loads((DATA / f"{name}.marks.json").read_text()), 0)
    device, outputs = cli.guest_outputs(b, [j.name for j in RULES[config["rule"]].jobs(config)])
    requests = []
    if trace:
        with gzip.open(DATA / f"{name}.qemu-trace.log.gz", "rt") as f:
            requests = parse_qemu_trace(f.read())
    limits = "\n".join(line.removeprefix("disk limits ") for line in lines if line.startswith("disk limits "))
    return Replayed(config, outputs, requests, device, limits_text=limits)


def test_a_recorded_healthy_buffered_direct_replay_passes_against_the_runs_baseline() -> None:
    verdict = RULES["buffered-direct"].judge(_recorded("buffered-direct-healthy-virtio-scsi"))
    assert verdict.passed, verdict.explain()
    p = verdict.properties
    assert (p["buffered_request_bytes_median"], p["direct_request_bytes_median"], p["buffered_runs"]) == (MIB, MIB, 2)
    assert (p["buffered_depth_median"], p["direct_depth_median"]) == (0.25, 0.62)
    assert p["baseline"] == "/tmp/rread-base.json"


def test_a_recorded_readahead_off_replay_fails_with_the_runs_words() -> None:
    replayed = _recorded("buffered-direct-readahead-off-virtio-scsi")
    verdict = RULES["buffered-direct"].judge(replayed)
    assert verdict.problems == (("buffered copy: host request size 4 KiB against 1024 KiB in the baseline "
                                "(/tmp/rread-base.json); the noise allows 256 KiB (spreads of both runs, at least 25%)"),)
    assert verdict.properties["buffered_request_bytes_median"] == 4096
    # the same copies against no baseline are not judged
    with pytest.raises(CannotTest, match="carries no baseline"):
        RULES["buffered-direct"].judge(replace(replayed, config={**replayed.config, "baseline_file": None}))


def test_a_recorded_healthy_multi_queue_replay_passes_with_the_rules_judge() -> None:
    verdict = RULES["multi-queue"].judge(_recorded("multi-queue-healthy-virtio-scsi", trace=False))
    assert verdict.passed, verdict.explain()
    p = verdict.properties
    assert (p["configured_queues"], p["guest_hw_queues"], p["vcpus"], p["online_cpus"]) == (2, 2, 2, 2)
    assert (p["queue0_count"], p["queue1_count"], p["queues_used"]) == (254, 275, 2)


def test_a_recorded_replay_on_an_emulator_giving_one_queue_fails_as_its_run_did() -> None:
    """The bundle of a run whose --emulator gave the virtio-scsi device one queue where libvirt asked for
    two: the replay ran that emulator again, and the guest set up one hardware queue."""
    replayed = _recorded("multi-queue-one-queue-emulator-virtio-scsi", trace=False)
    verdict = RULES["multi-queue"].judge(replayed)
    assert verdict.problems == (
        "the guest set up 1 hardware queue(s) for 2 configured and 2 vCPUs: the driver does not use the device's queues",
        ("one fio job ran on each of 2 online vCPU(s), but only 1 queue(s) carried at least 10% of the I/O "
        "(queue 0: 161 (100%)); expected 2"))
    assert replayed.config["emulator"] == "/tmp/rread-emu/qemu-one-queue"


def test_multi_queue_runs_one_job_per_online_cpu_for_the_runs_window() -> None:
    job, = RULES["multi-queue"].jobs({"measure": {"window_s": 3.0}})
    assert not job.args  # the guest counts its online CPUs: fio's command line is the preparation's
    assert "--numjobs=$N" in job.prepare and "--cpus_allowed=$ON" in job.prepare and "--runtime=4s" in job.prepare
    assert "--bs=4096" in job.prepare and "--iodepth=4" in job.prepare and "--rw=randread" in job.prepare


def test_multi_queue_cannot_judge_a_disk_with_one_queue_configured_or_no_virtio_device() -> None:
    replayed = _recorded("multi-queue-healthy-virtio-scsi", trace=False)
    limits = replayed.config["configured_limits"]
    assert isinstance(limits, dict)
    one = {**replayed.config, "configured_limits": {**limits, "queues": 1}}
    with pytest.raises(CannotTest, match="configured 1 queue"):
        RULES["multi-queue"].judge(replace(replayed, config=one))
    out = replayed.outputs["mq"]
    text = out.parts["prepared"].replace("/virtio1/", "/ata1/")
    with pytest.raises(CannotTest, match="not on a virtio device"):
        RULES["multi-queue"].judge(replace(replayed, outputs={"mq": replace(out, parts={"prepared": text})}))


def test_the_bundles_configuration_carries_a_baseline_only_where_the_run_had_one(tmp_path: Path) -> None:
    common: dict[str, Any] = {"test_id": CONFIG_ID, "rule": "buffered-direct", "backend": "libvirt", "controller": "virtio-scsi",
              "disk": {}, "kernel_name": "sda", "machine": "pc", "emulator": None, "accel": "tcg", "vcpus": 2,
              "memory_mib": 512, "kernel_cmdline": "", "measure": {}, "device_queue_depth": 128,
              "advertised_queue_depth": None, "trace_family": "scsi"}
    without = configuration(**common)
    assert "baseline_file" not in without and "stored_baseline" not in without and without["format"] == 1
    carried = _carried(tmp_path)["baseline_file"]
    assert isinstance(carried, dict)
    stored = stored_baseline(_stored(None), "buffered-direct", CONFIG_ID)
    written = configuration(**common, baseline_file=carried, stored_baseline=stored)
    assert written["baseline_file"] == carried and written["stored_baseline"] == stored
    assert {k: v for k, v in written.items() if k not in ("baseline_file", "stored_baseline")} == without


def test_a_recorded_readahead_off_replay_fails_against_the_stored_run_its_bundle_carries() -> None:
    """The bundle of a readahead-off run with --baseline RUN (a healthy stored run): the replay compares
    with the same series and says the run's three failures."""
    verdict = RULES["buffered-direct"].judge(_recorded("buffered-direct-readahead-off-stored-run-virtio-scsi"))
    source = "run 1 (/tmp/rread-s1), of another series (libvirt_local_virtio_scsi_lat5ms_embedded)"
    assert verdict.problems == tuple(f"worse than the baseline {source}: buffered_request_bytes_{s}: 1.04858e+06 -> 4096 "
                                     "bytes (-100%, worse)" for s in ("max", "median", "min"))
    assert verdict.properties["baseline_metrics_compared"] == 14
