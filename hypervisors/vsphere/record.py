"""Record vscsiStats histograms and vCenter disk counters of a named VM for N seconds.

Usage::

    VIOCONFORM_VCENTER_PASSWORD=... python -m hypervisors.vsphere.record \\
        --target vsphere.toml --vm my-vm --seconds 60 [--disk scsi0:1] [--source ssh|service] [--out FILE]

Output (stdout or FILE): first, for each disk, the counters as ``name,value`` lines under a
``Counters:`` title; then each disk's histograms of the interval in vscsiStats's ``-p all -c``
CSV form, so ``model.parse.vscsistats_csv.parse_vscsistats_csv`` reads the file back (it skips what
comes before the first histogram)::

    Counters: vCenter realtime virtualDisk,virtual machine,my-vm,virtual disk,scsi0:1,samples,3,seconds,60
    read_oio,31.000
    ...
    Histogram: IO lengths of commands,virtual machine worldGroupID,2099979,virtual disk handleID,8194 (scsi0:1)
    ...

Counters need the interval to span at least one whole realtime sample (20 s on ESXi).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path

from pyVmomi import vim

from hypervisors.cli import emit, output_file, seconds_to_record
from hypervisors.vsphere.config import TARGET_ENV, TARGET_EXAMPLE, parse_target
from hypervisors.vsphere.controllers import disk_instances
from hypervisors.vsphere.perf import REALTIME_INTERVAL_ID, DiskPerf
from hypervisors.vsphere.perfdata import PerfWindowSummary
from hypervisors.vsphere.vcenter import VCenter, devices, host_name
from hypervisors.vsphere.vscsistats import VscsiStatsInterval, open_source
from model.errors import HypervisorError
from model.parse.histogram import HistogramSet


def counters_block(vm: str, disk: str, summary: PerfWindowSummary) -> str:
    values = asdict(summary)
    head = (f"Counters: vCenter realtime virtualDisk,virtual machine,{vm},virtual disk,{disk},"
            f"samples,{values.pop('samples')},seconds,{values.pop('seconds')}")
    return "\n".join([head, *(f"{k},{v:.3f}" for k, v in values.items())]) + "\n"


def histograms_block(diff: HistogramSet) -> str:
    return diff.to_vscsistats_csv(diff.world_group_id or 0, diff.handle_id or 0, diff.disk_label)


def record(args: argparse.Namespace) -> str:
    vc = VCenter(parse_target(args.target))
    try:
        vm = vc.find(vim.VirtualMachine, args.vm, "VM")
        disks = args.disk or sorted(disk_instances(devices(vm)))
        perf = DiskPerf(vc)
        for disk in disks:
            perf.check_available(vm, disk)
        source = open_source(vc, vc.config, host_name(vm), args.source, args.esxi_key or vc.config.esxi_key_path)
        try:
            intervals = [VscsiStatsInterval(source, args.vm, disk) for disk in disks]
            for interval in intervals:
                interval.begin()
            start_ns = perf.server_now_ns()
            time.sleep(args.seconds)
            end_ns = perf.server_now_ns()
            diffs = [interval.end() for interval in intervals]
            for interval in intervals:
                interval.stop()
        finally:
            source.close()
        counters = [counters_block(args.vm, disk, PerfWindowSummary.of(
            perf.window(vm, disk, start_ns, end_ns, min_samples=1, wait_s=2 * REALTIME_INTERVAL_ID + 10)))
            for disk in disks]
        return "".join(counters + [histograms_block(diff) for diff in diffs])
    finally:
        vc.close()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m hypervisors.vsphere.record", description=__doc__.splitlines()[0])
    p.add_argument("--target", default=os.environ.get(TARGET_ENV),
                   help=f"{TARGET_EXAMPLE} or a TOML config file (default: ${TARGET_ENV})")
    p.add_argument("--vm", required=True, help="name of the VM to record")
    p.add_argument("--seconds", type=seconds_to_record, required=True, help="how long to record")
    p.add_argument("--disk", action="append", help="disk instance, e.g. scsi0:1 (repeatable; default: every disk)")
    p.add_argument("--source", choices=("ssh", "service"), default="ssh",
                   help="vscsiStats over SSH to the ESXi host, or the ServiceManager's VscsiStats service")
    p.add_argument("--esxi-key", type=Path, help="private key for root on the ESXi host (default: esxi_key_path)")
    p.add_argument("--out", type=output_file, help="write here instead of stdout")
    args = p.parse_args(argv)
    if not args.target:
        p.error(f"give --target or set {TARGET_ENV}")
    if args.seconds <= 0:
        p.error("--seconds must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        text = record(args)
    except HypervisorError as e:
        print(f"record: error: {e}", file=sys.stderr)
        return 2
    return emit(text, args.out, "record")


if __name__ == "__main__":
    sys.exit(main())
