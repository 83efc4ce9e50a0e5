"""The replay's pure parts (replay/): its cpio writer, QEMU's command line without libvirt, the guest's
script, its arguments and exit codes, and that it needs nothing but Python's standard library."""

from __future__ import annotations

import ast
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from model.judging.verdict import RuleVerdict
from model.parse.qemutrace import TracedRequest, parse_qemu_trace
from replay import main as cli
from replay.bundled import PACKAGES, ROOT, write_replay
from replay.cpio import newc_archive, read_newc
from replay.guest_script import PREFIX, SCRIPT_PATH, Job, guest_script
from replay.qemu import Boot, CannotTest, file_disks, parse_command, plain_args, replay_cmdline, replay_line
from replay.rules import RULES, JobOutput, Replayed, replay_rule

DATA = Path(__file__).resolve().parents[1] / "data" / "replay"
LIBVIRT_LOG = DATA / "libvirt-virtio-scsi.qemu.log"


def _command() -> list[str]:
    from fixtures.reproducer_files import qemu_command
    return parse_command(qemu_command(LIBVIRT_LOG.read_text()))


# --- cpio ---------------------------------------------------------------------------------------------

def test_a_newc_archive_reads_back_and_is_padded() -> None:
    data = newc_archive([("vioconform-replay", 0o100755, b"#!/bin/sh\necho hi\n"), ("a/b", 0o100644, b"x")])
    assert len(data) % 512 == 0
    assert read_newc(data) == [("vioconform-replay", 0o100755, b"#!/bin/sh\necho hi\n"), ("a/b", 0o100644, b"x")]


@pytest.mark.skipif(shutil.which("cpio") is None, reason="GNU cpio is not installed")
def test_gnu_cpio_lists_and_extracts_the_archive(tmp_path: Path) -> None:
    """GNU cpio, an independent reader of the format the kernel reads, takes the archive whole."""
    (tmp_path / "a.cpio").write_bytes(newc_archive([(SCRIPT_PATH, 0o100755, b"#!/bin/sh\n:\n")]))
    with open(tmp_path / "a.cpio", "rb") as f:
        listed = subprocess.run(["cpio", "-it", "--quiet"], stdin=f, capture_output=True, text=True, check=True)
    assert listed.stdout.split() == [SCRIPT_PATH]
    with open(tmp_path / "a.cpio", "rb") as f:
        subprocess.run(["cpio", "-id", "--quiet"], stdin=f, cwd=tmp_path, check=True)
    out = tmp_path / SCRIPT_PATH
    assert out.read_bytes() == b"#!/bin/sh\n:\n" and os.stat(out).st_mode & 0o777 == 0o755


# --- QEMU's command line --------------------------------------------------------------------------------

def test_the_libvirt_command_keeps_the_disks_and_drops_libvirts_plumbing(tmp_path: Path) -> None:
    argv = _command()
    assert argv[0] == "/usr/bin/qemu-system-x86_64"
    assert file_disks(argv) == ["dut1.img"]
    args = plain_args(argv, {"dut1.img": tmp_path / "dut1.img"})
    text = " ".join(args)
    for option in ("-S", "-name", "-chardev", "-mon", "-add-fd", "-netdev", "-kernel", "-initrd", "-append", "-D",
                   "-sandbox", "-no-shutdown", "-uuid"):
        assert option not in args, option
    for value in ("virtio-net-pci", "isa-serial", "masterKey0", "hostfwd", "/dev/fdset"):
        assert value not in text, value
    assert '"driver": "null-co"' in text and '"latency-ns": 5000000' in text
    assert '"driver":"virtio-scsi-pci"' in text and '"num_queues":2' in text
    assert f'"filename":"{tmp_path / "dut1.img"}"' in text
    assert args[args.index("-machine") + 1].startswith("pc-i440fx-7.2")
    assert args[args.index("-accel") + 1] == "tcg"
    assert args[args.index("-m") + 1] == "512"


def test_the_replays_kernel_command_line_has_its_init_and_no_key() -> None:
    line = replay_cmdline("console=ttyS0 quiet vioconform.drivers=virtio_scsi,sd_mod vioconform.key=AAAA rdinit=/x")
    assert line == f"console=ttyS0 quiet vioconform.drivers=virtio_scsi,sd_mod rdinit=/{SCRIPT_PATH} panic=-1"


# --- the guest's script ---------------------------------------------------------------------------------

def test_the_guest_script_applies_the_set_up_in_order_then_runs_each_job() -> None:
    script = guest_script("vioc-dut0", ["virtio_scsi", "sd_mod"],
                          [{"sysfs": "device/queue_depth", "value": "1"}, {"shell": "echo 'a b' > /tmp/x"}],
                          [Job("qd1", ("--name=qd1", "--iodepth=1")), Job("qd32", ("--name=qd32", "--iodepth=32"))])
    assert script.startswith("#!/bin/busybox sh\n")
    order = [script.index(s) for s in ("modprobe", "echo 1 > /sys/block/$DEV/device/queue_depth",
                                       "( echo 'a b' > /tmp/x )", "say BEGIN qd1", "--iodepth=1 --filename=/dev/$DEV",
                                       "say END qd1", "say BEGIN qd32", "say DONE", "poweroff -f\n")]
    assert order == sorted(order)
    assert "for m in virtio_pci virtio_scsi sd_mod;" in script
    with_path = guest_script("vioc-dut0", [], [{"sysfs": "device/queue_depth", "value": "1"}], [Job("qd1", ())],
                             "d=/sys/block/{disk}\nr $d/dev dev")
    assert (with_path.index("device/queue_depth") < with_path.index("d=/sys/block/$DEV\nr $d/dev dev")
            < with_path.index("dump path limits /tmp/read") < with_path.index("say BEGIN qd1"))
    assert f'echo "{PREFIX} $*"' in script


def test_the_queue_depth_jobs_follow_the_runs_depths_and_window() -> None:
    jobs = replay_rule("queue-depth").jobs({"measure": {"depths": [1, 8, 32], "window_s": 3.0}})
    assert [j.name for j in jobs] == ["qd1", "qd8", "qd32"]
    assert "--iodepth=8" in jobs[1].args and "--time_based" in jobs[1].args and "--rw=randread" in jobs[1].args
    # the run's window, measured inside fio's run after its ramp; fio outlasts it and is stopped
    assert (jobs[1].window_s, jobs[1].ramp_s) == (3.0, 1.0) and "--runtime=34s" in jobs[1].args
    script = guest_script("s", [], [], jobs[:1])
    order = [script.index(s) for s in ("fio --name=qd1", "usleep 1000000", "cat /proc/diskstats > /tmp/d0",
                                       "say OPEN qd1", "usleep 3000000", "cat /proc/diskstats > /tmp/d1",
                                       "say CLOSE qd1", "kill -INT $FIO", "dump qd1 diskstats0", "say END qd1")]
    assert order == sorted(order)


def test_a_rule_the_replay_cannot_judge_is_cannot_test_with_the_reason() -> None:
    with pytest.raises(CannotTest, match="cannot judge rule a-newer-rule yet"):
        replay_rule("a-newer-rule")


# --- arguments and exit codes ---------------------------------------------------------------------------

@pytest.mark.parametrize(("failed", "repeats", "code"), [(0, 1, 0), (1, 1, 1), (1, 3, 0), (2, 3, 1), (1, 2, 1),
                                                         (0, 5, 0), (5, 5, 1)])
def test_the_majority_of_repeats_decides_and_a_tie_fails(failed: int, repeats: int, code: int) -> None:
    assert cli.outcome(failed, repeats) == code


@pytest.mark.parametrize("argv", [["--repeats", "0"], ["--repeats", "x"], ["--bogus"], ["positional"]])
def test_a_bad_argument_is_cannot_test(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(argv) == cli.CANNOT_TEST
    err = capsys.readouterr().err
    assert err.startswith("replay: ") and "exit 125" in err


def test_the_arguments_default_to_the_bundle_beside_the_replay(tmp_path: Path) -> None:
    args = cli.parse_args(["--qemu", "/x/qemu", "--repeats", "3", "--out", "o"], tmp_path)
    assert (args.qemu, args.repeats, args.out, args.bundle) == ("/x/qemu", 3, "o", str(tmp_path))


def _fake_bundle(root: Path, rule: str = "queue-depth") -> Path:
    """A bundle with every file the replay reads; its guest never boots (no real kernel)."""
    (root / "hypervisor").mkdir(parents=True)
    (root / "guest").mkdir()
    from fixtures.reproducer_files import qemu_command
    (root / "hypervisor" / "qemu-command.txt").write_text(qemu_command(LIBVIRT_LOG.read_text()))
    (root / "guest" / "initrd.img").write_bytes(b"")
    (root / "guest" / "vmlinuz").write_bytes(b"")
    (root / "guest" / "setup.json").write_text("[]")
    (root / "configuration.json").write_text(json.dumps({
        "format": 1, "rule": rule, "test_id": "libvirt:virtio-scsi:latency5ms", "kernel_name": "sda",
        "disk": {"serial": "vioc-dut0"}, "measure": {"depths": [1, 32], "window_s": 2.0},
        "kernel_cmdline": "console=ttyS0", "trace_events": ["scsi_req_parsed"], "file_disk_bytes": 1 << 20}))
    return root


@pytest.mark.parametrize(("qemu", "said"), [("/bin/false", "the guest did not boot (QEMU exit 1"),
                                            ("/nonexistent/qemu", "QEMU did not start: /nonexistent/qemu")])
def test_a_qemu_that_does_not_run_is_cannot_test(tmp_path: Path, qemu: str, said: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    bundle = _fake_bundle(tmp_path / "b")
    code = cli.main(["--bundle", str(bundle), "--qemu", qemu, "--out", str(tmp_path / "out")])
    assert code == cli.CANNOT_TEST
    assert said in capsys.readouterr().err


def test_a_rule_the_replay_cannot_judge_exits_125(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bundle = _fake_bundle(tmp_path / "b", rule="a-newer-rule")
    assert cli.main(["--bundle", str(bundle), "--qemu", "/bin/true", "--out", str(tmp_path / "o")]) == 125
    assert "cannot judge rule a-newer-rule yet" in capsys.readouterr().err


def test_a_bundle_of_a_users_image_exits_125_and_says_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bundle = _fake_bundle(tmp_path / "b")
    (bundle / "guest" / "initrd.img").unlink()
    (bundle / "guest" / "vmlinuz").unlink()
    (bundle / "guest" / "image.json").write_text('{"path": "/images/x.qcow2", "sha256": "ab"}')
    assert cli.main(["--bundle", str(bundle), "--qemu", "/bin/false", "--out", str(tmp_path / "o")]) == 125
    assert "the run booted a user's image (--image; guest/image.json names it)" in capsys.readouterr().err


def test_a_fault_of_the_replay_itself_is_cannot_test_never_a_failure(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A damaged bundle (setup.json an object, not a list) breaks the replay itself: 125, which a
    bisect skips, never 1, which it would take for a bad commit."""
    bundle = _fake_bundle(tmp_path / "b")
    (bundle / "guest" / "setup.json").write_text('{"sysfs": "x"}')
    assert cli.main(["--bundle", str(bundle), "--qemu", "/bin/false", "--out", str(tmp_path / "o")]) == 125
    assert "CANNOT TEST: the replay failed: TypeError" in capsys.readouterr().err


def test_a_directory_that_is_no_bundle_exits_125(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--bundle", str(tmp_path), "--out", str(tmp_path / "o")]) == 125
    assert "is not a reproducer bundle" in capsys.readouterr().err


# --- the standard library alone -------------------------------------------------------------------------

def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_what_the_replay_carries_imports_only_the_standard_library() -> None:
    foreign = {f"{path.relative_to(ROOT)}: {name}" for package in PACKAGES for path in (ROOT / package).rglob("*.py")
               for name in _imports(path) if name not in sys.stdlib_module_names and name not in PACKAGES}
    assert not foreign


def test_the_zipapp_runs_with_an_empty_environment_from_another_directory(tmp_path: Path) -> None:
    """``env -i PATH=/usr/bin:/bin ./replay --help``: no venv, no checkout on the path."""
    replay = write_replay(tmp_path / "replay")
    replay.chmod(0o755)
    other = tmp_path / "elsewhere"
    other.mkdir()
    done = subprocess.run(["env", "-i", "PATH=/usr/bin:/bin", str(replay), "--help"], cwd=other, check=False,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "--qemu PATH" in done.stdout and "125 cannot" in " ".join(done.stdout.split())
    with pytest.raises(FileExistsError):
        write_replay(replay)


# --- judging a recorded replay --------------------------------------------------------------------------

def _recorded(drop: str = "") -> tuple[Boot, list[TracedRequest]]:
    """The replay of a healthy virtio-scsi bundle (2026-12-07, TCG, 5 ms null-co disk): the guest's
    lines, the host wall time of each job's start and end, QEMU's trace."""
    text = (DATA / "healthy-virtio-scsi.console.log").read_text()
    lines = [x for x in (replay_line(c) for c in text.splitlines()) if x is not None and not x.startswith(drop or "\0")]
    marks = json.loads((DATA / "healthy-virtio-scsi.marks.json").read_text())
    with gzip.open(DATA / "healthy-virtio-scsi.qemu-trace.log.gz", "rt") as f:
        requests = parse_qemu_trace(f.read())
    return Boot(lines, {k: v for k, v in marks.items() if not k.startswith(drop or "\0")}, 0), requests


def judge(config: dict[str, object], outputs: dict[str, JobOutput], requests: list[TracedRequest], device: str,
          path: str = "") -> RuleVerdict:
    return RULES["queue-depth"].judge(Replayed(config, outputs, requests, device, path))


CONFIG = {"rule": "queue-depth", "device_queue_depth": 128, "advertised_queue_depth": [128, "cmd_per_lun 128"],
          "measure": {"depths": [1, 32], "window_s": 2.0}}


def test_a_recorded_healthy_replay_passes_with_the_rules_judge() -> None:
    b, requests = _recorded()
    device, outputs = cli.guest_outputs(b, ["qd1", "qd32"])
    assert device == "sda"
    verdict = judge(CONFIG, outputs, requests, device)
    assert verdict.passed, verdict.explain()
    p = verdict.properties
    assert (p["qd1_host_depth"], p["qd32_host_depth"], p["qd32_iops"], p["qd32_guest_aqu_sz"]) == (1.0, 16.0, 988.4, 10.48)
    assert p["device_queue_depth_advertised"] == 128


def test_the_same_figures_fail_where_the_device_was_asked_for_less() -> None:
    """The rule's own judge decides: a bar above what the host saw fails it (a depth 1 device
    that must queue, --require-queuing)."""
    b, requests = _recorded()
    device, outputs = cli.guest_outputs(b, ["qd1", "qd32"])
    config = {**CONFIG, "device_queue_depth": 1, "measure": {"require_queuing": True}}
    verdict = judge(config, outputs, requests, device)
    assert not verdict.passed
    assert "the device has no command queuing and --require-queuing is set" in verdict.problems


def test_a_job_that_did_not_finish_is_cannot_test() -> None:
    b, _ = _recorded(drop="END qd32")
    with pytest.raises(CannotTest, match="fio job qd32 did not finish in the guest"):
        cli.guest_outputs(b, ["qd1", "qd32"])


def test_no_traced_request_is_incomplete_evidence() -> None:
    b, _ = _recorded()
    device, outputs = cli.guest_outputs(b, ["qd1", "qd32"])
    with pytest.raises(CannotTest, match="QEMU traced no request of the disk during the job"):
        judge(CONFIG, outputs, [], device)


@pytest.mark.parametrize(("lines", "said"), [([], "the guest did not boot"),
                                             (["NODISK sdb"], "the guest found no disk with the run's serial"),
                                             (["DISK sda", "SETUP 1 '/sys/block/$DEV/x = 1'"],
                                              "the run's set-up failed in the guest: SETUP 1")])
def test_a_guest_that_did_not_get_to_its_jobs_is_cannot_test(lines: list[str], said: str) -> None:
    with pytest.raises(CannotTest, match=re.escape(said)):
        cli.guest_outputs(Boot(lines, {}, 0), ["qd1"])


def test_the_guests_limits_read_after_the_set_up_fail_the_rule_as_in_the_run() -> None:
    """The run's sysfs script, run by the replay after the set-up, says queue_depth 1 where the driver
    set 128 (the run's probe): the rule's judge names the guest's configuration, as the run did."""
    import dataclasses

    from model.device_limits import GuestLimits
    probed = GuestLimits("sda", 256, 1280, 32767, 512, 512, 0, "write back", 0, 1, 1, scsi_queue_depth=128,
                         can_queue=256, cmd_per_lun=128, driver="sd")
    b, requests = _recorded()
    device, outputs = cli.guest_outputs(b, ["qd1", "qd32"])
    path = "dev=8:0\nnr_requests=256\nqueue_depth=1\nscsi_host=host0\ncan_queue=256\nscheduler=[none] mq-deadline\n"
    config = {**CONFIG, "probed_limits": dataclasses.asdict(probed)}
    verdict = judge(config, outputs, requests, device, path)
    assert not verdict.passed
    assert verdict.problems[0].startswith("the guest's configuration caps the depth under the offered 32: "
                                          "/sys/block/sda/device/queue_depth = 1 (the driver set 128), under the "
                                          "device's own limit 128."), verdict.problems
    assert verdict.lines[1] == ("guest limits on the path: queue/nr_requests 256, device/queue_depth 1 (the driver "
                                "set 128), host0/can_queue 256; scheduler none; cgroup io.max: none")
