"""The guest-kernel matrix: the default suite (every rule on virtio-scsi and virtio-blk) on each of
Debian's kernels, and each fault with its own rule, as a table kernel x rule.

    python -m bench.kernels                                # the healthy default suite on every kernel
    python -m bench.kernels --faults                       # and every fault on the FAULT_KERNELS
    python -m bench.kernels --kernels 6.1.0-47,6.12 --faults --fault-kernels all

Each kernel is named as ``--guest-kernel`` takes it (images/kernels.py) and its image built once
(then cached). Per kernel: one run of the default suite that saves a baseline, then buffered-direct again
against it (its first run only measures); each fault then runs with its own rule only (``-k``), against
that kernel's baseline. A cell is one letter per controller (virtio-scsi, virtio-blk): P passed, F
failed, E error, S skipped, - not run. Prints markdown tables (docs/benchmarks.md keeps them); exits 1
if a healthy rule failed or errored, or a fault's own rule passed, errored or did not run on a controller
(a skip is a fault the disk or the kernel cannot take, with the reason: Linux 6.12 cannot take kernel-warning).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.suite_run import run_suite_at
from images.kernels import AptKernel, KernelUnknown, resolve
from model.faults import FAULTS
from model.rules import RULE_MODULES

#: The kernels of the matrix: Debian 12's 6.1 (an older and a newer ABI, and the newest, which
#: linux-image-amd64 points at), the 6.12 the issue was found on and the newest 6.12, each also in the
#: cloud flavour (fewer storage drivers; the virtio ones are there).
KERNELS = ("6.1.0-47", "6.1.0-50", "6.1.192", "6.12.100", "6.12",
           "6.1.0-47-cloud", "6.1.0-50-cloud", "6.1.192-cloud", "6.12.100-cloud", "6.12-cloud")
#: Where every fault runs by default: the oldest 6.1 and both 6.12s.
FAULT_KERNELS = ("6.1.0-47", "6.12.100", "6.12")
CONTROLLERS = ("virtio-scsi", "virtio-blk")
LETTERS = {"passed": "P", "failed": "F", "error": "E", "skipped": "S"}
#: A rule's test as ``-k`` selects it: its name with underscores (multi-queue's test is test_multiqueue).
K_OF = {"multi-queue": "multiqueue"}


def rules() -> list[str]:
    return sorted(m.RULE for m in RULE_MODULES)


def k_of(rule: str) -> str:
    return K_OF.get(rule, rule.replace("-", "_"))


@dataclass
class KernelRuns:
    """What one kernel gave: its rules' outcomes (``rule[config]`` -> outcome), its faults', the times."""

    kernel: AptKernel
    guest_kernel: str = ""
    healthy: dict[str, str] = field(default_factory=dict)
    faults: dict[str, dict[str, str]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)


def _run(work: Path, name: str, runs: KernelRuns, *args: str) -> tuple[dict[str, str], dict[str, str]]:
    t0 = time.monotonic()
    run = run_suite_at(work / name, "-q", "--controllers", ",".join(CONTROLLERS), "--guest-kernel",
                       runs.kernel.package, "--store", "none", *args, timeout=None)
    runs.seconds[name] = time.monotonic() - t0
    if not run.junit.exists():
        print(run.output[-3000:], file=sys.stderr)
        return {}, {}
    return run.outcomes(), run.suite_properties()


def cell(outcomes: dict[str, str], rule: str) -> str:
    return "".join(LETTERS.get(outcomes.get(f"{rule}[libvirt:{c}:latency5ms]", ""), "-") for c in CONTROLLERS)


def measure_kernel(work: Path, kernel: AptKernel, faults: bool) -> KernelRuns:
    runs = KernelRuns(kernel)
    base = work / f"baseline-{kernel.abi}-{kernel.flavour}.json"
    tag = f"{kernel.abi}-{kernel.flavour}"
    runs.healthy, props = _run(work, f"healthy-{tag}", runs, "--save-baseline", str(base))
    runs.guest_kernel = props.get("guest.kernel", "?")
    if base.exists():
        again, _ = _run(work, f"regime-{tag}", runs, "--baseline", str(base), "-k", k_of("buffered-direct"))
        runs.healthy.update(again)
    print(f"{kernel}: healthy {' '.join(f'{r}={cell(runs.healthy, r)}' for r in rules())} "
          f"({runs.seconds.get(f'healthy-{tag}', 0):.0f} s)", flush=True)
    if not faults:
        return runs
    for name, fault in FAULTS.items():
        extra = ("--baseline", str(base)) if base.exists() else ()
        runs.faults[name], _ = _run(work, f"{name}-{tag}", runs, "--inject", name, *extra, "-k", k_of(fault.rule))
        print(f"{kernel}: --inject {name}: {fault.rule} {cell(runs.faults[name], fault.rule)} "
              f"({runs.seconds[f'{name}-{tag}']:.0f} s)", flush=True)
    return runs


def healthy_bad(runs: KernelRuns) -> list[str]:
    """The healthy rules that failed or errored (buffered-direct's first, baseline-less skip aside)."""
    return [n for n, o in runs.healthy.items() if o in ("failed", "error")]


def fault_missed(runs: KernelRuns) -> list[str]:
    """The faults whose own rule passed or errored on a controller, or did not run: a skip is the fault
    that cannot be put into that disk or kernel (its reason in the JUnit file), never a miss."""
    missed = []
    for name, outcomes in runs.faults.items():
        letters = cell(outcomes, FAULTS[name].rule)
        if set(letters) - {"F", "S"}:
            missed.append(f"{name} ({letters})")
    return missed


def fault_skipped(runs: KernelRuns) -> list[str]:
    """The faults that skipped on every controller: they cannot be put into this kernel."""
    return [n for n, o in runs.faults.items() if set(cell(o, FAULTS[n].rule)) == {"S"}]


def tables(all_runs: list[KernelRuns]) -> str:
    """The markdown tables: kernel x rule (healthy), fault x kernel (the fault's own rule)."""
    head = "| kernel (package version) | guest's `uname -r` | " + " | ".join(rules()) + " | s |"
    lines = [head, "|" + "---|" * (len(rules()) + 3)]
    for r in all_runs:
        took = sum(v for k, v in r.seconds.items() if k.startswith(("healthy-", "regime-")))
        lines.append(f"| {r.kernel.abi}-{r.kernel.flavour} ({r.kernel.version}) | {r.guest_kernel} | "
                     + " | ".join(cell(r.healthy, rule) for rule in rules()) + f" | {took:.0f} |")
    with_faults = [r for r in all_runs if r.faults]
    if with_faults:
        lines += ["", "| fault (its rule) | " + " | ".join(f"{r.kernel.abi}-{r.kernel.flavour}" for r in with_faults)
                  + " |", "|" + "---|" * (len(with_faults) + 1)]
        for name, fault in FAULTS.items():
            lines.append(f"| {name} ({fault.rule}) | "
                         + " | ".join(cell(r.faults.get(name, {}), fault.rule) for r in with_faults) + " |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.kernels", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernels", default=",".join(KERNELS), help="kernels, as --guest-kernel takes them "
                    "(default: %(default)s)")
    ap.add_argument("--faults", action="store_true", help="also run every fault with its own rule")
    ap.add_argument("--fault-kernels", default=",".join(FAULT_KERNELS),
                    help="the kernels the faults run on, or 'all' (default: %(default)s)")
    args = ap.parse_args()
    try:
        kernels = [resolve(k) for k in args.kernels.split(",") if k.strip()]
        fault_kernels = kernels if args.fault_kernels == "all" else [resolve(k) for k in args.fault_kernels.split(",")]
    except KernelUnknown as e:
        ap.error(str(e))
    work = Path(tempfile.mkdtemp(prefix="vioconform-bench-kernels-"))
    all_runs = []
    for kernel in kernels:
        all_runs.append(measure_kernel(work, kernel, args.faults and kernel in fault_kernels))
    print(f"\n{tables(all_runs)}\n\nraw results: {work}")
    bad = [f"{r.kernel}: healthy {', '.join(healthy_bad(r))}" for r in all_runs if healthy_bad(r)]
    bad += [f"{r.kernel}: faults not caught {', '.join(fault_missed(r))}" for r in all_runs if fault_missed(r)]
    for r in all_runs:
        if fault_skipped(r):
            print(f"{r.kernel}: cannot take {', '.join(fault_skipped(r))} (skipped on every controller; the reason "
                  "is in each skip)")
    for line in bad:
        print(f"NOT AS EXPECTED: {line}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
