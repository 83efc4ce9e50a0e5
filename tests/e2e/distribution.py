"""Which rule the project's tests run on a full distribution, and on which controller.

The embedded guest's tests (tests/e2e/test_rules_guest.py) run every rule on virtio-scsi and
virtio-blk, and the 6.12 kernel's (tests/e2e/test_guest_kernels.py) do it again: the controllers'
paths through the rules are proven there. What a full distribution adds is the guest's side: its
own tools (util-linux, e2fsprogs, kmod, coreutils where the embedded guest has busybox's applets),
a login user whose every command goes through ``sudo -n``, systemd and udev, Debian's cloud kernel
and the suite's pushed static fio. None of that depends on the controller, so the cloud-init test
image runs each rule once (tests/e2e/test_image_boot.py), on the controller where the rule does
the most in the guest; both controllers are still in that guest, so both drivers load and are
recorded. docs/benchmarks.md ("Which test proves what") has the whole table.
"""

from __future__ import annotations

#: rule -> the controller it runs on in the healthy test image's run.
ON_THE_TEST_IMAGE = {
    # SCSI's queue_depth, which virtio-blk lacks (the UEFI boot's tcq-off sets it on the same image:
    # tests/e2e/test_remote_libvirt.py)
    "queue-depth": "virtio-scsi",
    # the SCSI command timeout the rules read, which virtio-blk lacks
    "stall-tolerance": "virtio-scsi",
    "error-propagation": "virtio-scsi",
    # the resize notice only virtio-scsi has a device property for
    "resize": "virtio-scsi",
    # a disk hot-added on the SCSI bus, with udev running
    "hotplug": "virtio-scsi",
    # sd re-reads the cache mode when the partition table is re-read (the set-up runs again)
    "alignment": "virtio-scsi",
    # limits on virtio-scsi on the test image: tests/e2e/test_remote_libvirt.py (UEFI, a remote host)
    "limits": "virtio-blk",
    "io-size": "virtio-blk",
    "direct-io": "virtio-blk",
    "buffered-direct": "virtio-blk",
    "data-integrity": "virtio-blk",
    "discard": "virtio-blk",
    "multi-queue": "virtio-blk",
}


def selection(plan: dict[str, str]) -> str:
    """The pytest ``-k`` expression that selects each rule of ``plan`` on its controller only: the
    suite's test modules are named as the rules are (suites/test_queue_depth.py), the tests' ids
    carry the controller (``[libvirt:virtio-scsi:latency5ms]``)."""
    return " or ".join(f"(test_{rule.replace('-', '_')}.py and {controller})"
                       for rule, controller in sorted(plan.items()))


def cases(plan: dict[str, str]) -> dict[str, str]:
    """The JUnit case names the run must report: ``{"queue-depth[libvirt:virtio-scsi:latency5ms]": rule}``."""
    return {f"{rule}[libvirt:{controller}:latency5ms]": rule for rule, controller in plan.items()}
