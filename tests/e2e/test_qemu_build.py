"""A QEMU build under test on real guests, against the host's QEMU: the build is a wrapper around the
host's QEMU that adds ``-global virtio-scsi-pci.cmd_per_lun=1`` (virtio-scsi then advertises one command
per LUN, which the suite never asks for and never sees on the command line).

Two runs of one nightly series, made once for the module (one boot each): the host's QEMU, then the build
(``--emulator``), each running limits and queue-depth on virtio-scsi. On them:

- the fingerprint: a given ``--emulator`` runs the guest, and the record says which QEMU ran it;
- blame: the build's failures are blamed on the hypervisor from QMP's own answer (``qom-get`` says 1
  where 128 was asked);
- the series: ``compare --last 2`` follows it across the build change, names the change first, and
  finds the regressions the build brought;
- the reproducer: the build's queue-depth bundle, handed over alone, replays to 1 on that build and to 0
  with ``--qemu`` at the host's QEMU; a bisect driven by its replay over a row with a flaky build never
  names the flaky build alone.

(A guest whose queue depth is lowered after boot, blamed on the guest configuration, is
tests/e2e/test_blame.py's.)
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench.replay_faithfulness import REPLAY_TIMEOUT_S, handed_over, replay
from bench.suite_run import SuiteRun, run_suite_at
from tests.e2e.conftest import HOST_QEMU, ROOT, qemu_wrapper

SCSI = "libvirt:virtio-scsi:latency5ms"
HBA = "/machine/peripheral/ua-vioc-virtio-scsi/virtio-backend"
#: What the build adds to the host's QEMU.
BREAKS = "-global virtio-scsi-pci.cmd_per_lun=1"
SERIES = "qemu_nightly"


@dataclass(frozen=True)
class Nights:
    """The series' two runs and where they are stored."""

    build: Path  # the QEMU build under test
    healthy: SuiteRun  # night 1: the host's QEMU
    broken: SuiteRun  # night 2: the build
    store: str


@pytest.fixture(scope="module")
def nights(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Nights]:
    """The build at a path the QEMU user can read (not pytest's root-only tmp_path), and the series'
    two runs: the host's QEMU, then the build."""
    work = tmp_path_factory.mktemp("nightly")
    store = f"sqlite:///{work / 'nightly.db'}"
    args = ("--controllers", "virtio-scsi", "-k", "limits or queue_depth", "--series", SERIES, "--store", store)
    with qemu_wrapper("qemu-cmd-per-lun-1", BREAKS) as build:
        healthy = run_suite_at(work / "night1", *args)
        broken = run_suite_at(work / "night2", *args, "--emulator", str(build))
        yield Nights(build, healthy, broken, store)


def test_a_given_emulator_runs_the_guest_and_the_fingerprint_says_so(nights: Nights) -> None:
    run, build = nights.broken, nights.build
    assert run.returncode == 1 and set(run.outcomes().values()) == {"failed"}, run.output[-3000:]  # judged: it ran
    props = run.suite_properties()
    assert props["qemu.emulator"] == str(build)
    assert props["qemu.machine"].startswith("pc-i440fx-")  # "pc" as libvirt resolved it
    assert props["qemu.accel"] in ("kvm", "tcg") and props["qemu.version"][0].isdigit()
    assert props["libvirt.version"].count(".") == 2 and props["libvirt.daemon_version"].count(".") == 2
    assert props["host.kernel"] and props["vioconform_revision"]
    options = json.loads(props["options"])
    assert options["emulator"] == str(build) and options["machine"] == "pc"
    assert f"<td>qemu.emulator</td><td>{build}</td>" in (run.results / "report.html").read_text()


def test_a_device_advertising_less_than_asked_is_blamed_on_the_hypervisor(nights: Nights) -> None:
    run = nights.broken
    assert run.returncode == 1, run.output[-3000:]
    cases = run.cases()
    limits, depth = cases[f"limits[{SCSI}]"], cases[f"queue-depth[{SCSI}]"]
    assert SuiteRun.props(limits)["blame"] == "hypervisor", SuiteRun.failure_text(limits)
    failure = limits.find("failure")
    assert failure is not None
    assert re.fullmatch(
        rf"FAIL: dut disk sd[a-z]+: queue depth: the suite asked for 128, the device advertises 1 \(cmd_per_lun 1 of "
        rf"{HBA}\), the guest sees 1 \[blame: hypervisor\]", failure.get("message", "")), failure.get("message")
    assert "the hypervisor configured" not in run.output
    props = SuiteRun.props(depth)
    assert props["blame"] == "hypervisor", SuiteRun.failure_text(depth)
    assert props["blame_reason"].endswith(f"the device advertises queue depth 1 (cmd_per_lun 1 of {HBA}) where the "
                                          "suite asked for 128"), props["blame_reason"]
    assert props["device_queue_depth_advertised"] == "1" and float(props["qd32_host_depth"]) < 3, props
    assert "guest's configuration caps" not in SuiteRun.failure_text(depth)
    suite = run.suite_properties()
    assert suite["disk.virtio-scsi.advertised.queue_depth"] == "1", suite
    assert suite["disk.virtio-scsi.device.ua-vioc-virtio-scsi/virtio-backend.cmd_per_lun"] == "1"
    assert suite["disk.virtio-scsi.advertised.source"].startswith("QEMU 7.2")
    assert "blame: hypervisor" in run.output and "hypervisor</td>" in (run.results / "report.html").read_text()
    assert run.left_behind == []


def test_one_series_on_two_qemu_builds_compares_with_last_2(nights: Nights) -> None:
    first, second = nights.healthy, nights.broken
    assert first.returncode == 0, first.output[-3000:]
    assert second.returncode == 1, second.output[-3000:]
    assert first.suite_properties()["series"] == second.suite_properties()["series"] == SERIES
    old = first.suite_properties()["qemu.emulator"]
    done = subprocess.run([sys.executable, "-m", "reports.compare", "--store", nights.store, "--last", "2"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    # the build change first (vioconform's own revision follows it if the checkout changed meanwhile)
    assert lines[0].startswith(f"run 1 -> 2: qemu.emulator {old} -> {nights.build}; "), lines[0]
    assert "; unchanged: qemu.version, qemu.machine, qemu.accel, libvirt.version" in lines[0], lines[0]
    assert "Regressions (passed -> failed): 2\n" in done.stdout, done.stdout
    for rule in ("limits", "queue-depth"):
        assert f"\n  {rule}[{SCSI}]: passed -> failed" in done.stdout, done.stdout
    assert lines[-1] == "2 regression(s)."


def test_a_failure_of_the_qemu_under_test_replays_on_it_and_passes_on_a_healthy_qemu(nights: Nights,
                                                                                     tmp_path: Path) -> None:
    run = nights.broken
    assert run.outcomes()[f"queue-depth[{SCSI}]"] == "failed", run.output[-3000:]
    scsi = handed_over(run, f"queue-depth[{SCSI}]", tmp_path / "scsi")
    assert (scsi / "hypervisor" / "qemu-command.txt").read_text().startswith(f"{nights.build} \\\n")
    on_build = replay(scsi, tmp_path, "--out", str(tmp_path / "o1"))
    assert on_build.returncode == 1, on_build.stdout[-3000:] + on_build.stderr[-2000:]
    healthy = replay(scsi, tmp_path, "--qemu", HOST_QEMU, "--out", str(tmp_path / "o2"))
    assert healthy.returncode == 0, healthy.stdout[-3000:] + healthy.stderr[-2000:]
    assert "replay: 0 of 1 repeat(s) FAILED: PASSED (exit 0)" in healthy.stdout
    bisect_through_the_replay(scsi, nights.build, tmp_path)


def bisect_through_the_replay(bundle: Path, broken: Path, tmp_path: Path) -> None:
    """``python -m reports.bisect --bundle`` over the host's QEMU (good), a build that breaks every
    other boot (flaky: one of its two repeats fails) and the broken build (bad), the rule read from the
    bundle: the flaky build is neither good nor as bad as the bad end, so the bisect names the broken
    build or says it cannot decide, never the flaky one alone."""
    flaky_dir = tmp_path / "flaky"
    flaky_dir.mkdir()
    flaky = flaky_dir / "qemu-every-other-boot"
    flaky.write_text(f'#!/bin/bash\nn=$(cat {flaky_dir}/boots 2>/dev/null || echo 0); echo $((n + 1)) > {flaky_dir}/boots\n'
                     f'if (( n % 2 == 0 )); then exec {HOST_QEMU} "$@" {BREAKS}; fi\n'
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
