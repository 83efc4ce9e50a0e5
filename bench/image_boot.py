"""Boot-to-SSH of a user's image (``--image``) through the suite's own path, with BIOS and UEFI.

Prints, per firmware: boot to SSH (domain start to the first login with the pinned host key),
what the guest's systemd and cloud-init say about the boot, and the memory the booted guest uses
(for ``--guest-memory``'s default). The load average is printed too: under TCG the boot time
follows the host's free CPU.

    python -m bench.image_boot IMAGE [--firmware bios,uefi] [--memory 1024] [--vcpus 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from bench.booted import booted_guest
from fixtures.argtypes import _positive_float, _positive_int
from hypervisors.base import ImageRequest
from hypervisors.libvirt.host_checks import open_connection
from hypervisors.libvirt.imageboot import BOOT_DEVICE_ID
from hypervisors.libvirt.qmp import DomainQmp
from images.user import UserImageError, inspect_image
from model.errors import HypervisorError
from model.types import DiskSpec

#: What the guest is asked after the boot (through sudo: the seed's user is not root): where its
#: boot went (systemd's critical chain to the SSH server, cloud-init's stages and modules), its memory.
REPORT = ("systemd-analyze 2>/dev/null | head -1; cloud-init status --long 2>/dev/null | head -3; "
          "systemd-analyze critical-chain ssh.service 2>/dev/null | tail -n +4; "
          "cloud-init analyze blame 2>/dev/null | grep -v '^$' | head -16; "
          "free -m | sed -n 2p; uname -r")


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.image_boot", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("image", type=Path)
    ap.add_argument("--firmware", default="bios,uefi")
    ap.add_argument("--memory", type=_positive_int, default=1024)  # the suite's checks of these values
    ap.add_argument("--vcpus", type=_positive_int, default=2)
    ap.add_argument("--timeout", type=_positive_float, default=600.0)
    args = ap.parse_args()
    try:
        return _boot(args)
    except (UserImageError, HypervisorError) as e:
        print(f"bench.image_boot: error: {e}", file=sys.stderr)
        return 2


def _boot(args: argparse.Namespace) -> int:
    t0 = time.monotonic()
    info = inspect_image(args.image)
    print(f"image {info.path} ({info.format}, {info.virtual_size_bytes / 1024**3:.1f} GiB virtual), "
          f"SHA-256 {info.sha256[:16]}... in {time.monotonic() - t0:.1f} s")
    for firmware in args.firmware.split(","):
        load = os.getloadavg()[0]
        with booted_guest(f"vioconform-bench-{os.getpid()}-{firmware}", DiskSpec("virtio-scsi", 0), args.memory,
                          args.timeout, ImageRequest(info, firmware), vcpus=args.vcpus) as (guest, ssh, run_dir):
            said = ssh.run(REPORT, check=False, timeout_s=300).stdout.strip()
            flushes = boot_disk_flushes(guest.name)
            overlay_kib = (run_dir / "overlay.qcow2").stat().st_blocks // 2
        print(f"{firmware}: boot to SSH {guest.boot_seconds:.1f} s ({guest.accel}, {args.vcpus} vCPUs, "
              f"{args.memory} MiB, load average {load:.1f} before the boot); overlay {overlay_kib / 1024:.0f} MiB; "
              f"{flushes}")
        for line in said.splitlines():
            print(f"    {line}")
    return 0


def boot_disk_flushes(domain: str) -> str:
    """The guest's flushes of its boot disk so far and the host's time in them (QMP, the local libvirt)."""
    conn = open_connection("qemu:///system")
    try:
        c = DomainQmp(conn, domain, BOOT_DEVICE_ID).counters()
    finally:
        conn.close()
    return f"boot disk: {c.flush_operations} flushes, {c.flush_total_time_ns / 1e9:.2f} s of them on the host"


if __name__ == "__main__":
    raise SystemExit(main())
