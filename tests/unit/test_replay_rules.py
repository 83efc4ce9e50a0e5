"""The replay's rules (replay/rules/): one module each, found by name; their jobs are the run's (the
suites' constants), their judges the rules' own on what one boot gave; QEMU's counters over QMP."""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from model.device_limits import GuestLimits
from model.parse.qemutrace import TracedRequest
from model.rules import direct_io as model_direct_io
from model.rules import io_size as model_io_size
from model.rules import queue_depth as model_queue_depth
from replay import main as cli
from replay.guest_script import COUNTERS, Job, guest_script
from replay.qemu import Boot, CannotTest, boot
from replay.qmp import Qmp, QmpError
from replay.rules import RULES, JobOutput, Replayed, replay_rule
from replay.rules import direct_io as replay_direct_io
from replay.rules import io_size as replay_io_size
from replay.rules import queue_depth as replay_queue_depth
from replay.rules.evidence import counted, read_counters, window
from tests.unit.fake_monitor import fake_monitor

DATA = Path(__file__).resolve().parents[1] / "data"
SUITES = Path(__file__).resolve().parents[2] / "suites"
PROBED = GuestLimits("sda", 256, 1280, 32767, 512, 512, 0, "write back", 0, 1, 1, scsi_queue_depth=128,
                     can_queue=256, cmd_per_lun=128, driver="sd", max_segments=126)
LIMITS = "name=sda\nnr_requests=256\nmax_sectors_kb={kb}\nmax_hw_sectors_kb=32767\nlogical_block_size=512\n" \
         "physical_block_size=512\noptimal_io_size=0\nwrite_cache=write back\ndiscard_max_bytes=0\nrotational=1\n" \
         "max_segments=126\nnr_hw_queues=1\nscsi_queue_depth=128\ndriver=sd\n"


def test_each_module_of_replay_rules_that_declares_a_replay_is_a_rule_the_replay_judges() -> None:
    assert {"queue-depth", "io-size", "direct-io"} <= set(RULES)
    assert all(RULES[name].rule == name for name in RULES)


def test_the_replay_and_the_suite_take_their_figures_from_the_rules_module() -> None:
    """The replay carries no suite code: the figures its jobs share with the run's (a request size, a
    depth, a count) live in model/rules/ and neither copies them."""
    shared = {"BS_BYTES", "DEPTH", "WRITES", "REGION_BYTES"}
    for path in (*(SUITES / f"test_{m}.py" for m in ("queue_depth", "io_size", "direct_io")),
                 *(Path(m.__file__ or "") for m in (replay_queue_depth, replay_io_size, replay_direct_io))):
        tree = ast.parse(path.read_text())
        assigned = {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
        assert not assigned & shared, path
    assert {"BS_BYTES"} <= vars(model_queue_depth).keys() and {"DEPTH"} <= vars(model_io_size).keys()
    assert {"WRITES", "REGION_BYTES"} <= vars(model_direct_io).keys()


def test_the_replays_jobs_are_the_runs() -> None:
    jobs = replay_rule("direct-io").jobs({"host_ref": "ua-vioc-dut01"})
    assert [j.name for j in jobs] == ["direct1k", "direct4k", "dsync4k", "fsync4k"]
    assert all(j.counted == "ua-vioc-dut01" for j in jobs)  # the disk whose counters the host reads around each
    with pytest.raises(CannotTest, match="has no host_ref"):
        replay_rule("direct-io").jobs({})
    assert {"--bs=1024", "--iodepth=1", "--io_size=204800", "--size=67108864", "--randseed=1"} <= set(jobs[0].args)
    assert {"--sync=dsync", "--io_size=409600"} <= set(jobs[2].args)
    assert {"--direct=0", "--ioengine=psync", "--fsync=1"} <= set(jobs[3].args)
    io = replay_rule("io-size").jobs({"measure": {"window_s": 3.0}})
    assert {"--bs=1048576", "--iodepth=4", "--rw=randread", "--time_based", "--runtime=34s"} <= set(io[0].args)
    assert io[0].window_s == 3.0


def _io_size(length: int, max_sectors_kb: int) -> Replayed:
    out = JobOutput({"fio": (DATA / "fio-randread-qd32.json").read_text()}, 100.0, 110.0, 0)
    requests = [TracedRequest(int(101e6) + i * 1000, int(101e6) + i * 1000 + 500, False, False, i * 2048, length, 1)
                for i in range(200)] + [TracedRequest(int(50e6), int(50e6) + 9, False, False, 0, 4096, 1)]
    config = {"probed_limits": PROBED.__dict__, "configured_limits": {"queue_depth": 128}}
    return Replayed(config, {"io1m": out}, requests, "sda", limits_text=LIMITS.format(kb=max_sectors_kb))


def test_io_size_judges_the_traced_request_sizes_of_the_window_with_the_rules_judge() -> None:
    healthy = RULES["io-size"].judge(_io_size(1 << 20, 1280))
    assert healthy.passed, healthy.explain()
    assert healthy.properties["host_requests"] == 200  # the request before the window is not counted
    broken = RULES["io-size"].judge(_io_size(64 << 10, 64))
    assert not broken.passed
    assert ("each 1024 KiB I/O reached the host as 16.0 requests of 64 KiB; expected 1 request(s) of 1024 KiB"
            in broken.problems[0]) and "The guest caps requests at max_sectors_kb=64" in broken.problems[0]


def test_a_bundle_without_the_runs_limits_cannot_judge_io_size() -> None:
    r = _io_size(1 << 20, 1280)
    with pytest.raises(CannotTest, match="has no probed_limits"):
        RULES["io-size"].judge(Replayed({}, r.outputs, r.requests, "sda", limits_text=r.limits_text))
    with pytest.raises(CannotTest, match="the guest printed no limits of the disk"):
        RULES["io-size"].judge(Replayed(r.config, r.outputs, r.requests, "sda"))


def _stats(writes: int, flushes: int) -> str:
    stats = {"rd_operations": 0, "wr_operations": writes, "flush_operations": flushes, "rd_bytes": 0,
             "wr_bytes": writes * 4096, "rd_total_time_ns": 0, "wr_total_time_ns": 0, "flush_total_time_ns": 0}
    return json.dumps({"return": [{"device": "", "qdev": "ua-vioc-dut01", "stats": stats},
                                  {"device": "", "qdev": "ua-vioc-dut00", "stats": {**stats, "wr_operations": 7}}]})


def _counted_boot(tmp_path: Path, replies: list[str]) -> Boot:
    """A stand-in for QEMU whose console says what a counted job's script says (``host counters`` of
    the disk before and after fio, each waiting for the host's answer), and a stand-in monitor that
    answers ``query-blockstats`` with ``replies`` in turn; the host's actions are the replay's own."""
    given = iter(replies)
    fake = tmp_path / "qemu"
    fake.write_text("#!/bin/sh\n" + "".join(
        f"echo 'VIOC-REPLAY HOST counters ua-vioc-dut01 w {when}'; read a; echo \"VIOC-REPLAY got $a\"\n"
        for when in ("before", "after")))
    fake.chmod(0o755)
    with fake_monitor(tmp_path / "qmp.sock", lambda m: [
            next(given).encode() if m["execute"] == "query-blockstats" else b'{"return": {}}']):
        return boot(str(fake), [], 30, tmp_path / "console.log", Qmp(tmp_path / "qmp.sock"),
                    cli.host_actions(replay_rule("direct-io")))


def test_a_counted_job_is_the_difference_of_the_disks_counters_the_host_read_around_it(tmp_path: Path) -> None:
    b = _counted_boot(tmp_path, [_stats(10, 3), _stats(210, 103)])
    assert [(c.name, c.args) for c in b.host_calls] == [("counters", ("ua-vioc-dut01", "w", w)) for w in ("before", "after")]
    assert b.lines[1].startswith('got {"rd_operations":0,"wr_operations":10,"flush_operations":3,')
    r = Replayed({"host_ref": "ua-vioc-dut01"}, {}, [], "sdb", host_calls=b.host_calls)
    delta = counted(r, "w")
    assert (delta.writes, delta.flushes, delta.wr_bytes) == (200, 100, 200 * 4096)
    with pytest.raises(CannotTest, match="QEMU's counters were not read around fio job x"):
        counted(r, "x")


def test_counters_the_host_could_not_read_are_cannot_test_with_the_reason(tmp_path: Path) -> None:
    b = _counted_boot(tmp_path, [_stats(10, 3), '{"return": []}'])
    assert b.host_calls[1].answer.startswith("ERROR QEMU's counters of ua-vioc-dut01 could not be read")
    with pytest.raises(CannotTest, match="the host action counters ua-vioc-dut01 w after failed: QEMU's counters"):
        counted(Replayed({"host_ref": "ua-vioc-dut01"}, {}, [], "sdb", host_calls=b.host_calls), "w")


def test_every_rules_replay_serves_the_counters_a_counted_job_asks_for() -> None:
    assert all(cli.host_actions(RULES[name])[COUNTERS] is read_counters for name in RULES)
    assert cli.host_actions(RULES["write-cache"])["cache"] is RULES["write-cache"].actions["cache"]


# --- QMP ------------------------------------------------------------------------------------------------

def _answer(message: dict[str, object]) -> list[bytes]:
    """An event before each reply, as QEMU may send one at any time; ``bogus`` refused."""
    event = b'{"event": "RESUME", "timestamp": {}}'
    if message["execute"] == "bogus":
        return [event, b'{"error": {"class": "CommandNotFound", "desc": "The command bogus has not been found"}}']
    return [event, json.dumps({"return": {"did": message["execute"]}}).encode()]


@pytest.fixture
def monitor(tmp_path: Path) -> Iterator[tuple[Path, list[dict[str, object]]]]:
    """A unix socket that answers as QEMU's monitor does: a greeting, an event, then each command."""
    with fake_monitor(tmp_path / "qmp.sock", _answer) as got:
        yield tmp_path / "qmp.sock", got


def test_qmp_negotiates_then_answers_each_command_past_events(monitor: tuple[Path, list[dict[str, object]]]) -> None:
    path, got = monitor
    q = Qmp(path)
    assert q.execute("query-blockstats") == {"return": {"did": "query-blockstats"}}
    with pytest.raises(QmpError, match=r"refused bogus: .*has not been found"):
        q.execute("bogus")
    q.close()
    assert [m["execute"] for m in got] == ["qmp_capabilities", "query-blockstats", "bogus"]


def test_a_monitor_that_is_not_there_is_a_qmp_error(tmp_path: Path) -> None:
    with pytest.raises(QmpError, match="did not answer"):
        Qmp(tmp_path / "none.sock", timeout_s=0.3).execute("query-blockstats")


def test_a_counted_job_asks_the_host_for_the_disks_counters_around_fio_on_its_console() -> None:
    jobs = replay_rule("direct-io").jobs({"host_ref": "ua-vioc-dut01"})[:1]
    script = guest_script("vioc-dut1", [], [], jobs, limits_script="echo name={disk}")
    order = [script.index(s) for s in ("exec 3</dev/ttyS0", "host() {", "echo name=$DEV", "dump disk limits /tmp/read",
                                       "say BEGIN direct1k", "host counters ua-vioc-dut01 direct1k before\n",
                                       "fio --name=direct1k", "wait $FIO", "host counters ua-vioc-dut01 direct1k after\n",
                                       "say END direct1k")]
    assert order == sorted(order)


def test_the_guest_asks_the_host_for_an_action_and_reads_its_answer(tmp_path: Path) -> None:
    """A stand-in for QEMU that prints two HOST requests on its console as the script's ``host`` does and
    echoes the answers it reads: the first action's answer comes back, the unknown one's error too, and
    each call is kept with its words."""
    fake = tmp_path / "qemu"
    fake.write_text("#!/bin/sh\necho 'VIOC-REPLAY HOST grow 1048576'; read a; echo \"VIOC-REPLAY got $a\"\n"
                    "echo 'VIOC-REPLAY HOST shrink'; read b; echo \"VIOC-REPLAY got $b\"\n")
    fake.chmod(0o755)
    b = boot(str(fake), [], 30, tmp_path / "console.log", Qmp(tmp_path / "none.sock"),
             {"grow": lambda qmp, args: f"size {int(args[0]) * 2}"})
    assert b.lines[1] == "got size 2097152"
    assert b.lines[3].startswith("got ERROR the replay has no host action shrink (it has grow)")
    assert [(c.name, c.args, c.error == "") for c in b.host_calls] == [("grow", ("1048576",), True), ("shrink", (), False)]
    script = guest_script("s", [], [], [Job("j", ("--name=j",), during="host grow 4096")])
    assert script.index("FIO=$!") < script.index("host grow 4096") < script.index("wait $FIO")


# --- alignment and limits -------------------------------------------------------------------------------

def _alignment(start: int, offset: int) -> Replayed:
    prepared = f"start={start}\nfs=ext2\nlaid=out\n"
    out = JobOutput({"prepared": prepared}, 100.0, 110.0, 0)
    requests = [TracedRequest(int(101e6) + i, int(101e6) + i + 9, True, False, (offset + i * 4096) // 512, 4096, 1)
                for i in range(400)]
    config = {"probed_limits": PROBED.__dict__, "measure": {"inject": ["misaligned"] if start == 63 else []},
              "configured_limits": {"queue_depth": 128, "physical_block_bytes": 4096, "optimal_io_bytes": 65536}}
    return Replayed(config, {"align4k": out}, requests, "sdb")


def test_alignment_counts_the_traced_writes_against_the_devices_grid_from_the_runs_partition() -> None:
    assert RULES["alignment"].judge(_alignment(2048, 1 << 20)).passed
    broken = RULES["alignment"].judge(_alignment(63, 63 * 512))
    assert not broken.passed
    assert broken.problems[0].startswith("400 of 400 host requests (100%) cross a physical-block or optimal-I/O boundary")
    assert "\n--rw=randwrite" not in replay_rule("alignment").jobs({})[0].prepare
    assert "S=63\n" in replay_rule("alignment").jobs({"measure": {"inject": ["misaligned"]}})[0].prepare


def test_a_partition_the_guest_did_not_make_as_the_run_did_is_cannot_test() -> None:
    r = _alignment(2048, 1 << 20)
    with pytest.raises(CannotTest, match="did not make the run's partition \\(from sector 63\\)"):
        RULES["alignment"].judge(Replayed({**r.config, "measure": {"inject": ["misaligned"]}}, r.outputs, r.requests, "sdb"))


def _limits(max_sectors_kb: int, warned: str | None = None) -> Replayed:
    disks = [{"role": "dut", "serial": "vioc-dut0", "configured_limits": {"queue_depth": 128},
              "advertised": {"source": "QEMU 7.2", "queue_depth": 128, "said_by": {"queue_depth": "cmd_per_lun 128"},
                             "unsaid": {}, "properties": [{"owner": "/m", "name": "cmd_per_lun", "value": "128"}],
                             "notes": [], "unavailable": ""}},
             {"role": "scratch", "serial": "vioc-dut1", "configured_limits": {"queue_depth": 128}, "advertised": None}]
    outputs = {} if warned is None else {"kernel-warning": JobOutput({"prepared": warned}, 1.0, 2.0, 0)}
    return Replayed({"disks": disks}, outputs, [], "sda", probed={"vioc-dut0": LIMITS.format(kb=max_sectors_kb),
                                                                  "vioc-dut1": LIMITS.format(kb=1280)})


def test_limits_judges_each_disk_as_probed_before_the_set_up() -> None:
    verdict = RULES["limits"].judge(_limits(1280))
    assert verdict.passed, verdict.explain()
    assert verdict.properties["dut_queue_depth_advertised"] == "128"
    assert RULES["limits"].judge(_limits(1280, "warned")).passed  # the warning is the kernel-log check's to find
    with pytest.raises(CannotTest, match="the guest's kernel did not warn as in the run \\(no cpu1\\)"):
        RULES["limits"].judge(_limits(1280, "no cpu1"))


def test_limits_replays_the_kernel_warning_action_only_where_the_run_injected_it() -> None:
    assert replay_rule("limits").jobs({"measure": {"inject": []}}) == []
    job = replay_rule("limits").jobs({"measure": {"inject": ["kernel-warning"]}, "scripts": {"kernel_warning": "x"}})
    assert (job[0].args, job[0].prepare) == ((), "x")
    with pytest.raises(CannotTest, match="no script for it"):
        replay_rule("limits").jobs({"measure": {"inject": ["kernel-warning"]}})
    script = guest_script("vioc-dut0", [], [{"sysfs": "queue/max_sectors_kb", "value": "64"}], job,
                          limits_script="echo name={disk}", probe=["vioc-dut0", "vioc-dut1"])
    order = [script.index(s) for s in ("P=$(wait_disk vioc-dut0)", "dump probed vioc-dut0", "dump probed vioc-dut1",
                                       "queue/max_sectors_kb", "kernel-log mark", "say BEGIN kernel-warning\n(\nx\n)",
                                       "say END kernel-warning $RC", "dmesg -r")]
    assert order == sorted(order)


def test_the_same_failure_is_the_same_words_whatever_the_figures_and_the_disks_name() -> None:
    from bench.replay_faithfulness import failures
    run = "x\nFAIL: 99 syncs returned on /sys/block/sdb/queue\nFAIL: [   23.998856] WARNING: CPU: 1\n  FAIL: a\n"
    replayed = "FAIL: 100 syncs returned on /sys/block/sda/queue\nFAIL: [  123.9] WARNING: CPU: 1\nFAIL: a\n"
    assert failures(run) == failures(replayed) and len(failures(run)) == 3
    assert failures("FAIL: 99 flushes") != failures("FAIL: 99 writes") and failures("no failure") == set()


def test_a_cell_agrees_when_every_replay_reached_the_runs_verdict() -> None:
    from bench.replay_faithfulness import Cell
    failed = Cell("io-size", "virtio-scsi", "io-breakup", "failed", [1, 1], [True, False])
    assert failed.agrees and failed.row() == "| io-size | virtio-scsi | io-breakup | FAILED | 1, 1 | 1 of 2 | 2 |"
    assert not Cell("io-size", "virtio-blk", "", "passed", [0, 125], [True, True]).agrees
    assert not Cell("io-size", "virtio-blk", "", "error", [], []).agrees


def test_a_windowed_job_judges_the_requests_between_its_opening_and_closing() -> None:
    reqs = [TracedRequest(int(t * 1e6), int(t * 1e6) + 9, False, False, 0, 4096, 1) for t in (100.5, 101.2, 103.9, 104.5)]
    whole = JobOutput({}, 100.0, 105.0, 0)
    assert [r.start_us for r in window(reqs, whole)] == [int(101.2e6), int(103.9e6), int(104.5e6)]
    measured = JobOutput({}, 100.0, 105.0, 0, open_s=101.0, close_s=104.0)
    assert [r.start_us for r in window(reqs, measured)] == [int(101.2e6), int(103.9e6)]


def test_the_faults_the_bench_keeps_off_a_controller_are_those_its_disk_cannot_carry() -> None:
    """virtio-blk (Linux 6.1's virtio_blk: no SCSI queue depth, no queue/io_timeout) cannot carry tcq-off
    or short-timeout: a faulted run with either skips every rule on its disks, error-propagation's too."""
    from bench.replay_faithfulness import CANNOT_CARRY
    from model.faults import FAULTS
    vda = GuestLimits("vdb", 256, 1280, 32767, 512, 512, 0, "write back", 0, 2, 1, driver="virtio_blk")
    cannot = {name for name, fault in FAULTS.items() if fault.cannot_apply(vda) is not None}
    # and param-change-off, which the resize rule itself skips on virtio-blk (no resize notice to withhold)
    assert CANNOT_CARRY["virtio-blk"] == cannot | {"param-change-off"}
