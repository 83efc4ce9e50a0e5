"""The replays of the disk's life (replay/rules/hotplug.py, resize.py): their guest scripts and host
actions follow the bundle's configuration, and their judges, the rules' own, reach the run's verdict on
recorded real replays (tests/data/replay/<rule>-<controller>-<healthy|faulted>.json: the guest's replay
lines, the job marks, the host's calls and QEMU's events of one boot, the bundle's configuration, and the
run's outcome and problems from the bundle's evidence/verdict.json)."""

from __future__ import annotations

import dataclasses
import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from guest.tools.fio import FioJob
from model.parse.hostcpu import VcpuTimes
from replay import main as cli
from replay.guest_script import guest_script
from replay.qemu import Boot, CannotTest, HostCall
from replay.qmp import Qmp
from replay.rules import RULES, Replayed
from replay.rules.host import vcpu_of, wait_pct
from replay.rules.hotplug import gone

DATA = Path(__file__).resolve().parents[1] / "data" / "replay"


def _recorded(name: str, **config: Any) -> Replayed:
    """One recorded boot as the replay's judge gets it (``config``: keys of the bundle's configuration changed)."""
    rec = json.loads((DATA / f"{name}.json").read_text())
    conf = {**rec["config"], **config}
    b = Boot(rec["lines"], rec["marks"], 0)
    device, outputs = cli.guest_outputs(b, [j.name for j in RULES[conf["rule"]].jobs(conf)])
    return Replayed(conf, outputs, [], device, host_calls=[HostCall(**{**c, "args": tuple(c["args"])}) for c in rec["calls"]],
                    events=rec["events"])


HOTPLUG: dict[str, Any] = {"rule": "hotplug", "controller": "virtio-scsi", "probed_limits": {"driver": "sd"}, "measure": {"inject": []},
           "limits_script": "echo name={disk}",
           "hotplug": {"serial": "vioc-dut90", "size_bytes": 64 << 20, "surprise_removal": False,
                       "configured_limits": {"queue_depth": 128, "logical_block_bytes": 512, "physical_block_bytes": 4096,
                                             "optimal_io_bytes": 0, "write_cache": False, "queues": 2}}}


def _script(config: dict[str, Any]) -> str:
    return guest_script("vioc-dut0", [], [], RULES[config["rule"]].jobs(config))


def test_the_hotplug_replay_adds_the_disk_the_run_added_with_its_configured_limits() -> None:
    script = _script(HOTPLUG)
    assert "host add virtio-scsi vioc-dut90 67108864 512 4096 0 off 2\n" in script
    assert "find_disk vioc-dut90" in script and "past $t0 5 " in script  # the rule's SEEN_BOUND_S
    assert "scsi_mod" not in script and "drivers_autoprobe" not in script
    order = [script.index(s) for s in ("host add", "host seen", "echo name=$N", "host del", "host gone $2", "host cleanup")]
    assert order == sorted(order)


@pytest.mark.parametrize(("driver", "path", "value"), [("sd", "/sys/module/scsi_mod/parameters/scan", "manual"),
                                                        ("virtio_blk", "/sys/bus/virtio/drivers_autoprobe", "0")])
def test_hotplug_off_is_the_guests_own_setting_written_before_the_add_and_restored_after(
        driver: str, path: str, value: str) -> None:
    script = _script({**HOTPLUG, "probed_limits": {"driver": driver}, "measure": {"inject": ["hotplug-off"]}})
    on, off = script.index(f"printf %s {value} > {path}"), script.index(f'printf %s "$WAS" > {path}')
    assert on < script.index("host add") < script.index("host cleanup") < off


def test_a_hotplug_bundle_the_replay_cannot_replay_is_125_with_the_reason() -> None:
    with pytest.raises(CannotTest, match="has no hotplug"):
        RULES["hotplug"].jobs({**HOTPLUG, "hotplug": None})


SURPRISE: dict[str, Any] = {**HOTPLUG, "hotplug": {**HOTPLUG["hotplug"], "surprise_removal": True}}


def test_a_surprise_removal_bundle_removes_the_disk_again_under_the_runs_fio_once_the_host_let_it_go() -> None:
    script = _script(SURPRISE)
    order = [script.index(s) for s in (
        "host gone $2", 'set -- $ANSWER\nif [ "$1" = gone ]', "host again virtio-scsi vioc-dut90 67108864 512 4096 0 off 2",
        "fio --name=hotplug-surprise", "usleep 1000000\n", "host pull", "past $t2 6 ", "kill -INT $F", "host fio ended",
        "fio-exit $RC", "past $t4 5 ", "host pulled $2 10", "host cleanup")]
    assert order == sorted(order)
    # the run's fio (suites/test_hotplug.py's FioJob) on the disk found again
    run = FioJob("hotplug-surprise", rw="randread", bs_bytes=4096, iodepth=4, runtime_s=60, size_bytes=64 << 20)
    assert f"fio {' '.join(a for a in run.args('X')[1:] if a != '--filename=X')} --filename=/dev/$S" in script
    assert "host again" not in _script(HOTPLUG) and "fio" not in _script(HOTPLUG)


def _surprised(lines: list[str], calls: list[dict[str, Any]]) -> Replayed:
    """The recorded healthy virtio-scsi replay with a surprise removal's lines and calls after its own."""
    r = _recorded("hotplug-virtio-scsi-healthy")
    r = dataclasses.replace(r, config={**r.config, "hotplug": {**r.config["hotplug"], "surprise_removal": True}})  # type: ignore[dict-item]
    out = r.outputs["hotplug"]
    parts = {**out.parts, "prepared": out.parts["prepared"] + "\n" + "\n".join(lines)}
    made = [HostCall(**{"end_ns": c["begin_ns"] + 1000, "error": "", **c}) for c in calls]
    return dataclasses.replace(r, outputs={"hotplug": dataclasses.replace(out, parts=parts)},
                               host_calls=[*r.host_calls[:-1], *made, r.host_calls[-1]])


#: fio's JSON of a run of 4 KiB random reads (161788 of them; the figures are not judged, only counted)
FIO_JSON = (DATA.parent / "fio-randread-qd32.json").read_text()


def test_a_surprise_removal_that_fio_survives_with_an_error_passes_with_the_runs_lines() -> None:
    t = 48851_000_000_000
    r = _surprised(["again ok vcpu:none", "surprise sdc", "pull ok 1796666366.000000 vcpu:none", "fio-exit 5",
                    *(f"sfio {line}" for line in FIO_JSON.splitlines()),
                    "sfioerr fio: io_u error on file /dev/sdc: Input/output error: read offset=0, buflen=4096",
                    "surprise-released 0.01", "pulled gone 0.250 vcpu:none"],
                   [{"name": "again", "args": ("virtio-scsi",), "begin_ns": t, "answer": "ok vcpu:none"},
                    {"name": "pull", "args": (), "begin_ns": t + 2_000_000_000, "answer": "ok 1796666366.000000 vcpu:none"},
                    {"name": "fio", "args": ("ended",), "begin_ns": t + 2_300_000_000, "answer": "ok"},
                    {"name": "pulled", "args": ("1796666366.000000", "10"), "begin_ns": t + 2_500_000_000,
                     "answer": "gone 0.250 vcpu:none"}])
    v = RULES["hotplug"].judge(r)
    assert v.passed, v.explain()
    assert ("surprise removal: the host removed sdc while fio read it; fio ended 0.30 s later with exit status 5 "
            "(fio: io_u error on file /dev/sdc: Input/output error: read offset=0, buflen=4096)") in v.lines
    assert (v.properties["surprise_fio_s"], v.properties["surprise_gone_guest_s"], v.properties["surprise_gone_host_s"],
            v.properties["surprise_fio_reads"]) == (0.3, 0.01, 0.25, 161788)
    assert [e.device for e in RULES["hotplug"].injected(r)] == ["sdc"]  # type: ignore[misc]


def test_a_surprise_removal_whose_reads_hang_fails_with_the_runs_line() -> None:
    t = 48851_000_000_000
    r = _surprised(["again ok vcpu:none", "surprise sdc", "pull ok 1796666366.000000 vcpu:none", "fio still-running",
                    "fio-exit 255", "surprise-kept", "pulled kept vcpu:none"],
                   [{"name": "again", "args": (), "begin_ns": t, "answer": "ok vcpu:none"},
                    {"name": "pull", "args": (), "begin_ns": t + 2_000_000_000, "answer": "ok 1796666366.000000 vcpu:none"},
                    {"name": "pulled", "args": ("1796666366.000000", "10"), "begin_ns": t + 9_000_000_000,
                     "answer": "kept vcpu:none"}])
    v = RULES["hotplug"].judge(r)
    assert v.problems == (("surprise removal: fio on sdc had not ended 5 s after the host removed the disk under it: "
                           "the guest waits on requests the device will never answer"),
                          "surprise removal: the guest still shows sdc 5 s after the host removed it",
                          "surprise removal: the host still shows the disk 5 s after removing it")


def test_a_surprise_removal_the_guest_did_not_get_through_is_125() -> None:
    r = _surprised(["again ok vcpu:none", "surprise sdc", "pull ok 1796666366.000000 vcpu:none"], [])
    with pytest.raises(CannotTest, match="did not get through the surprise removal of sdc"):
        RULES["hotplug"].judge(r)
    assert RULES["hotplug"].judge(_surprised(["again ok vcpu:none"], [])).passed  # not shown again: not run, as the run


def test_a_recorded_healthy_hotplug_replay_passes_on_virtio_blk() -> None:
    r = _recorded("hotplug-virtio-blk-healthy")
    v = RULES["hotplug"].judge(r)
    assert v.passed, v.explain()
    p = v.properties
    assert (p["hotplug_device"], p["guest_size_bytes"], p["seen_s"], p["gone_guest_s"], p["gone_host_s"]) == (
        "vdc", 64 << 20, 1.65, 0.43, 1.73)
    assert p["seen_vcpu_wait_pct"] == 71.59
    assert p["added_physical_block_size_guest"] == "512"


def test_a_recorded_healthy_replay_fails_where_the_host_configured_another_block_size() -> None:
    """The rule's own judge decides: the same boot, against a configuration that asked for more."""
    entry = json.loads((DATA / "hotplug-virtio-blk-healthy.json").read_text())["config"]["hotplug"]
    limits = {**entry["configured_limits"], "physical_block_bytes": 4096}
    v = RULES["hotplug"].judge(_recorded("hotplug-virtio-blk-healthy", hotplug={**entry, "configured_limits": limits}))
    assert not v.passed
    assert "the added disk vdc: physical block size: the host configured 4096, the guest sees 512" in v.problems[0]


def test_the_vcpu_times_an_action_answers_are_read_back_and_give_the_wait() -> None:
    a = vcpu_of("ok 1796665582.047756 vcpu:2:100:1000000000:10.0")
    b = vcpu_of("gone 1.727 vcpu:2:200:2000000000:11.0")
    assert a == VcpuTimes(2, 100, 1000000000, 10.0)
    assert wait_pct(a, b) == 50.0
    assert vcpu_of("ok vcpu:none") is None and wait_pct(a, None) is None


RESIZE: dict[str, Any] = {"rule": "resize", "controller": "virtio-scsi", "probed_limits": {"driver": "sd"}, "host_ref": "ua-vioc-dut01"}


def test_the_resize_replay_grows_and_shrinks_the_runs_disk_under_the_runs_fio() -> None:
    jobs = RULES["resize"].jobs(RESIZE)
    io, fs = jobs
    assert {"--rw=randrw", "--bs=4096", "--iodepth=4", "--size=16777216", "--time_based", "--runtime=120s"} <= set(io.args)
    assert "host resize grow ua-vioc-dut01 grow" in io.during and "host resize shrink ua-vioc-dut01 to $FROM" in io.during
    assert io.during.rstrip().endswith("while kill -INT $FIO 2>/dev/null; do usleep 500000; done") and "past $t0 5 " in io.during  # the bound of sd
    assert not fs.args and "mkfs.ext4 -q -F -b 4096 -E nodiscard,lazy_itable_init=1" in fs.prepare
    assert fs.prepare.index("host resize fs-grow") < fs.prepare.index("resize2fs /dev/$DEV") < fs.prepare.index(
        "host resize fs-back")
    with pytest.raises(CannotTest, match="no host_ref"):
        RULES["resize"].jobs({**RESIZE, "host_ref": ""})


def test_a_recorded_healthy_resize_replay_passes_told_by_virtio_scsis_parameter_change_event() -> None:
    v = RULES["resize"].judge(_recorded("resize-virtio-scsi-healthy"))
    assert v.passed, v.explain()
    p = v.properties
    assert (p["grow_host_to_bytes"], p["grow_guest_bytes"], p["shrink_guest_bytes"]) == (1140850688, 1140850688, 1073741824)
    assert str(p["grow_mechanism"]).startswith("sd's revalidation (READ CAPACITY) on a rescan: virtio-scsi's parameter")
    assert (p["fs_grow_ok"], p["fs_grow_before_bytes"], p["fs_grow_after_bytes"], p["fio_errors"]) == (
        1, 1020702720, 1020702720 + 65003520, 0)


def test_a_recorded_faulted_resize_replay_on_a_busy_host_is_no_verdict_as_the_runs_is_an_error() -> None:
    """param-change-off: the guest never saw the grow, while its vCPUs waited for a host CPU 69 % of the
    bound (model/judging/host_busy.py): not judged, and nothing else failed: 125."""
    with pytest.raises(CannotTest, match=r"the host was busy: grow: the guest still saw 1073741824 bytes 5.0 s after"):
        RULES["resize"].judge(_recorded("resize-virtio-scsi-faulted-busy"))


def test_the_same_faulted_boot_fails_with_the_runs_line_where_the_host_cannot_say_how_long_the_vcpus_waited() -> None:
    """A host without schedstat answers ``vcpu:none``: the overrun is then the guest's, as in the run."""
    r = _recorded("resize-virtio-scsi-faulted-busy")
    blind = [HostCall(c.name, c.args, c.begin_ns, c.end_ns, re.sub(r"vcpu:\S+", "vcpu:none", c.answer)) for c in r.host_calls]
    v = RULES["resize"].judge(dataclasses.replace(r, host_calls=blind))
    assert not v.passed
    run_fail = ("grow: the guest still saw 1073741824 bytes 5.0 s after the host grew the disk from 1073741824 to "
                "1140850688 bytes (bound 5.0 s: measured on sd (SEEN_BOUND_S)); no notice reached the driver, or it did "
                "not act on it")  # the run's FAIL line (its bundle's evidence/verdict.json)
    assert v.problems == (run_fail,)
    assert v.properties["fio_errors"] == 0  # fio's exit 128 is its answer to the replay's own stop


def test_a_recorded_healthy_hotplug_replay_passes_on_virtio_scsi() -> None:
    v = RULES["hotplug"].judge(_recorded("hotplug-virtio-scsi-healthy"))
    assert v.passed, v.explain()
    assert (v.properties["hotplug_device"], v.properties["seen_s"], v.properties["gone_host_s"]) == ("sdc", 0.49, 0.2)


class _Monitor(Qmp):
    """QEMU's monitor as the host actions see it: every command answered, DEVICE_DELETED read with the
    reply to the third query-status."""

    def __init__(self) -> None:
        super().__init__(Path("/nonexistent.sock"))
        self.sent: list[str] = []

    def execute(self, command: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        self.sent.append(command)
        if self.sent.count("query-status") == 3:  # stamped with the host's wall clock, as QEMU stamps it
            now = time.time()
            self.events.append({"event": "DEVICE_DELETED", "data": {"device": "vioc-hotplug"},
                                "timestamp": {"seconds": int(now), "microseconds": int(now % 1 * 1e6)}})
        return {"return": []}


def test_the_host_waits_for_device_deleted_and_times_it_from_its_request() -> None:
    q = _Monitor()
    assert gone(q, [f"{time.time() - 1:.6f}"]).startswith("gone ")  # it came while the host looked
    assert q.sent.count("query-status") == 3 and q.sent[-1] == "blockdev-del"
    q = _Monitor()
    q.events.append({"event": "DEVICE_DELETED", "data": {"device": "vioc-hotplug"},
                     "timestamp": {"seconds": 100, "microseconds": 500000}})
    assert gone(q, ["99.0"]) == "gone 1.500 vcpu:none"
    assert gone(_Monitor(), [f"{time.time() - 10:.6f}"]) == "kept vcpu:none"  # past the bound: no wait
    # the surprise removal's bound: the run's gone bound and its fio bound, from the request
    assert gone(_Monitor(), [f"{time.time() - 7:.6f}", "10"]).startswith("gone ")
    # the disk added again under the same id: the first removal's event is not the second's
    q = _Monitor()
    q.events.append({"event": "DEVICE_DELETED", "data": {"device": "vioc-hotplug"},
                     "timestamp": {"seconds": 100, "microseconds": 500000}})
    pulled = gone(q, [f"{time.time():.6f}", "10"]).split()
    assert pulled[0] == "gone" and 0 <= float(pulled[1]) < 5 and q.sent.count("query-status") == 3


def test_a_recorded_faulted_hotplug_replay_fails_with_the_runs_line_on_virtio_blk() -> None:
    """hotplug-off: the virtio bus's drivers_autoprobe 0 written before the add; the guest waits out the bound
    while its vCPUs waited 56.7 % of it for a host CPU (under BOUND_WAIT_MAX_PCT: the guest's own fault)."""
    r = _recorded("hotplug-virtio-blk-faulted")
    assert r.config["measure"]["inject"] == ["hotplug-off"]  # type: ignore[index]
    v = RULES["hotplug"].judge(r)
    assert not v.passed
    assert v.problems == (("the guest showed no disk with serial vioc-dut90 within 5 s of the host adding it on virtio-blk "
                          "(7x the slowest measured here under TCG): the guest did not bind or scan the new device"),)
    assert v.properties["seen_vcpu_wait_pct"] == 56.66 and "gone_guest_s" not in v.properties


@pytest.mark.parametrize("name", ["hotplug-virtio-blk-faulted", "hotplug-virtio-scsi-faulted", "resize-virtio-scsi-faulted",
                                  "hotplug-virtio-blk-healthy", "hotplug-virtio-scsi-healthy", "resize-virtio-scsi-healthy"])
def test_each_recorded_replay_reaches_its_runs_verdict_with_the_runs_fail_lines(name: str) -> None:
    """The run's outcome and problems are its bundle's (evidence/verdict.json), kept beside the recording."""
    rec = json.loads((DATA / f"{name}.json").read_text())
    v = RULES[rec["config"]["rule"]].judge(_recorded(name))
    assert ("passed" if v.passed else "failed", list(v.problems)) == (rec["run_outcome"], rec["run_problems"])
