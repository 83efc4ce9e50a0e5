"""Time of the whole controller matrix with the queue-depth rule, on one guest.

One guest carries every controller (a 5 ms latency disk under test and a file-backed scratch
disk on each: the suite's disks, model/disks.py); the queue-depth rule runs on each controller in turn.
Prints the boot time, each controller's verdict and the time it took, and the total.
Goal on this 2-core TCG machine: the whole matrix in 5 minutes or less.

    python -m bench.matrix [--controllers nvme,ahci] [--window-s 3] [--depths 1,32]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from fixtures.argtypes import argument_type
from fixtures.options_measure import _window_s
from guest.tools.fio import FioJob
from hypervisors.libvirt.controllers import CONTROLLERS
from images.build import ensure_image
from images.build_error import ImageBuildError
from measure.standalone import standalone_guest
from measure.window import measure
from model.disks import suite_disks
from model.errors import FioError, HypervisorError
from model.rules.queue_depth import DEFAULT_DEPTHS, judge_queue_depth, offered_depths
from suites.queue_depth_points import depth_point, guest_path

GOAL_S = 300.0


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.matrix", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--controllers", default=",".join(CONTROLLERS))
    ap.add_argument("--uri", default="qemu:///system")
    ap.add_argument("--window-s", type=_window_s, default=3.0)  # the suite's checks of these values
    ap.add_argument("--depths", type=argument_type(offered_depths), default=DEFAULT_DEPTHS)
    args = ap.parse_args()
    try:
        return _matrix(args)
    except (HypervisorError, FioError, ImageBuildError) as e:
        print(f"bench.matrix: error: {e}", file=sys.stderr)
        return 2


def _matrix(args: argparse.Namespace) -> int:
    names = [c for c in args.controllers.split(",") if c]
    depths = args.depths
    t0 = time.monotonic()
    ensure_image(print)
    rows = []
    with standalone_guest(suite_disks(names), f"vioconform-matrix-{os.getpid()}", uri=args.uri) as (_, disks):
        t_ssh = time.monotonic()
        guest = disks[0].guest
        for disk in (d for d in disks if d.attached.spec.role == "dut"):
            t = time.monotonic()
            points = [depth_point(measure(disk, FioJob(f"qd{n}", iodepth=n), args.window_s)) for n in depths]
            device_depth = disk.attached.configured.queue_depth
            verdict = judge_queue_depth(points, device_depth, guest_path=guest_path(disk, FioJob("qd1").bs_bytes))
            rows.append((disk.attached.spec.controller, verdict, points, device_depth, time.monotonic() - t))
    t_end = time.monotonic()
    print(f"accelerator: {guest.accel}; {len(names)} controllers, {len(disks)} disks in one guest")
    print(f"boot to SSH:           {guest.boot_seconds:6.1f} s (start to all disks found {t_ssh - t0:.1f} s)")
    for name, verdict, points, device_depth, seconds in rows:
        top = points[-1]  # measured in increasing depth
        print(f"  {name:<13} {'pass' if verdict.passed else 'FAIL'} in {seconds:5.1f} s: device depth "
              f"{device_depth}, qd{top.offered_depth} host depth {top.host_depth:.1f}, "
              f"IOPS {points[0].iops:,.0f} -> {top.iops:,.0f}"
              + "".join(f"; {n}" for n in verdict.notes))
    total = t_end - t0
    print(f"whole matrix:          {total:6.1f} s (goal {GOAL_S:.0f} s: {'met' if total <= GOAL_S else 'MISSED'}), "
          f"teardown included")
    return 0 if all(row[1].passed for row in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
