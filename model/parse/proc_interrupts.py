"""``/proc/interrupts`` per virtio request queue, and the kernel's CPU lists the queues map to.

The multi-queue rule (model/rules/multi_queue.py) reads which request queues of a virtio device
carried the completions of a workload from the interrupt counts of the queues' MSI-X vectors, and
runs one fio job per online CPU (``/sys/devices/system/cpu/online``); the guest's interrupts tool
(guest/tools/interrupts.py) reads both files.

Example::

    parse_queue_interrupts(proc_interrupts_text, "virtio2")  # {0: 900, 1: 850}
    parse_cpu_list("0-1,3")  # [0, 1, 3]
"""

from __future__ import annotations

import re

from model.errors import ParseError

#: /proc/interrupts names of request virtqueue vectors: virtio-scsi "virtio1-request" (every
#: request queue alike, Linux 4.18 to 6.x), virtio-blk "virtio2-req.0" (multi-queue, Linux 4.10+)
#: or "virtio2-requests" (single queue, older kernels). Queues are numbered by the order of their
#: vectors, which is the order of the queues. The chip column differs ("PCI-MSI 294915-edge" from
#: 4.x, "IR-PCI-MSI", "PCI-MSIX-0000:00:12.0 3-edge" on recent kernels with per-device MSI domains):
#: only the counts before it and the name at the end are read. A device whose queues share one
#: vector ("virtio1-virtqueues", no MSI-X vector per queue) has no per-queue line at all.
_VQ = re.compile(r"^\s*\d+:\s+((?:\d+\s+)+).*\s(virtio\d+)-(?:request|requests|req)(?:\.\d+)?\s*$")


def parse_queue_interrupts(text: str, virtio_dev: str) -> dict[int, int]:
    """Interrupts per request queue of one virtio device in ``/proc/interrupts``, summed over CPUs."""
    counts = [sum(int(x) for x in m.group(1).split())
              for m in map(_VQ.match, text.splitlines()) if m and m.group(2) == virtio_dev]
    return dict(enumerate(counts))


def parse_cpu_list(text: str) -> list[int]:
    """A kernel CPU list (``/sys/devices/system/cpu/online``: "0-1", "0,2-3") as CPU numbers."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        lo, _, hi = part.partition("-")
        try:
            cpus.extend(range(int(lo), int(hi or lo) + 1))
        except ValueError:
            raise ParseError(f"CPU list {text.strip()!r}: {part!r} is not a CPU number or range") from None
    return cpus
