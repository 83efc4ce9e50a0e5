"""Reproducer bundles on real guests: tcq-off's queue-depth failure, with its numbers, and its bundle,
copied alone to another directory, replays with ``env -i PATH=/usr/bin:/bin ./replay`` (no venv, no
checkout, no libvirt) to the same failure and exit 1; ``--qemu /bin/false`` to 125.

The other bundles replay where their runs are made already, not in runs of their own: the bundles of
io-size, direct-io, alignment and limits of tests/e2e/test_rules_guest.py's faulted run to 1, and those of
its healthy run (``--reproducer all``) to 0 (discard's too); discard-off's in tests/e2e/test_discard.py;
the failure of a QEMU build under test (``--emulator``) to 1 on that build and to 0 with ``--qemu`` at a
healthy QEMU, and a bisect driven by the replay, in tests/e2e/test_qemu_build.py."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from bench.replay_faithfulness import handed_over, replay
from bench.suite_run import SuiteRun, run_suite_at

SCSI = "libvirt:virtio-scsi:latency5ms"
BLK = "libvirt:virtio-blk:latency5ms"


@pytest.mark.long
def test_a_tcq_off_failure_carries_its_numbers_and_replays_as_the_same_failure_anywhere(tmp_path: Path) -> None:
    run = run_suite_at(tmp_path / "r", "--controllers", "virtio-scsi,virtio-blk", "-k", "queue_depth",
                       "--inject", "tcq-off")
    assert run.returncode == 1, run.output[-3000:]
    the_numbers(run)
    bundle = handed_over(run, f"queue-depth[{SCSI}]", tmp_path / "vendor")
    failure = SuiteRun.failure_text(run.cases()[f"queue-depth[{SCSI}]"])
    assert f"reproducer: {run.results / 'reproducers' / bundle.name}" in run.output
    assert f'href="reproducers/{bundle.name}/README.md"' in (run.results / "report.html").read_text()
    assert (bundle / "guest" / "setup.json").read_text().count('"device/queue_depth"') == 1
    assert "echo 1 > /sys/block/sd" in (bundle / "guest" / "commands.txt").read_text()
    shutil.rmtree(run.results)  # nothing of the run is left but the copy
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    done = replay(bundle, elsewhere, "--out", str(tmp_path / "out"))
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    # the run's failures, in the run's words: the guest's configuration caps the depth, the host saw 1
    cap = re.search(r"FAIL: the guest's configuration caps the depth under the offered 32: /sys/block/(sd[a-z]+)/device/"
                    r"queue_depth = 1 \(the driver set 128\), under the device's own limit 128\.", done.stdout)
    assert cap is not None, done.stdout[-3000:]
    # the same words; the disk's name may differ (the HBA's two disks are probed in either order at a boot)
    ran = re.search(r"/sys/block/(sd[a-z]+)/device/queue_depth = 1", failure)
    assert ran is not None, failure
    assert cap.group(0).replace(f"/{cap.group(1)}/", f"/{ran.group(1)}/") in failure, failure
    assert "FAIL: at offered depth 32 the host saw 1.0 in flight" in done.stdout, done.stdout[-3000:]
    assert "replay: 1 of 1 repeat(s) FAILED: FAILED (exit 1)" in done.stdout
    false = replay(bundle, elsewhere, "--qemu", "/bin/false", "--out", str(tmp_path / "out-false"))
    assert false.returncode == 125, false.stdout + false.stderr
    assert "CANNOT TEST: the guest did not boot (QEMU exit 1" in false.stderr


def the_numbers(run: SuiteRun) -> None:
    """tcq-off's failure carries the numbers: the offered depth, the guest-observed and host-observed
    depths, IOPS; virtio-blk, which has no SCSI queue depth, skips saying so."""
    cases = run.cases()
    failure = cases[f"queue-depth[{SCSI}]"].find("failure")
    assert failure is not None, run.output
    text = failure.text or ""  # the whole explanation; the message is its first FAIL: line
    assert re.search(r"offered\s+32: IOPS [\d,]+; guest: fio at depth 32, aqu-sz [\d.]+, inflight [\d.]+; host depth",
                     text), text
    assert float(SuiteRun.props(cases[f"queue-depth[{SCSI}]"])["qd32_host_depth"]) < 3, text
    skipped = cases[f"queue-depth[{BLK}]"].find("skipped")
    assert skipped is not None and "no SCSI queue_depth" in skipped.get("message", ""), run.output[-3000:]
    assert run.left_behind == []
