"""One guest booted through the suite's own path, with its SSH transport, for a benchmark; everything
it starts is removed when the block ends, also on error and Ctrl-C.

    with booted_guest("vioconform-bench-1", DiskSpec("virtio-scsi", 0), 1024, 600.0, image) as (guest, ssh, run_dir):
        ...
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from hypervisors.base import Guest, GuestRequest, ImageRequest
from hypervisors.cleanup import CleanupStack, make_run_dir
from hypervisors.libvirt.backend import LibvirtBackend
from model.types import DiskSpec
from transport.ssh import SshTransport, generate_run_key


@contextlib.contextmanager
def booted_guest(name: str, disk: DiskSpec, memory_mib: int, boot_timeout_s: float, image: ImageRequest | None,
                 vcpus: int = 2) -> Iterator[tuple[Guest, SshTransport, Path]]:
    """``image`` None: the embedded guest."""
    cleanup = CleanupStack()
    try:
        run_dir = make_run_dir(cleanup)
        backend = LibvirtBackend(cleanup, accel_mode="auto")
        cleanup.push("libvirt connection", backend.close)
        _, pub = generate_run_key(run_dir)
        guest = backend.start_guest(GuestRequest(name, (disk,), run_dir, pub, vcpus=vcpus, memory_mib=memory_mib,
                                                 boot_timeout_s=boot_timeout_s, image=image))
        ssh = SshTransport.to_guest(guest)
        cleanup.push("SSH connection", ssh.close)
        yield guest, ssh, run_dir
    finally:
        cleanup.run()
