"""Time to the first queue-depth verdict, boot included, and what it is made of.

Prints: set-up time (image cache lookup or build, libvirt connection, accelerator choice),
boot-to-SSH time, and the time to the first verdict of the queue-depth rule on one
controller. Goal on a 2-core TCG machine: a verdict within 60 s.

    python -m bench.time_to_verdict [--controller virtio-scsi] [--uri qemu:///system]
"""

from __future__ import annotations

import argparse
import time

from guest.image.build import ensure_image
from guest.tools.fio import FioJob
from measure.standalone import standalone_guest
from measure.window import depth_point, measure
from model.rules.queue_depth import judge_queue_depth
from model.types import DiskSpec

GOAL_S = 60.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--controller", default="virtio-scsi")
    ap.add_argument("--uri", default="qemu:///system")
    ap.add_argument("--window-s", type=float, default=3.0)
    args = ap.parse_args()
    t0 = time.monotonic()
    image = ensure_image(print)
    t_image = time.monotonic()
    with standalone_guest([DiskSpec(args.controller, 0)], f"vioconform-bench-{int(t0)}", uri=args.uri) as (_, disks):
        t_ssh = time.monotonic()
        disk = disks[0]
        points = []
        for depth in (1, 32):
            points.append(depth_point(measure(disk, FioJob(f"qd{depth}", iodepth=depth), args.window_s)))
        verdict = judge_queue_depth(points, disk.attached.configured.queue_depth)
        t_verdict = time.monotonic()
        guest = disk.guest
    t_end = time.monotonic()
    print(f"accelerator:                 {guest.accel}")
    print(f"image build (0 = cached):    {image.build_seconds:6.1f} s")
    print(f"image lookup or build:       {t_image - t0:6.1f} s")
    print(f"libvirt, accelerator, boot to SSH: {t_ssh - t_image:6.1f} s (boot alone {guest.boot_seconds:.1f} s)")
    print(f"first verdict ({args.controller}, {'pass' if verdict.passed else 'FAIL'}): {t_verdict - t0:6.1f} s "
          f"(goal {GOAL_S:.0f} s: {'met' if t_verdict - t0 <= GOAL_S else 'MISSED'})")
    print(f"teardown:                    {t_end - t_verdict:6.1f} s")
    print(verdict.explain())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
