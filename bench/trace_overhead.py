"""Cost of exact tracing: IOPS at depth 32 with and without QEMU trace events, in one run.

For each controller, fio runs at depth 32 on the 5 ms latency disk, alternating untraced and
traced windows (``--repeats`` each), and prints the median IOPS of both and the difference.
Goal: 3 % or less.

    python -m bench.trace_overhead [--repeats 3] [--window-s 3]
"""

from __future__ import annotations

import argparse
import statistics

from guest.tools.fio import FioJob
from measure.standalone import standalone_guest
from measure.window import measure
from model.types import DiskSpec

GOAL_PCT = 3.0


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.trace_overhead", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--window-s", type=float, default=3.0)
    args = ap.parse_args()
    rows = []
    specs = (DiskSpec("virtio-scsi", 0), DiskSpec("virtio-blk", 1))
    with standalone_guest(specs, "vioconform-bench-trace") as (_, disks):
        for disk in disks:
            plain: list[float] = []
            traced: list[float] = []
            depth: list[float] = []
            for _ in range(args.repeats):
                for exact, out in ((False, plain), (True, traced)):
                    m = measure(disk, FioJob("overhead", iodepth=32), args.window_s, exact=exact)
                    out.append(m.host.iops)
                    if exact and m.host_trace is not None:
                        depth.append(statistics.mean(r.outstanding_at_issue for r in m.host_trace.requests))
            p, t = statistics.median(plain), statistics.median(traced)
            rows.append((disk.attached.spec.controller, p, t, 100.0 * (p - t) / p, statistics.mean(depth),
                         plain, traced))
    print(f"{'controller':12} {'IOPS untraced':>14} {'IOPS traced':>12} {'cost':>7}  mean traced depth  (all runs)")
    for c, p, t, cost, d, plain, traced in rows:
        verdict = "met" if cost <= GOAL_PCT else "MISSED"
        print(f"{c:12} {p:14,.0f} {t:12,.0f} {cost:6.1f}%  {d:17.1f}  untraced {[round(x) for x in plain]} "
              f"traced {[round(x) for x in traced]}  (goal {GOAL_PCT:g} %: {verdict})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
