"""error-propagation's replay (replay/rules/error_propagation.py): its jobs and host actions follow the
bundle's configuration (the run's workload, its mirror under swallow-errors, the disk's block node opened as
the run's command line opened it), and the rule's own judge, on what real replays gave
(tests/data/replay/errprop-*: the guest's console lines and the host's actions), reaches the runs' verdicts;
the kernel-log check takes the rule's own range as the run's does."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from model.parse.fio_errors import CONTINUE_ON
from model.rules.error_propagation import DEPTH, SWALLOW, WORKLOAD
from replay.main import guest_outputs, kernel_log_checked
from replay.qemu import Boot, CannotTest, HostCall, drive_options, replay_line
from replay.rules import Replayed, replay_rule
from replay.rules import error_propagation as errprop

DATA = Path(__file__).resolve().parents[1] / "data"
RULE = replay_rule("error-propagation")
OPTIONS = {"read-only": False, "discard": "unmap", "cache": {"direct": True, "no-flush": False}, "driver": "raw"}


def recorded(name: str) -> tuple[Replayed, Boot, dict[str, object]]:
    """A real replay's evidence as main.py hands it to the judge, its boot, and the run's verdict."""
    rec = json.loads((DATA / "replay" / f"{name}.json").read_text())
    lines = [line for raw in (DATA / "replay" / f"{name}.console.log").read_text().splitlines()
             if (line := replay_line(raw)) is not None]
    b = Boot(lines=lines, marks=rec["marks"], exit_status=0)
    device, outputs = guest_outputs(b, [j.name for j in RULE.jobs(rec["configuration"])])
    limits = "\n".join(line.removeprefix("disk limits ") for line in lines if line.startswith("disk limits "))
    calls = [HostCall(c["name"], tuple(c["args"]), c["begin_ns"], c["end_ns"], c["answer"], c["error"])
             for c in rec["host_actions"]["calls"]]
    return Replayed(rec["configuration"], outputs, [], device, limits_text=limits, host_calls=calls), b, rec["run"]


def _words(line: str) -> str:
    """A FAIL line with its disk's name aside (the replay may find the disk under another name)."""
    return re.sub(r"\b(sd|vd)[a-z]+\b", "DISK", line)


def test_the_disks_block_node_options_are_read_from_the_runs_command_line() -> None:
    argv = ["qemu", "-blockdev", json.dumps({"node-name": "libvirt-2-format", **OPTIONS, "file": "libvirt-2-storage"}),
            "-device", json.dumps({"driver": "scsi-hd", "drive": "libvirt-2-format", "id": "ua-vioc-dut01"})]
    assert drive_options(argv, "ua-vioc-dut01") == OPTIONS
    assert drive_options(argv, "ua-vioc-dut03") is None


def test_the_jobs_are_the_runs_workload_with_the_mirror_only_under_swallow_errors() -> None:
    config = {"host_ref": "ua-vioc-dut01", "format_options": OPTIONS, "measure": {"inject": ["swallow-errors"]}}
    read, write, healed = errprop.jobs(config)
    assert [read.name, write.name, healed.name] == ["errprop-read", "errprop-write", "errprop-healed"]
    gap = WORKLOAD.stride_bytes - WORKLOAD.request_bytes
    assert {f"--rw=read:{gap}", f"--iodepth={DEPTH}", f"--offset={WORKLOAD.offset_bytes}",
            f"--size={WORKLOAD.span_bytes}", "--continue_on_error=all",
            f"--ignore_error={':'.join(CONTINUE_ON)},{':'.join(CONTINUE_ON)},{':'.join(CONTINUE_ON)}"} <= set(read.args)
    assert read.target == f"/dev/mapper/{SWALLOW}" and "dmsetup --noudevsync create" in read.prepare
    assert "host inject ua-vioc-dut01 read 2116 16 '" in read.prepare and "host outcomes ua-vioc-dut01" in read.during
    assert "--verify=crc32c" in healed.args and healed.target == "/dev/$DEV"
    plain = errprop.jobs({**config, "measure": {"inject": []}})
    assert plain[0].target == "/dev/$DEV" and "dmsetup" not in plain[0].prepare
    with pytest.raises(CannotTest, match="no host_ref or format_options"):
        errprop.jobs({"host_ref": "ua-vioc-dut01"})


@pytest.mark.parametrize(("name", "attempts"), [("errprop-healthy-virtio-scsi", 6), ("errprop-healthy-virtio-blk", 1)])
def test_the_healthy_runs_replays_pass_each_failure_seen_once_by_the_application_and_retried_as_documented(
        name: str, attempts: int) -> None:
    r, b, run = recorded(name)
    verdict = kernel_log_checked(RULE.judge(r), b, RULE.injected(r) if RULE.injected else ())
    assert run["outcome"] == "passed" and verdict.passed, verdict.explain()
    p = verdict.properties
    assert (p["read_guest_failures"], p["write_guest_failures"]) == (2, 2)
    assert (p["read_host_failures"], p["write_host_failures"]) == (2 * attempts, 2 * attempts)
    assert (p["heal_errors"], p["heal_host_failures"], p["kernel_log_expected_errors"]) == (0, 0, 4)


def test_the_swallow_errors_runs_replay_fails_with_the_runs_fail_lines() -> None:
    r, b, run = recorded("errprop-swallow-errors-virtio-scsi")
    verdict = RULE.judge(r)
    assert run["outcome"] == "failed" and not verdict.passed
    assert [_words(p) for p in verdict.problems] == [_words(p) for p in run["problems"]]  # type: ignore[attr-defined]
    assert verdict.properties["read_host_failures"] == 12 and verdict.properties["read_guest_failures"] == 0
    # the kernel's lines of the rule's own range are no finding of the kernel-log check, as in the run
    assert RULE.injected is not None
    checked = kernel_log_checked(verdict, b, RULE.injected(r))
    assert checked.problems == verdict.problems and checked.properties["kernel_log_expected_errors"] == 4
    assert len(kernel_log_checked(verdict, b).problems) > len(verdict.problems)


def test_an_injection_the_host_never_fired_or_could_not_place_cannot_be_tested() -> None:
    r, _, _ = recorded("errprop-swallow-errors-virtio-scsi")
    quiet = [dataclasses.replace(c, answer="reads=0 writes=0 failed_reads=0 failed_writes=0") if c.name == "outcomes"
             else c for c in r.host_calls]
    with pytest.raises(CannotTest, match="never fired: the host failed no request"):
        RULE.judge(dataclasses.replace(r, host_calls=quiet))
    refused = [dataclasses.replace(c, error="blockdev-reopen refused", answer="ERROR blockdev-reopen refused")
               if c.name == "inject" else c for c in r.host_calls]
    with pytest.raises(CannotTest, match="the host's inject ua-vioc-dut01 read failed: blockdev-reopen refused"):
        RULE.judge(dataclasses.replace(r, host_calls=refused))


def test_a_device_that_keeps_errors_from_the_guest_fails_the_rule_blamed_on_the_hypervisor() -> None:
    r, _, _ = recorded("errprop-swallow-errors-virtio-scsi")
    ignoring = [dataclasses.replace(c, answer="policy rerror=ignore werror=report") if c.name == "inject" else c
                for c in r.host_calls]
    verdict = RULE.judge(dataclasses.replace(r, host_calls=ignoring))
    assert not verdict.passed and "rerror=ignore" in verdict.problems[0]
    assert verdict.hint is not None and verdict.hint.layer == "hypervisor"
