"""Reproducer bundles on real guests: a FAILED rule's bundle, copied alone to another directory,
replays with ``env -i PATH=/usr/bin:/bin ./replay`` (no venv, no checkout, no libvirt) to the same
failure and exit 1; a healthy bundle (``--reproducer all``) to exit 0; a failure that came from the
QEMU build under test (``--emulator``) to 1 on that build and 0 with ``--qemu`` at a healthy QEMU;
``--qemu /bin/false`` to 125; and a bisect driven by the bundle's replay over a row with a flaky build;
and the same for every rule the replay judges beyond queue-depth (io-size, direct-io, alignment, limits): the
bundles of a run with their faults replay to 1 with the run's failures, those of a healthy run to 0."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.replay_faithfulness import REPLAY_TIMEOUT_S, failures, handed_over, replay, suite_runs
from bench.suite_run import SuiteRun, run_suite_at
from tests.e2e.conftest import HOST_QEMU, qemu_wrapper

ROOT = Path(__file__).resolve().parents[2]
SCSI = "libvirt:virtio-scsi:latency5ms"
BLK = "libvirt:virtio-blk:latency5ms"
#: The rules the replay judges beyond queue-depth whose faults one guest carries at once (one faulted
#: run and one healthy run cover them all); discard's replay reads the host's side through host actions
#: (the device's counters, the allocation of the replay's own copy of the disk's file).
GUEST_RULES = ("io-size", "direct-io", "alignment", "limits", "discard")


@pytest.mark.long
def test_a_tcq_off_failure_replays_as_the_same_failure_anywhere(tmp_path: Path) -> None:
    run = run_suite_at(tmp_path / "r", "--controllers", "virtio-scsi", "-k", "queue_depth", "--inject", "tcq-off")
    assert run.returncode == 1, run.output[-3000:]
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


@pytest.fixture
def one_command_per_lun() -> Iterator[Path]:
    """A QEMU build under test whose virtio-scsi takes one command per LUN (the host's QEMU with
    ``-global virtio-scsi-pci.cmd_per_lun=1``), at a path the QEMU user can read."""
    with qemu_wrapper("qemu-cmd-per-lun-1", "-global virtio-scsi-pci.cmd_per_lun=1") as w:
        yield w


@pytest.mark.long
def test_a_failure_of_the_qemu_under_test_replays_on_it_and_passes_on_a_healthy_qemu(
        one_command_per_lun: Path, tmp_path: Path) -> None:
    run = run_suite_at(tmp_path / "r", "--controllers", "virtio-scsi,virtio-blk", "-k", "queue_depth",
                       "--emulator", str(one_command_per_lun), "--reproducer", "all")
    assert run.returncode == 1, run.output[-3000:]
    assert run.outcomes() == {f"queue-depth[{SCSI}]": "failed", f"queue-depth[{BLK}]": "passed"}, run.output[-3000:]
    scsi = handed_over(run, f"queue-depth[{SCSI}]", tmp_path / "scsi")
    assert (scsi / "hypervisor" / "qemu-command.txt").read_text().startswith(f"{one_command_per_lun} \\\n")
    on_build = replay(scsi, tmp_path, "--out", str(tmp_path / "o1"))
    assert on_build.returncode == 1, on_build.stdout[-3000:] + on_build.stderr[-2000:]
    healthy = replay(scsi, tmp_path, "--qemu", HOST_QEMU, "--out", str(tmp_path / "o2"))
    assert healthy.returncode == 0, healthy.stdout[-3000:] + healthy.stderr[-2000:]
    assert "replay: 0 of 1 repeat(s) FAILED: PASSED (exit 0)" in healthy.stdout
    bisect_through_the_replay(scsi, one_command_per_lun, tmp_path)
    blk = handed_over(run, f"queue-depth[{BLK}]", tmp_path / "blk")
    passed = replay(blk, tmp_path, "--out", str(tmp_path / "o3"))
    assert passed.returncode == 0, passed.stdout[-3000:] + passed.stderr[-2000:]
    assert run.left_behind == []


def bisect_through_the_replay(bundle: Path, broken: Path, tmp_path: Path) -> None:
    """``python -m reports.bisect --bundle`` over the host's QEMU (good), a build that breaks every
    other boot (flaky: one of its two repeats fails) and the broken build (bad), the rule read from the
    bundle: the flaky build is neither good nor as bad as the bad end, so the bisect names the broken
    build or says it cannot decide, never the flaky one alone."""
    flaky_dir = tmp_path / "flaky"
    flaky_dir.mkdir()
    flaky = flaky_dir / "qemu-every-other-boot"
    flaky.write_text(f'#!/bin/bash\nn=$(cat {flaky_dir}/boots 2>/dev/null || echo 0); echo $((n + 1)) > {flaky_dir}/boots\n'
                     f'if (( n % 2 == 0 )); then exec {HOST_QEMU} "$@" -global virtio-scsi-pci.cmd_per_lun=1; fi\n'
                     f'exec {HOST_QEMU} "$@"\n')
    flaky.chmod(0o755)
    builds = tmp_path / "builds.txt"
    builds.write_text(f"{HOST_QEMU}\n{flaky}\n{broken}\n")
    done = subprocess.run([sys.executable, "-m", "reports.bisect", "--builds", str(builds), "--bundle", str(bundle),
                           "--repeats", "2", "--out", str(tmp_path / "bisect")], cwd=ROOT, capture_output=True,
                          text=True, timeout=6 * REPLAY_TIMEOUT_S, check=False)
    said = done.stdout + done.stderr
    assert "bisect of queue-depth over 3 builds" in said, said[-3000:]
    assert f"first bad build: {flaky}" not in said, said[-3000:]
    if done.returncode == 0:
        assert f"first bad build: {broken}" in done.stdout.splitlines(), said[-3000:]
    else:
        assert done.returncode == 3 and "cannot decide" in said and str(flaky) in said, said[-3000:]
    assert (tmp_path / "bisect" / "bisect.html").is_file() and (tmp_path / "bisect" / "junit.xml").is_file()


@pytest.mark.long
def test_each_rules_bundle_replays_to_the_runs_verdict_anywhere(tmp_path: Path) -> None:
    """One run with io-breakup, flush-dropped, misaligned, kernel-warning and discard-off fails io-size,
    direct-io, alignment, limits and discard; each bundle, copied alone elsewhere, replays to 1 with the run's FAIL lines
    (their figures and disk names aside).
    A healthy run's bundles (``--reproducer all``) replay to 0."""
    faulty, healthy = suite_runs(list(GUEST_RULES), "virtio-scsi", tmp_path)
    for run, outcome, code in ((faulty, "failed", 1), (healthy, "passed", 0)):
        assert run.returncode == code, run.output[-3000:]
        for rule in GUEST_RULES:
            case = f"{rule}[{SCSI}]"
            assert run.outcomes()[case] == outcome, run.output[-3000:]
            bundle = handed_over(run, case, tmp_path / f"{rule}-{outcome}")
            done = replay(bundle, tmp_path, "--out", str(tmp_path / f"out-{rule}-{outcome}"))
            assert done.returncode == code, f"{rule}: " + done.stdout[-3000:] + done.stderr[-2000:]
            said = failures(SuiteRun.failure_text(run.cases()[case]))
            assert failures(done.stdout) == said and bool(said) == bool(code), (rule, said, done.stdout[-3000:])
            assert f"replay: {code} of 1 repeat(s) FAILED" in done.stdout
    assert faulty.left_behind == [] and healthy.left_behind == []
