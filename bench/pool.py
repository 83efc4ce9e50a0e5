"""The controller matrix on one worker and on two (pytest-xdist ``-n``): wall time and the ratio.

Runs the conformance suite as a user does, with ``--controllers`` (default: the two default
controllers and ahci, nvme) and ``-k`` (default: queue_depth), once without workers and once
with ``-n WORKERS``; each worker boots its own guest and takes whole configurations
(host x controller). Prints each run's wall time, its verdicts, and the ratio.

On a 2-core TCG host the two guests share the cores and each worker adds a boot, so the gain is
the overlap of one guest's boot and SSH round trips with the other's I/O (the figures:
docs/benchmarks.md, "Host pools"). On a KVM host with more cores the guests barely use the host CPU
and the configurations run side by side: expect the time to fall towards 1/N of the I/O time plus
one boot.

    python -m bench.pool [--workers 2] [--controllers virtio-scsi,virtio-blk,ahci,nvme] [-k queue_depth]
                         [--libvirt-uri URI ...]
    python -m bench.pool --starts 50 [--busy-cores 1]   (worker start-up: bench/pool_starts.py)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from bench.suite_run import run_suite_at
from reports.exitcodes import Exit


def timed(results: Path, args: list[str]) -> tuple[float, dict[str, str], str]:
    t0 = time.monotonic()
    run = run_suite_at(results, *args, timeout=3600)
    took = time.monotonic() - t0
    if run.returncode not in (0, 1, Exit.HARNESS_ERROR):  # verdicts were reached or errors recorded
        raise SystemExit(f"the suite failed to run (exit {run.returncode}):\n{run.output[-3000:]}")
    return took, run.outcomes(), run.output


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if any(a == "--starts" or a.startswith("--starts=") for a in argv):
        from bench import pool_starts  # the worker start-up test: python -m bench.pool --starts 50

        return pool_starts.main(argv)
    ap = argparse.ArgumentParser(prog="python -m bench.pool", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--controllers", default="virtio-scsi,virtio-blk,ahci,nvme")
    ap.add_argument("-k", dest="select", default="queue_depth")
    ap.add_argument("--libvirt-uri", action="append", default=None,
                    help="a libvirt host of the pool (repeatable; default: this machine's)")
    args = ap.parse_args(argv)
    common = ["--controllers", args.controllers, "-k", args.select]
    for uri in args.libvirt_uri or []:
        common += ["--libvirt-uri", uri]
    with tempfile.TemporaryDirectory(prefix="vioconform-bench-pool-") as tmp:
        one, v1, _ = timed(Path(tmp) / "one", common)
        many, vn, _ = timed(Path(tmp) / "many", [*common, "-n", str(args.workers)])
    print(f"configurations: {len(v1)} ({args.controllers}; -k {args.select})")
    print(f"1 worker:   {one:6.1f} s  verdicts {sorted(set(v1.values()))}")
    print(f"{args.workers} workers: {many:6.1f} s  verdicts {sorted(set(vn.values()))}")
    print(f"ratio (1 worker / {args.workers} workers): {one / many:.2f}")
    if v1 != vn:
        print("NOTE: the verdicts differ between the runs:",
              {k: (v1.get(k), vn.get(k)) for k in sorted(set(v1) | set(vn)) if v1.get(k) != vn.get(k)})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
