"""stall-tolerance's replay (replay/rules/stall_tolerance.py): its job and host actions follow the bundle's
configuration, and the rule's own judge, on what real replays gave (tests/data/replay/stall-*: the guest's
console lines, the host's actions and the recovery events QEMU traced), reaches the runs' verdicts: the
healthy bundles pass, the short-timeout one fails with the run's FAIL line; a hold that proved nothing is
CannotTest, never a verdict."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from model.parse.stall_evidence import TIMEOUT_SCRIPT
from model.rules.stall_tolerance import STALL_HOLD_S
from model.stall_workload import REGION_BYTES, STALL_DEPTH
from replay.main import guest_outputs
from replay.qemu import Boot, CannotTest, HostCall, replay_line
from replay.rules import Replayed, replay_rule
from replay.rules import stall_tolerance as stall

DATA = Path(__file__).resolve().parents[1] / "data" / "replay"
RULE = replay_rule("stall-tolerance")


def recorded(name: str) -> tuple[Replayed, dict[str, object]]:
    """A real replay's evidence as main.py hands it to the judge, and the run's verdict."""
    rec = json.loads((DATA / f"{name}.json").read_text())
    lines = [line for raw in (DATA / f"{name}.console.log").read_text().splitlines()
             if (line := replay_line(raw)) is not None]
    device, outputs = guest_outputs(Boot(lines=lines, marks=rec["marks"], exit_status=0),
                                    [j.name for j in RULE.jobs(rec["configuration"])])
    limits = "\n".join(line.removeprefix("disk limits ") for line in lines if line.startswith("disk limits "))
    calls = [HostCall(c["name"], tuple(c["args"]), c["begin_ns"], c["end_ns"], c["answer"], c["error"])
             for c in rec["host_actions"]["calls"]]
    return Replayed(rec["configuration"], outputs, [], device, limits_text=limits, host_calls=calls,
                    trace=rec["trace"]), rec["run"]


def _words(line: str) -> str:
    """A FAIL line with its disk's name aside (the replay may find the disk under another name)."""
    return re.sub(r"\b(sd|vd)[a-z]+\b", "DISK", line)


def test_the_job_holds_the_runs_disk_for_the_runs_hold_and_reads_its_timeout_first() -> None:
    config = {"host_ref": "ua-vioc-dut01", "controller": "virtio-scsi", "measure": {"stall_hold_s": 5.0}}
    [job] = stall.jobs(config)
    assert "host hold ua-vioc-dut01 virtio-scsi 5\n" in job.during and "host flowing ua-vioc-dut01" in job.during
    assert TIMEOUT_SCRIPT.replace("{disk}", "$DEV") in job.prepare
    assert {"--rw=randrw", "--bs=4096", f"--iodepth={STALL_DEPTH}", f"--size={REGION_BYTES}",
            "--randseed=1", "--time_based"} <= set(job.args)
    assert stall.hold_s({}) == STALL_HOLD_S.default and stall.stall_s({"measure": {"stall_s": 180}}) == 180
    with pytest.raises(CannotTest, match="no host_ref"):
        stall.jobs({})


@pytest.mark.parametrize("name", ["stall-healthy-virtio-scsi", "stall-healthy-virtio-blk"])
def test_the_healthy_runs_replays_pass(name: str) -> None:
    r, run = recorded(name)
    verdict = RULE.judge(r)
    assert run["outcome"] == "passed" and verdict.passed, verdict.explain()
    p = {k: float(v) for k, v in verdict.properties.items() if isinstance(v, (int, float))}
    assert p["stall_judged"] == 1 and p["hold_host_completions"] <= 1 and p["hold_guest_inflight"] == 8
    assert 1 <= p["hold_probes_answered"] <= p["hold_probes"]


def test_the_stall_line_is_the_runs_but_for_the_channel_of_the_probes_round_trips(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whether the guest answered its probes in the hold is the run's measurement, in the run's words; the
    slowest round trip went over the serial console, not SSH, and the line says so beside it."""
    r, _ = recorded("stall-healthy-virtio-scsi")
    replayed = RULE.judge(r)
    assert re.search(r"the guest answered \d+ of \d+ probes meanwhile \(slowest \d+ ms over the serial console\)$",
                     replayed.lines[1])
    monkeypatch.setattr(stall, "PROBES_OVER", "SSH")  # the same figures, as the run's SSH probes would say them
    as_run = RULE.judge(r)
    assert replayed.lines[1] == as_run.lines[1].replace("ms over SSH)", "ms over the serial console)")
    assert (replayed.lines[2:], replayed.problems, replayed.notes) == (as_run.lines[2:], as_run.problems, as_run.notes)


def test_the_short_timeout_runs_replay_fails_with_the_runs_fail_line() -> None:
    r, run = recorded("stall-short-timeout-virtio-scsi")
    verdict = RULE.judge(r)
    assert run["outcome"] == "failed" and not verdict.passed
    assert [_words(p) for p in verdict.problems] == [_words(p) for p in run["problems"]]  # type: ignore[attr-defined]
    assert verdict.properties["command_timeout_s"] == 5.0 and verdict.properties["stall_judged"] == 1


def test_a_hold_that_proved_nothing_cannot_be_tested() -> None:
    r, _ = recorded("stall-healthy-virtio-scsi")
    no_probe = [c for c in r.host_calls if c.name != "probe"]  # no probe reached the host in the hold
    with pytest.raises(CannotTest, match="the hold proved nothing: the guest answered none of"):
        RULE.judge(dataclasses.replace(r, host_calls=no_probe))
    leaked = [dataclasses.replace(c, answer=c.answer.replace("release_ops=", "release_ops=1000")) if c.name == "events"
              else c for c in r.host_calls]
    with pytest.raises(CannotTest, match="the hold did not hold"):
        RULE.judge(dataclasses.replace(r, host_calls=leaked))
    failed = [dataclasses.replace(c, error="QEMU said no", answer="ERROR QEMU said no") if c.name == "hold" else c
              for c in r.host_calls]
    with pytest.raises(CannotTest, match="the host's hold failed: QEMU said no"):
        RULE.judge(dataclasses.replace(r, host_calls=failed))
