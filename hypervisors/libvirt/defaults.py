"""The libvirt backend's defaults, read by the options without libvirt-python (hypervisors/defaults.py)."""

from __future__ import annotations

from hypervisors.defaults import BackendDefaults

#: Steady-state window per fio run: QMP counters are exact at any moment and QEMU's trace gives every
#: request. 2 s, derived from the spread of 10 runs of 3 s (bench.noise): at depth 32 the host depth's
#: CV was 2.9 % (24-26 of 32, so about 0.75 request), 17 standard deviations above the bar (0.4 x
#: aqu-sz, 11.4-11.7); IOPS scaling (CV 2.9 %, 30x against 12x) 20. Two thirds of the window scale that
#: spread by sqrt(3/2): still 14 and 16 deviations. Depth 1 is exact (1 in flight at every request,
#: 330 requests in 2 s of a 5 ms disk), io-size too (every request 1 MiB: 1,300 in 2 s).
WINDOW_S = 2.0

DEFAULTS = BackendDefaults(
    name="libvirt", title="libvirt", controllers=("virtio-scsi", "virtio-blk"), window_s=WINDOW_S, window_note="",
    host_pool=True, names_disk=True, where="libvirt: {hosts}", boots_images=True, version_property="qemu.version",
    other_image="unknown (neither --image nor the embedded guest)",
)
