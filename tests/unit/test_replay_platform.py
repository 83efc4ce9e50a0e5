"""The replay of the opt-in platform rules write-cache and throttle (replay/rules/write_cache.py,
throttle.py): their jobs and host actions follow the bundle's configuration, and the rules' own judges
on what a real replay gave (tests/data/replay/*.replay.json.gz: a healthy and a faulted bundle of each,
replayed on virtio-scsi) pass the healthy one and fail the faulted one as its run failed."""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from bench.replay_faithfulness import selection
from model.parse.qemutrace import parse_qemu_trace
from model.parse.throttle_limits import ThrottleLimits
from model.rules.throttle import RULE_IOPS, with_burst
from model.types import DiskSpec
from replay import main as cli
from replay.qemu import Boot, CannotTest, HostCall
from replay.qmp import Qmp, QmpError
from replay.rules import RULES, Replayed, device
from replay.rules import throttle as replay_throttle
from replay.rules import write_cache as replay_write_cache

DATA = Path(__file__).resolve().parents[1] / "data" / "replay"


def recorded(rule: str, name: str) -> Replayed:
    """What one real replay gave its rule's judge (tests/data/README.md), rebuilt as replay/main.py builds it."""
    with gzip.open(DATA / f"{name}.replay.json.gz", "rt") as f:
        data = json.load(f)
    config = data["config"]
    jobs = RULES[rule].jobs(config)
    b = Boot(data["lines"], data["marks"], 0,
             host_calls=[HostCall(**{**c, "args": tuple(c["args"])}) for c in data["host_calls"]])
    device, outputs = cli.guest_outputs(b, [j.name for j in jobs])
    probed: dict[str, str] = {}
    for line in b.lines:
        if line.startswith("probed "):
            serial, _, text = line.removeprefix("probed ").partition(" ")
            probed[serial] = probed.get(serial, "") + text + "\n"
    return Replayed(config, outputs, parse_qemu_trace(data["trace"]) if data["trace"] else [], device,
                    probed=probed, host_calls=b.host_calls)


# --- write-cache ---------------------------------------------------------------------------------------

def test_a_recorded_wce_lie_replay_fails_as_its_run_did_and_a_healthy_one_passes() -> None:
    faulted = RULES["write-cache"].judge(recorded("write-cache", "write-cache-wce-lie-virtio-scsi"))
    assert not faulted.passed
    assert [p.split(":")[0] for p in faulted.problems] == ["dut disk sdb", "scratch disk sda"]
    assert all("believes write through over a host write-back cache" in p and "49 fsyncs sent 0 flushes, the host "
               "saw 0 [blame: guest configuration]" in p for p in faulted.problems)
    assert faulted.properties["dut_host_cache_mode"] == "writeback" and faulted.properties["scratch_host_cache_mode"] == "none"
    assert faulted.properties["dut_guest_write_cache_probed"] == "write back"
    healthy = RULES["write-cache"].judge(recorded("write-cache", "write-cache-healthy-virtio-scsi"))
    assert healthy.passed, healthy.explain()
    p = healthy.properties
    assert (p["dut_fsyncs"], p["dut_flushes_guest"], p["dut_flushes_host"]) == (49, 49, 49)
    assert (p["scratch_fsyncs"], p["scratch_flushes_guest"], p["scratch_flushes_host"]) == (49, 49, 49)


CONFIG = {"disk": {"serial": "vioc-dut0"}, "limits_script": "echo name={disk}",
          "disks": [{"role": "dut", "serial": "vioc-dut0", "host_ref": "ua-vioc-dut00"},
                    {"role": "scratch", "serial": "vioc-dut1", "host_ref": "ua-vioc-dut01"}]}


def test_write_cache_runs_the_runs_fsync_workload_on_each_disk_then_asks_the_host_for_its_cache() -> None:
    jobs = RULES["write-cache"].jobs(CONFIG)
    assert [j.name for j in jobs] == ["fsync-dut", "fsync-scratch", "cache"]
    dut, scratch, cache = jobs
    assert dut.counted and scratch.counted and not cache.args
    assert {"--rw=randwrite", "--bs=4096", "--direct=0", "--ioengine=psync", "--fsync=1", "--io_size=204800",
            "--size=67108864", "--iodepth=1"} <= set(dut.args)
    assert scratch.target == "/dev/$(wait_disk vioc-dut1)"
    # the run's set-up goes on the scratch disk too (the run prepares both), once, before the first run
    assert "DEV=$(wait_disk vioc-dut1)" in dut.prepare and "apply_setup" in dut.prepare and "apply_setup" not in scratch.prepare
    assert "host cache ua-vioc-dut00 ua-vioc-dut01" in cache.prepare


def test_an_older_bundle_without_the_disks_qemu_ids_cannot_be_judged() -> None:
    older = {**CONFIG, "disks": [{"role": "dut", "serial": "vioc-dut0"}]}
    with pytest.raises(CannotTest, match="host_ref"):
        RULES["write-cache"].jobs(older)


class FakeQmp(Qmp):
    """QEMU's monitor as a dictionary of replies; every command it was given, in order."""

    def __init__(self, replies: dict[str, Any]) -> None:
        super().__init__(Path("/nonexistent"))
        self.replies = replies
        self.given: list[tuple[str, dict[str, Any] | None]] = []

    def execute(self, command: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        self.given.append((command, arguments))
        return {"return": self.replies[command]}


def _block(qdev: str, cache: dict[str, bool], **throttle: int) -> dict[str, Any]:
    return {"qdev": qdev, "inserted": {"cache": cache, "iops": 0, "bps": 0, **throttle}}


def test_the_cache_action_answers_each_devices_cache_flags_as_query_block_has_them() -> None:
    q = FakeQmp({"query-version": {"qemu": {"major": 7, "minor": 2, "micro": 22}}, "query-block": [
        _block("/machine/peripheral/ua-vioc-dut00/virtio-backend", {"writeback": True, "direct": False, "no-flush": False}),
        _block("ua-vioc-dut01", {"writeback": False, "direct": True, "no-flush": True})]})
    answer = replay_write_cache.host_cache_action(q, ["ua-vioc-dut00", "ua-vioc-dut01", "ua-vioc-dut09"])
    assert answer == "7.2.22 ua-vioc-dut00=1,0,0 ua-vioc-dut01=0,1,1 ua-vioc-dut09=none"


# --- throttle ------------------------------------------------------------------------------------------

def test_a_recorded_throttle_burst_replay_fails_as_its_run_did_and_a_healthy_one_passes() -> None:
    faulted = RULES["throttle"].judge(recorded("throttle", "throttle-throttle-burst-virtio-scsi"))
    assert not faulted.passed
    held, rate = faulted.problems
    assert "a bucket that lets 1188000 I/Os through above the limit [blame: hypervisor]" in held
    assert rate.startswith("throttled: the guest got ") and "its throttle let them through" in rate
    assert float(faulted.properties["throttled_guest_iops"]) > 230
    healthy = RULES["throttle"].judge(recorded("throttle", "throttle-healthy-virtio-scsi"))
    assert healthy.passed, healthy.explain()
    p = healthy.properties
    assert p["throttled_held"] == "iops=200, bps=0" and p["lifted_held"] == "no limit"
    assert float(p["throttled_guest_iops"]) <= 230 and float(p["again_guest_iops"]) <= 230
    assert float(p["lifted_over_limit"]) > 2


def test_the_throttle_replays_fail_line_names_the_runs_libvirt_domain_as_the_runs_line_does() -> None:
    """The run says where it read the host's limits by its libvirt domain (hypervisors/libvirt/throttle.py);
    the bundle carries the domain's name (configuration.json's ``domain``), so the replay's FAIL line is the
    run's; a bundle without it (an older run's) replays to the same verdict naming the replay's QEMU."""
    r = recorded("throttle", "throttle-throttle-burst-virtio-scsi")
    named = RULES["throttle"].judge(dataclasses.replace(r, config={**r.config, "domain": "vioconform-4242"}))
    older = RULES["throttle"].judge(r)
    assert "(QMP query-block of vioconform-4242, device ua-vioc-dut00): a bucket" in named.problems[0]
    assert "(QMP query-block of the replay's QEMU, device ua-vioc-dut00): a bucket" in older.problems[0]
    assert [p.replace("the replay's QEMU", "vioconform-4242") for p in older.problems] == list(named.problems)
    assert named.passed == older.passed is False
    pytest.importorskip("libvirt", reason="needs libvirt-python (tox -e test installs it; tox -e unit does not)")
    from hypervisors.libvirt.throttle import QmpThrottle
    run = QmpThrottle(SimpleNamespace(domain="vioconform-4242", device="ua-vioc-dut00"))  # type: ignore[arg-type]
    assert f"({run.said_by}): a bucket" in named.problems[0]


def _config(disk_settings: list[list[str]], inject: list[str]) -> dict[str, object]:
    return {"host_ref": "ua-vioc-dut00", "configuration": {"disk_settings": disk_settings},
            "measure": {"window_s": 3.0, "inject": inject}}


def test_throttle_sets_the_rules_own_limit_as_the_run_does_with_the_faults_burst_where_it_was_injected() -> None:
    assert replay_throttle.limits(_config([], [])) == (ThrottleLimits(iops=RULE_IOPS), "the rule",
                                                       ThrottleLimits(iops=RULE_IOPS))
    limit, _, first = replay_throttle.limits(_config([], ["throttle-burst"]))
    assert first == with_burst(limit) and first.iops_max > limit.iops
    jobs = RULES["throttle"].jobs(_config([], ["throttle-burst"]))
    assert [j.name for j in jobs] == ["throttled", "lifted", "again"]
    assert (f"host throttle ua-vioc-dut00 iops={RULE_IOPS} bps=0 iops_max={first.iops_max} iops_max_length=60 "
            "iops_rd=0 iops_wr=0 bps_rd=0 bps_wr=0;") in jobs[0].prepare
    assert "host throttle ua-vioc-dut00 iops=0 bps=0 iops_rd=0 iops_wr=0 bps_rd=0 bps_wr=0;" in jobs[1].prepare
    assert "iops_max" not in jobs[2].prepare
    assert {"--rw=randread", "--bs=4096", "--iodepth=32", "--time_based", "--runtime=34s"} <= set(jobs[0].args)
    assert "usleep 3000000" in jobs[0].during and "kill -INT $FIO" in jobs[0].during


def test_a_limit_given_with_disk_is_kept_in_the_first_phase_as_qemu_started_with_it() -> None:
    limit, set_by, first = replay_throttle.limits(_config([["cache", "none"], ["iops", "500"]], []))
    assert (limit, set_by, first) == (ThrottleLimits(iops=500), "--disk cache=none,iops=500", None)
    assert "host throttle ua-vioc-dut00 keep;" in RULES["throttle"].jobs(_config([["iops", "500"]], []))[0].prepare


def test_the_throttle_action_sets_the_limits_on_the_block_backend_and_answers_what_it_holds() -> None:
    backend = "/machine/peripheral/ua-vioc-dut00/virtio-backend"
    q = FakeQmp({"query-block": [_block(backend, {}, iops=200, iops_max=20000, iops_max_length=60)],
                 "block_set_io_throttle": {}})
    held = json.loads(replay_throttle.set_throttle(q, ["ua-vioc-dut00", "iops=200", "iops_max=20000",
                                                       "iops_max_length=60"]))
    assert ThrottleLimits(**held) == ThrottleLimits(iops=200, iops_max=20000, iops_max_length_s=60)
    command, arguments = q.given[1]
    assert command == "block_set_io_throttle" and arguments is not None
    assert arguments["id"] == backend and arguments["iops"] == 200 and arguments["bps_wr"] == 0
    q.given.clear()
    replay_throttle.set_throttle(q, ["ua-vioc-dut00", "keep"])
    assert [c for c, _ in q.given] == ["query-block"]


def test_the_faithfulness_bench_selects_the_opt_in_rules_it_replays() -> None:
    assert selection(["io-size"]) == ["-k", "io_size"]
    assert selection(["io-size", "write-cache", "throttle"]) == ["-k", "io_size or write_cache or throttle",
                                                                 "--with-rules", "write-cache,throttle"]


# --- identity and block-size: the device as the replay's QEMU says it -----------------------------------

READS = [{"path": "/machine/peripheral/ua-vioc-dut00", "prop": p, "limit": limit, "unsaid": None, "why": ""}
         for p, limit in (("logical_block_size", "logical_block_bytes"), ("physical_block_size", "physical_block_bytes"),
                          ("serial", None), ("wwn", None))]
DEVICE = {"disks": [{"role": "dut", "serial": "vioc-dut0", "qom_reads": READS,
                     "identity": {"serial": "vioc-dut0", "wwn": "5000c50015ea7100", "size_bytes": 1 << 30,
                                  "serial_bytes": 0, "bus": "virtio-scsi"},
                     "configured_limits": {"logical_block_bytes": 512, "physical_block_bytes": 512}}],
          "scripts": {"identity": "for f in size; do echo {disk}; done"}}


class QomQmp(FakeQmp):
    """A QEMU whose device has the properties of ``props`` (path, name) -> value; any other it refuses."""

    def __init__(self, props: dict[tuple[str, str], object]) -> None:
        super().__init__({"query-version": {"qemu": {"major": 7, "minor": 2, "micro": 22}}})
        self.props = props

    def execute(self, command: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        if command != "qom-get":
            return super().execute(command, arguments)
        assert arguments is not None
        key = (arguments["path"], arguments["property"])
        if key not in self.props:
            raise QmpError(f"QEMU's monitor refused qom-get: Property '{key[1]}' not found")
        return {"return": self.props[key]}


def test_the_qom_action_asks_the_replays_qemu_each_property_the_run_read_of_the_device() -> None:
    dev = "/machine/peripheral/ua-vioc-dut00"
    q = QomQmp({(dev, "logical_block_size"): 512, (dev, "physical_block_size"): 4096, (dev, "serial"): "vioc-dut0"})
    reads = device.reads_of(DEVICE["disks"][0])  # type: ignore[index]
    line = device.ask("vioc-dut0", reads)
    assert line.startswith(f"host qom vioc-dut0 {dev} logical_block_size {dev} physical_block_size")
    answer = device.qom_action(q, line.split()[2:])
    call = HostCall("qom", tuple(line.split()[2:]), 0, 1, answer)
    said = device.advertised(Replayed({}, {}, [], "sda", host_calls=[call]), "vioc-dut0", reads)
    assert (said.logical_block_bytes, said.physical_block_bytes, said.source) == (512, 4096, "QEMU 7.2.22, QMP qom-get")
    assert any("no property wwn" in n for n in said.notes)  # refused: an older QEMU's, named


def test_identity_and_block_size_read_each_disk_in_the_guest_and_ask_the_host_of_its_device() -> None:
    identity = RULES["identity"].jobs(DEVICE)[0].prepare
    assert "P=$(wait_disk vioc-dut0)" in identity and "echo $P" in identity  # the run's script, on the replay's disk
    assert "host qom vioc-dut0 /machine/peripheral/ua-vioc-dut00 serial /machine/peripheral/ua-vioc-dut00 wwn" in identity
    reads = RULES["block-size"].jobs(DEVICE)[0].prepare
    assert ("512) fio --output-format=json --direct=1 --ioengine=psync --rw=read --filename=/dev/$P --name=aligned "
            "--offset=0 --bs=512 --size=512 --name=short --offset=0 --bs=256 --size=256 --name=offset --offset=256") in reads
    assert "host qom vioc-dut0 /machine/peripheral/ua-vioc-dut00 logical_block_size" in reads
    older = {"disks": [{"role": "dut", "serial": "vioc-dut0"}], "scripts": DEVICE["scripts"]}
    for rule in ("identity", "block-size"):
        with pytest.raises(CannotTest, match="QOM properties"):
            RULES[rule].jobs(older)


WRAPPED = {
    "identity": ("identity-other-wwn", ("dut disk sda: WWN: the suite configured '5000c50015ea7100', the device has "
                 "'5000c50015ea71ff' (wwn of /machine/peripheral/ua-vioc-dut00, QEMU 7.2.22, QMP qom-get), the guest "
                 "sees '5000c50015ea71ff' [blame: hypervisor]"),
                 {"dut_wwn_guest": "5000c50015ea7100", "dut_wwn_device": "5000c50015ea7100"}),
    "block-size": ("block-size-physical-4096", ("dut disk sda: physical block size: the suite asked for 512, the device "
                   "advertises 4096 (physical_block_size 4096 of /machine/peripheral/ua-vioc-dut00), the guest sees 4096 "
                   "[blame: hypervisor]"),
                   {"dut_physical_block_size_advertised": "512", "dut_physical_block_size_guest": "512",
                    "dut_direct_aligned": "read", "dut_direct_short": "EINVAL: Invalid argument"}),
}


@pytest.mark.parametrize("rule", sorted(WRAPPED))
def test_a_recorded_replay_of_a_wrapper_bundle_fails_on_the_runs_wrapper_and_passes_on_the_hosts_qemu(rule: str) -> None:
    """The same bundle (a run on an --emulator wrapper giving the disk another WWN, another physical block
    size), replayed with the bundle's emulator and with --qemu the host's own."""
    name, problem, healthy_said = WRAPPED[rule]
    faulted = RULES[rule].judge(recorded(rule, f"{name}-virtio-scsi"))
    assert faulted.problems == (problem,)
    healthy = RULES[rule].judge(recorded(rule, f"{name}-hosts-qemu-virtio-scsi"))
    assert healthy.passed, healthy.explain()
    assert {k: healthy.properties[k] for k in healthy_said} == healthy_said


def test_a_libvirt_bundle_names_what_its_replay_asks_of_each_device_and_the_identity_it_was_given() -> None:
    """configuration.json's disks[] on libvirt: the QOM reads the run made of the device (QEMU's id as the
    replay's qom action asks it) and the configured identity, which the replays of identity and block-size
    read (an older bundle without them: 125, above)."""
    pytest.importorskip("libvirt", reason="needs libvirt-python (tox -e test installs it; tox -e unit does not)")
    from hypervisors.libvirt.identity import replay_device
    said = replay_device(DiskSpec("virtio-blk", 2))
    reads = device.reads_of(said)
    assert ("/machine/peripheral/ua-vioc-dut02/virtio-backend", "physical_block_size") in [(r.path, r.prop) for r in reads]
    assert said["identity"] == {"serial": "vioc-dut2", "wwn": None, "size_bytes": 1 << 30, "serial_bytes": 20,
                                "bus": "virtio-blk"}
