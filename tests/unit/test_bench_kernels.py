"""bench.kernels' verdict on a matrix: a healthy rule failed, a fault its rule did not catch, a fault
the kernel cannot take (skipped on every controller), and the markdown tables, on outcomes as the suite's
JUnit files name them."""

from __future__ import annotations

from bench.kernels import KernelRuns, cell, fault_missed, fault_skipped, healthy_bad, rules, tables
from images.kernels import AptKernel

K612 = AptKernel("linux-image-6.12.118+deb12-amd64", "6.12.118-1~deb12u1")


def _both(rule: str, scsi: str, blk: str) -> dict[str, str]:
    return {f"{rule}[libvirt:virtio-scsi:latency5ms]": scsi, f"{rule}[libvirt:virtio-blk:latency5ms]": blk}


def test_a_fault_the_kernel_cannot_take_is_no_miss_and_one_its_rule_passes_is() -> None:
    runs = KernelRuns(K612, "6.12.118+deb12-amd64", healthy={**_both("discard", "passed", "error")},
                      faults={"tcq-off": _both("queue-depth", "failed", "skipped"),
                              "kernel-warning": _both("limits", "skipped", "skipped"),
                              "discard-off": _both("discard", "failed", "passed"),
                              "lba-shift": {}})
    assert cell(runs.healthy, "discard") == "PE" and cell(runs.healthy, "alignment") == "--"
    assert healthy_bad(runs) == ["discard[libvirt:virtio-blk:latency5ms]"]
    assert fault_missed(runs) == ["discard-off (FP)", "lba-shift (--)"]
    assert fault_skipped(runs) == ["kernel-warning"]


def test_the_tables_are_kernel_by_rule_and_fault_by_kernel() -> None:
    runs = KernelRuns(K612, "6.12.118+deb12-amd64",
                      healthy={k: v for r in rules() for k, v in _both(r, "passed", "passed").items()},
                      faults={"tcq-off": _both("queue-depth", "failed", "skipped")}, seconds={"healthy-x": 150.4})
    md = tables([runs]).splitlines()
    assert md[0].startswith("| kernel (package version) | guest's `uname -r` | alignment | block-size | buffered-direct |")
    assert md[2] == ("| 6.12.118+deb12-amd64 (6.12.118-1~deb12u1) | 6.12.118+deb12-amd64 | "
                     + " | ".join(["PP"] * len(rules())) + " | 150 |")
    assert md[4] == "| fault (its rule) | 6.12.118+deb12-amd64 |"
    assert "| tcq-off (queue-depth) | FS |" in md and "| io-breakup (io-size) | -- |" in md
