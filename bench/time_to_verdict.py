"""Time to the first queue-depth verdict, boot included, and what it is made of.

Prints: set-up time (image cache lookup or build, libvirt connection, accelerator choice),
boot-to-SSH time, and the time to the first verdict of the queue-depth rule on one
controller, from the process's own start (the interpreter and its imports included) as well as
from the bench's first line. Goal on a 2-core TCG machine (bench/goals.py): the embedded guest's
first verdict within 10 s of the process's start. An image of your own (``--image``) has no goal of
its own for its first verdict: its goal is the whole default suite's (``bench.phases --test-image``).

    python -m bench.time_to_verdict [--controller virtio-scsi] [--uri qemu:///system]
    python -m bench.time_to_verdict --image debian-12-genericcloud-amd64.qcow2 [--firmware uefi]
    python -m bench.time_to_verdict --test-image      # the project's own cloud-init test image
    python -m bench.time_to_verdict --stamps          # and each step and guest command on stderr, timed
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

from bench.goals import FIRST_VERDICT_GOAL_S, IMAGE_SUITE_GOAL_S, against
from bench.stamps import Stamps
from bench.testimage import ensure_test_image
from fixtures.options_guest import (
    EMBEDDED_BOOT_TIMEOUT_S,
    EMBEDDED_MEMORY_MIB,
    IMAGE_BOOT_TIMEOUT_S,
    IMAGE_MEMORY_MIB,
)
from guest.tools.fio import FioJob
from hypervisors.base import ImageRequest
from hypervisors.libvirt.defaults import WINDOW_S
from images.build import ensure_image
from images.user import inspect_image
from measure.standalone import standalone_guest
from measure.window import measure
from model.rules.queue_depth import judge_queue_depth
from model.types import DiskSpec
from suites.queue_depth_points import depth_point, guest_path
from transport.ssh import SshTransport


def process_age_s(pid: str = "self") -> float:
    """Seconds since the process started (its start time in /proc/PID/stat, field 22, against the
    system's uptime; both in clock ticks of 10 ms): what a user waits, the interpreter's start and
    the imports before the bench's first line included."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    started_s = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22 of the whole line; the 20th after the name
    return float(Path("/proc/uptime").read_text().split()[0]) - started_s


def verdict_line(controller: str, passed: bool, inside_s: float, whole_s: float, image: bool) -> str:
    """The first verdict's line: both times, and the goal for the embedded guest's (whole process)."""
    goal = (f"no goal for an image's first verdict: the default suite's on an image is {IMAGE_SUITE_GOAL_S:.0f} s, "
            "bench.phases --test-image" if image else against(whole_s, FIRST_VERDICT_GOAL_S))
    return (f"first verdict ({controller}, {'pass' if passed else 'FAIL'}): {whole_s:6.1f} s from the process's "
            f"start, {inside_s:.1f} s from the bench's first line ({goal})")


def boot_timeline(console: str) -> list[tuple[float, str]]:
    """The embedded guest's init stamps each console line with its uptime: ``[3.21] vioconform: network``."""
    return [(float(m.group(1)), m.group(2).strip())
            for m in re.finditer(r"^\[(\d+\.\d+)\] (vioconform: [^\n]*|VIOCONFORM-[A-Z]+)", console, re.MULTILINE)]


def stamp_steps(stamps: Stamps) -> None:
    """``--stamps``: the steps of the first verdict's path, each stamped as it starts and ends, and every
    guest command with its time (bench/stamps.py)."""
    from hypervisors.libvirt.backend import LibvirtBackend
    from measure import disk, standalone, window

    for name in ("ensure_image", "measure", "guest_path", "judge_queue_depth"):
        stamps.wrap(sys.modules[__name__], name)
    for name in ("make_run_dir", "generate_run_key", "prepare_disk"):
        stamps.wrap(standalone, name)
    for name in ("__init__", "sweep_leftovers", "accel", "stage_boot_files", "boot", "wait_for_console"):
        stamps.wrap(LibvirtBackend, name)
    stamps.wrap(SshTransport, "to_guest")
    stamps.wrap(disk, "ask_advertised")  # the hypervisor's answer (QMP), between the guest's set-up commands
    for name in ("_wait_for_first_request", "_measure_window"):
        stamps.wrap(window, name)
    stamps.wrap_commands(SshTransport)


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.time_to_verdict", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--controller", default="virtio-scsi")
    ap.add_argument("--uri", default="qemu:///system")
    ap.add_argument("--window-s", type=float, default=WINDOW_S, help="the measured window (the suite's default)")
    ap.add_argument("--image", type=Path, default=None, help="a qcow2/raw image of your own instead of the embedded guest")
    ap.add_argument("--test-image", action="store_true", help="the project's own cloud-init test image (built once)")
    ap.add_argument("--firmware", choices=("bios", "uefi"), default="bios")
    ap.add_argument("--stamps", action="store_true",
                    help="print each step and guest command on stderr, with the seconds since the process's start")
    args = ap.parse_args()
    if args.stamps:
        stamp_steps(Stamps(process_age_s(), sys.stderr))
    t0 = time.monotonic()
    request: ImageRequest | None = None
    if args.image is not None or args.test_image:
        path = args.image if args.image is not None else ensure_test_image(print).path
        request = ImageRequest(inspect_image(path), args.firmware, None)
        build_seconds = 0.0
    else:
        build_seconds = ensure_image(print).build_seconds
    t_image = time.monotonic()
    # The suite's defaults for the guest's size and patience (fixtures/options.py).
    with standalone_guest([DiskSpec(args.controller, 0)], f"vioconform-bench-{int(t0)}", uri=args.uri,
                          image=request, memory_mib=IMAGE_MEMORY_MIB if request else EMBEDDED_MEMORY_MIB,
                          boot_timeout_s=IMAGE_BOOT_TIMEOUT_S if request else EMBEDDED_BOOT_TIMEOUT_S) as (_, disks):
        t_ssh = time.monotonic()
        disk = disks[0]
        points = []
        for depth in (1, 32):
            points.append(depth_point(measure(disk, FioJob(f"qd{depth}", iodepth=depth), args.window_s)))
        verdict = judge_queue_depth(points, disk.attached.configured.queue_depth,
                                    guest_path=guest_path(disk, FioJob("qd1").bs_bytes))
        t_verdict, whole_s = time.monotonic(), process_age_s()
        guest = disk.guest
        console = guest.console_log_path.read_text(errors="replace") if guest.console_log_path else ""
    t_end = time.monotonic()
    print(f"accelerator:                 {guest.accel}")
    print(f"image:                       {request.info.path if request else 'embedded'}")
    print(f"image build (0 = cached):    {build_seconds:6.1f} s")
    print(f"image lookup, build or hash: {t_image - t0:6.1f} s")
    print(f"libvirt, accelerator, boot to SSH: {t_ssh - t_image:6.1f} s (boot alone {guest.boot_seconds:.1f} s)")
    print(verdict_line(args.controller, verdict.passed, t_verdict - t0, whole_s, request is not None))
    print(f"teardown:                    {t_end - t_verdict:6.1f} s")
    stamps = boot_timeline(console)
    if stamps:
        print("the guest's boot (its uptime, s): " + "; ".join(f"{t:.2f} {what}" for t, what in stamps))
    print(verdict.explain())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
