"""Time to the first queue-depth verdict, boot included, and what it is made of.

Prints: set-up time (image cache lookup or build, libvirt connection, accelerator choice),
boot-to-SSH time, and the time to the first verdict of the queue-depth rule on one
controller. Goal on a 2-core TCG machine: a verdict within 60 s.

    python -m bench.time_to_verdict [--controller virtio-scsi] [--uri qemu:///system]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from fixtures.fio import FioJob
from fixtures.measure import GuestDisk, find_kernel_name, measure, read_guest_limits
from guest.build import ensure_image
from hypervisors.base import DiskSpec, GuestRequest
from hypervisors.cleanup import CleanupStack
from hypervisors.libvirt.backend import LibvirtBackend
from model.queue_depth import DepthPoint, judge_queue_depth
from transport.ssh import SshTransport, generate_run_key

GOAL_S = 60.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--controller", default="virtio-scsi")
    ap.add_argument("--uri", default="qemu:///system")
    ap.add_argument("--window-s", type=float, default=3.0)
    args = ap.parse_args()
    cleanup = CleanupStack()
    t0 = time.monotonic()
    try:
        image = ensure_image(print)
        backend = LibvirtBackend(cleanup, uri=args.uri, image=image)
        cleanup.push("libvirt connection", backend.close)
        run_dir = Path(tempfile.mkdtemp(prefix="vioconform-bench-"))
        cleanup.push("bench directory", lambda: __import__("shutil").rmtree(run_dir, ignore_errors=True))
        backend.accel(run_dir)
        _, pub = generate_run_key(run_dir)
        t_setup = time.monotonic()
        spec = DiskSpec(args.controller, 0)
        guest = backend.start_guest(GuestRequest(f"vioconform-bench-{int(t0)}", (spec,), run_dir, pub))
        ssh = SshTransport(guest.ssh)
        cleanup.push("ssh", ssh.close)
        t_ssh = time.monotonic()
        name = find_kernel_name(ssh, spec.serial)
        disk = GuestDisk(guest, backend, ssh, guest.disks[0], name, read_guest_limits(ssh, name), spec.label)
        points = []
        for depth in (1, 32):
            m = measure(disk, FioJob(f"qd{depth}", iodepth=depth), args.window_s)
            points.append(DepthPoint(depth, m.fio.jobs[0].total_iops, m.fio_depth_mode, m.guest.avg_queue_size,
                                     m.guest_inflight_mean, m.host_depth_median, min(m.host_depth_per_second),
                                     max(m.host_depth_per_second), "average"))
        verdict = judge_queue_depth(points, guest.disks[0].configured.queue_depth)
        t_verdict = time.monotonic()
    finally:
        cleanup.run()
    t_end = time.monotonic()
    print(f"accelerator:                 {guest.accel}")
    print(f"image build (0 = cached):    {image.build_seconds:6.1f} s")
    print(f"set-up (image, libvirt):     {t_setup - t0:6.1f} s")
    print(f"boot to SSH:                 {t_ssh - t_setup:6.1f} s")
    print(f"first verdict ({args.controller}, {'pass' if verdict.passed else 'FAIL'}): {t_verdict - t0:6.1f} s "
          f"(goal {GOAL_S:.0f} s: {'met' if t_verdict - t0 <= GOAL_S else 'MISSED'})")
    print(f"teardown:                    {t_end - t_verdict:6.1f} s")
    print(verdict.explain())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
