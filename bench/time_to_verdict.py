"""Time to the first queue-depth verdict, boot included, and what it is made of.

Prints: set-up time (image cache lookup or build, libvirt connection, accelerator choice),
boot-to-SSH time, and the time to the first verdict of the queue-depth rule on one
controller. Goal on a 2-core TCG machine: a verdict within 60 s for the embedded guest, and
within 90 s for a Debian cloud image (``--image``; the image's own boot under systemd and
cloud-init takes most of it; a pushed static fio, built once, adds its copy).

    python -m bench.time_to_verdict [--controller virtio-scsi] [--uri qemu:///system]
    python -m bench.time_to_verdict --image debian-12-genericcloud-amd64.qcow2 [--firmware uefi]
    python -m bench.time_to_verdict --test-image      # the project's own cloud-init test image
"""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path

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

GOAL_S = 60.0
#: Issue goal for a Debian cloud image under TCG: boot to SSH and the first verdict.
IMAGE_GOAL_S = 90.0


def boot_timeline(console: str) -> list[tuple[float, str]]:
    """The embedded guest's init stamps each console line with its uptime: ``[3.21] vioconform: network``."""
    return [(float(m.group(1)), m.group(2).strip())
            for m in re.finditer(r"^\[(\d+\.\d+)\] (vioconform: [^\n]*|VIOCONFORM-[A-Z]+)", console, re.MULTILINE)]


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.time_to_verdict", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--controller", default="virtio-scsi")
    ap.add_argument("--uri", default="qemu:///system")
    ap.add_argument("--window-s", type=float, default=WINDOW_S, help="the measured window (the suite's default)")
    ap.add_argument("--image", type=Path, default=None, help="a qcow2/raw image of your own instead of the embedded guest")
    ap.add_argument("--test-image", action="store_true", help="the project's own cloud-init test image (built once)")
    ap.add_argument("--firmware", choices=("bios", "uefi"), default="bios")
    args = ap.parse_args()
    t0 = time.monotonic()
    request: ImageRequest | None = None
    if args.image is not None or args.test_image:
        path = args.image if args.image is not None else ensure_test_image(print).path
        request = ImageRequest(inspect_image(path), args.firmware, None)
        build_seconds, goal = 0.0, IMAGE_GOAL_S
    else:
        build_seconds, goal = ensure_image(print).build_seconds, GOAL_S
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
        t_verdict = time.monotonic()
        guest = disk.guest
        console = guest.console_log_path.read_text(errors="replace") if guest.console_log_path else ""
    t_end = time.monotonic()
    print(f"accelerator:                 {guest.accel}")
    print(f"image:                       {request.info.path if request else 'embedded'}")
    print(f"image build (0 = cached):    {build_seconds:6.1f} s")
    print(f"image lookup, build or hash: {t_image - t0:6.1f} s")
    print(f"libvirt, accelerator, boot to SSH: {t_ssh - t_image:6.1f} s (boot alone {guest.boot_seconds:.1f} s)")
    print(f"first verdict ({args.controller}, {'pass' if verdict.passed else 'FAIL'}): {t_verdict - t0:6.1f} s "
          f"(goal {goal:.0f} s: {'met' if t_verdict - t0 <= goal else 'MISSED'})")
    print(f"teardown:                    {t_end - t_verdict:6.1f} s")
    stamps = boot_timeline(console)
    if stamps:
        print("the guest's boot (its uptime, s): " + "; ".join(f"{t:.2f} {what}" for t, what in stamps))
    print(verdict.explain())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
