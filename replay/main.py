"""``replay``: the bundle's rule, replayed with plain QEMU; exit 0 pass, 1 fail, 125 cannot test.

Example::

    env -i PATH=/usr/bin:/bin ./replay --qemu /opt/qemu-9/bin/qemu-system-x86_64 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from model.errors import ParseError
from model.judging.verdict import RuleVerdict
from model.kernel_log_check import InjectedErrors, check_kernel_log, unread, with_kernel_log
from model.parse.dmesg import parse_kernel_log
from model.parse.qemutrace import parse_qemu_trace
from replay.cpio import newc_archive
from replay.guest_script import COUNTERS, SCRIPT_PATH, guest_script
from replay.qemu import Boot, CannotTest, HostAction, boot, file_disks, parse_command, plain_args, replay_cmdline
from replay.qmp import Qmp
from replay.rules import JobOutput, Replayed, ReplayRule, replay_rule
from replay.rules.evidence import read_counters

PASS, FAIL, CANNOT_TEST = 0, 1, 125
#: Seconds a boot may take beyond its fio jobs (TCG boots the embedded guest in 10-20 s).
BOOT_ALLOWANCE_S = 180.0
#: The bundle format this replay reads (fixtures/reproducer_files.py's BUNDLE_FORMAT).
BUNDLE_FORMAT = 1


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def _repeats(text: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"--repeats takes a whole number of 1 or more, e.g. 3; got {text!r}")
    return int(text)


def parse_args(argv: Sequence[str], bundle: Path) -> argparse.Namespace:
    p = _Parser(prog="replay", description="Replay this bundle's rule with plain QEMU: exit 0 pass, 1 fail, "
                                           "125 cannot test (QEMU does not start, the guest does not boot, the "
                                           "evidence is incomplete, a bad argument)")
    p.add_argument("--qemu", default=None, metavar="PATH",
                   help="the QEMU binary (default: the one the run used, from hypervisor/qemu-command.txt)")
    p.add_argument("--repeats", default=1, type=_repeats, metavar="N",
                   help="replay N times; the majority of repeats decides (a tie fails)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="where the console logs, traces and verdicts go (default: a new directory under /tmp)")
    p.add_argument("--bundle", default=str(bundle), metavar="DIR", help="the bundle (default: the replay's own)")
    return p.parse_args(list(argv))


def outcome(failed: int, repeats: int) -> int:
    """The exit code of ``failed`` failing repeats of ``repeats``: the majority decides, a tie fails."""
    return FAIL if failed * 2 >= repeats and failed else PASS


def _load(bundle: Path) -> dict[str, object]:
    try:
        config = json.loads((bundle / "configuration.json").read_text())
    except (OSError, ValueError) as e:
        raise CannotTest(f"{bundle} is not a reproducer bundle: configuration.json: {e}") from e
    if not isinstance(config, dict) or config.get("format") != BUNDLE_FORMAT:
        raise CannotTest(f"{bundle}/configuration.json is not bundle format {BUNDLE_FORMAT}")
    return config


def guest_outputs(b: Boot, names: Sequence[str]) -> tuple[str, dict[str, JobOutput]]:
    """The disk the guest found and each job's output; CannotTest where the guest did not boot, found no
    disk, failed a set-up step or did not finish a job."""
    device = next((line.split()[1] for line in b.lines if line.startswith("DISK ")), "")
    if not device:
        nodisk = any(line.startswith("NODISK") for line in b.lines)
        why = "the guest found no disk with the run's serial" if nodisk else "the guest did not boot"
        raise CannotTest(f"{why} (QEMU exit {b.exit_status}; {b.stderr.strip()[-300:] or 'QEMU said nothing'})")
    failed = [line for line in b.lines if line.startswith("SETUP ") and not line.startswith("SETUP 0 ")]
    if failed:
        raise CannotTest(f"the run's set-up failed in the guest: {failed[0]}")
    outs: dict[str, JobOutput] = {}
    for name in names:
        if f"BEGIN {name}" not in b.marks or f"END {name}" not in b.marks:
            raise CannotTest(f"fio job {name} did not finish in the guest (QEMU exit {b.exit_status})")
        parts: dict[str, list[str]] = {}
        for line in b.lines:
            job, _, rest = line.partition(" ")
            if job == name:
                part, _, text = rest.partition(" ")
                parts.setdefault(part, []).append(text)
        end = next(line for line in b.lines if line.startswith(f"END {name} "))
        outs[name] = JobOutput({k: "\n".join(v) for k, v in parts.items()}, b.marks[f"BEGIN {name}"],
                               b.marks[f"END {name}"], int(end.split()[2]), b.marks.get(f"OPEN {name}"),
                               b.marks.get(f"CLOSE {name}"))
    return device, outs


def host_actions(rule: ReplayRule) -> dict[str, HostAction]:
    """What the host does when the guest asks, for ``rule``'s replay: its own actions, and ``counters``
    (the disk's counters, which a counted job asks for before and after fio) for every rule."""
    return {COUNTERS: read_counters, **rule.actions}


def replay_once(bundle: Path, config: dict[str, object], qemu: str | None, out: Path) -> RuleVerdict:
    """One boot of the bundle's guest, its set-up and jobs, judged; CannotTest where it cannot be."""
    rule = replay_rule(str(config.get("rule")))
    jobs = rule.jobs(config)
    if (bundle / "guest" / "image.json").is_file() and not (bundle / "guest" / "initrd.img").is_file():
        raise CannotTest("the run booted a user's image (--image; guest/image.json names it): the replay boots only "
                         "the embedded guest, whose init it replaces with its own script, so far. The bundle holds "
                         "the image's path, size and sha256, QEMU's command line, the guest's commands and the "
                         "evidence for a replay by hand")
    try:
        argv = parse_command((bundle / "hypervisor" / "qemu-command.txt").read_text())
        initrd = (bundle / "guest" / "initrd.img").read_bytes()
        setup = json.loads((bundle / "guest" / "setup.json").read_text())
    except (OSError, ValueError) as e:
        raise CannotTest(f"the bundle is incomplete: {e}") from e
    out.mkdir(parents=True, exist_ok=True)
    files = {name: out / name for name in file_disks(argv)}
    for path in files.values():
        with open(path, "wb") as f:
            f.truncate(int(str(config.get("file_disk_bytes") or 1 << 30)))
    disk = config.get("disk")
    serial = str(disk.get("serial")) if isinstance(disk, dict) else "vioc-dut0"
    cmdline = str(config.get("kernel_cmdline", ""))
    drivers = next((w.split("=", 1)[1].split(",") for w in cmdline.split() if w.startswith("vioconform.drivers=")), [])
    disks = config.get("disks")
    probe = [str(d.get("serial")) for d in disks if isinstance(d, dict)] if isinstance(disks, list) else []
    script = guest_script(serial, drivers, setup, jobs, str(config.get("path_script") or ""),
                          str(config.get("limits_script") or ""), probe).encode()
    # The script's archive first, uncompressed (as the kernel's early microcode archive is): the
    # kernel unpacks it, skips its zero padding and unpacks the compressed image after it.
    (out / "initrd-replay.img").write_bytes(newc_archive([(SCRIPT_PATH, 0o100755, script)]) + initrd)
    events = config.get("trace_events") or []
    assert isinstance(events, list)
    args = [*plain_args(argv, files), "-kernel", str(bundle / "guest" / "vmlinuz"),
            "-initrd", str(out / "initrd-replay.img"), "-append", replay_cmdline(cmdline),
            "-serial", "stdio", "-no-reboot", "-msg", "timestamp=on", "-D", str(out / "qemu-trace.log"),
            *(a for e in events for a in ("-trace", f"enable={e}"))]
    with tempfile.TemporaryDirectory(prefix="vioc-qmp-") as sockets:  # short: a socket's path has 107 bytes
        qmp = Qmp(Path(sockets) / "qmp.sock")  # the host actions
        args += ["-qmp", f"unix:{qmp.path},server=on,wait=off"]
        (out / "qemu-command.txt").write_text(" ".join([qemu or argv[0], *args]) + "\n")
        window = sum(float(a.split("=")[1].rstrip("s")) for j in jobs for a in j.args if a.startswith("--runtime="))
        b = boot(qemu or argv[0], args, BOOT_ALLOWANCE_S + window + 15 * len(jobs), out / "console.log", qmp,
                 host_actions(rule))
        qmp_events = list(qmp.events)
    (out / "marks.json").write_text(json.dumps(b.marks, indent=1) + "\n")  # host wall times of each job
    if b.host_calls or qmp_events:  # what the host did when the guest asked (QEMU's counters too), and what QEMU said
        (out / "host-actions.json").write_text(json.dumps(
            {"calls": [vars(c) for c in b.host_calls], "events": qmp_events}, indent=1) + "\n")
    device, outputs = guest_outputs(b, [j.name for j in jobs])
    path_text, limits_text = (
        "\n".join(line.removeprefix(p) for line in b.lines if line.startswith(p)) for p in ("path limits ", "disk limits "))
    if device != config.get("kernel_name") and any("shell" in s for s in setup):
        raise CannotTest(f"the disk is {device} in the replay and was {config.get('kernel_name')} in the run: "
                         "the run's --guest-setup commands name it")
    try:
        trace = (out / "qemu-trace.log").read_text(errors="replace")
        requests = parse_qemu_trace(trace, str(out / "qemu-trace.log"))
    except (OSError, ParseError) as e:
        raise CannotTest(f"QEMU's trace could not be read: {e}") from e
    probed: dict[str, list[str]] = {}
    for line in b.lines:
        if line.startswith("probed "):
            serial, _, text = line.removeprefix("probed ").partition(" ")
            probed.setdefault(serial, []).append(text)
    replayed = Replayed(config, outputs, requests, device, path_text, limits_text,
                        {k: "\n".join(v) for k, v in probed.items()}, b.host_calls, qmp_events, trace)
    return kernel_log_checked(rule.judge(replayed), b, rule.injected(replayed) if rule.injected else ())


def kernel_log_checked(verdict: RuleVerdict, b: Boot, injected: Sequence[InjectedErrors] = ()) -> RuleVerdict:
    """The verdict with the kernel-log check, as the run judges every rule: what the guest's kernel
    logged from the set-up's end to the jobs' (model.kernel_log_check); ``injected``: where the rule
    made the disk fail on purpose (its own I/O errors)."""
    if "DONE" not in b.lines:
        return with_kernel_log(verdict, unread("dmesg", "the guest did not get to print its kernel log"))
    text = "\n".join(line.removeprefix("kernel log ") for line in b.lines if line.startswith("kernel log "))
    return with_kernel_log(verdict, check_kernel_log(parse_kernel_log(text, "dmesg"), "dmesg", injected=injected))


def main(argv: Sequence[str] | None = None) -> int:
    bundle = Path(sys.argv[0]).resolve().parent
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv, bundle)
    except UsageError as e:
        print(f"replay: {e} (exit 125: nothing was tested)", file=sys.stderr)
        return CANNOT_TEST
    bundle = Path(args.bundle).resolve()
    out = Path(args.out).resolve() if args.out else Path(tempfile.mkdtemp(prefix="vioconform-replay-"))
    failed = 0
    try:
        config = _load(bundle)
        print(f"replay: {config.get('rule')} on {config.get('test_id')}, {args.repeats} repeat(s), output in {out}")
        for k in range(1, args.repeats + 1):
            t0 = time.monotonic()
            verdict = replay_once(bundle, config, args.qemu, out / f"r{k}")
            (out / f"r{k}" / "verdict.txt").write_text(verdict.explain() + "\n")
            print(f"--- repeat {k}: {'PASSED' if verdict.passed else 'FAILED'} ({time.monotonic() - t0:.0f} s)")
            print(verdict.explain())
            failed += not verdict.passed
    except CannotTest as e:
        print(f"replay: CANNOT TEST: {e} (exit 125)", file=sys.stderr)
        return CANNOT_TEST
    except Exception as e:  # noqa: BLE001 - a fault of the replay itself is no verdict on the rule
        print(f"replay: CANNOT TEST: the replay failed: {type(e).__name__}: {e} (exit 125)", file=sys.stderr)
        return CANNOT_TEST
    code = outcome(failed, args.repeats)
    print(f"replay: {failed} of {args.repeats} repeat(s) FAILED: {'FAILED' if code else 'PASSED'} (exit {code})")
    return code
