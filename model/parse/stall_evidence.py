"""What the stall-tolerance rule reads on each side: the guest's command timeout for a disk, the
kernel log lines after a mark, and the host device model's aborts and resets (QEMU trace events).

- The guest's timeout: ``key=value`` lines the guest's stall tool prints (guest/tools/stall_tolerance.py):
  ``io_timeout=30000`` (``/sys/block/X/queue/io_timeout``, milliseconds: Linux 5.0+ shows it only for
  a blk-mq driver with a timeout handler) and ``device_timeout=30`` (a SCSI disk's
  ``device/timeout``, seconds: the same value, as sd keeps it in the queue).
- QEMU's ``log`` trace backend: ``PID@SEC.USEC:event args`` lines (model/parse/qemutrace.py has the
  format). Which events are an abort, a reset or a cancel is :data:`RECOVERY_EVENTS` (QEMU 7.2's
  trace-events); NVMe's admin commands count only where they abort a command or delete a queue
  (the guest's controller reset), a virtio device's status only where it is written 0 (a reset).
"""

from __future__ import annotations

import errno
import os
import re
from dataclasses import dataclass

from model.errors import ParseError
from model.parse.fio_json import FioResult, fio_messages, parse_fio_json, parse_fio_run

#: The guest's command that prints ``io_timeout=<ms>`` and ``device_timeout=<s>`` where the kernel
#: shows them for the disk ``{disk}`` (POSIX shell and ``/sys`` only: the suite's guests and the replay's).
TIMEOUT_SCRIPT = r"""
d=/sys/block/{disk}
[ -r $d/queue/io_timeout ] && echo "io_timeout=$(cat $d/queue/io_timeout)"
[ -r $d/device/timeout ] && echo "device_timeout=$(cat $d/device/timeout)"
true
"""


@dataclass(frozen=True)
class CommandTimeout:
    """How long the guest waits for one command of a disk before its error handling starts.

    ``timeout_s`` None: the driver has no timeout handler (Linux shows no ``queue/io_timeout``
    and no ``device/timeout``): it waits for ever. ``source`` says where the value was read."""

    disk: str
    timeout_s: float | None
    source: str
    driver: str = ""


def parse_command_timeout(text: str, disk: str, driver: str = "") -> CommandTimeout:
    """The disk's timeout from the stall tool's lines: ``queue/io_timeout`` where the kernel shows it
    (milliseconds), else a SCSI disk's ``device/timeout`` (seconds, kernels before 5.0), else none."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        key, sep, val = line.strip().partition("=")
        if sep and key in ("io_timeout", "device_timeout"):
            try:
                values[key] = int(val)
            except ValueError:
                raise ParseError(f"{disk}: {key}={val!r} is not a whole number") from None
    if "io_timeout" in values:
        ms = values["io_timeout"]
        also = f", device/timeout {values['device_timeout']} s" if "device_timeout" in values else ""
        return CommandTimeout(disk, ms / 1000, f"/sys/block/{disk}/queue/io_timeout {ms} ms{also}", driver)
    if "device_timeout" in values:
        return CommandTimeout(disk, float(values["device_timeout"]), f"/sys/block/{disk}/device/timeout", driver)
    who = driver or "its driver"
    return CommandTimeout(disk, None, f"{who} has no command timeout (the kernel shows no /sys/block/{disk}/queue/"
                          "io_timeout: no timeout handler), so the guest waits for ever", driver)


@dataclass(frozen=True)
class HostEvent:
    """One abort, reset or cancel the host's device model saw (a QEMU trace event)."""

    time_us: int
    event: str  # "virtio_scsi_tmf_req"
    kind: str  # "abort", "reset", "cancel"
    detail: str = ""

    def text(self) -> str:
        return f"{self.event} {self.detail}".strip()


#: QEMU 7.2's trace events that show a device model aborting, cancelling or resetting, and which of
#: the three each is. virtio-scsi's task management requests (TMF: ABORT TASK, LUN RESET...) are
#: its aborts and resets alike (``subtype`` says which); ``scsi_req_cancel`` is any SCSI HBA's
#: cancel of a queued request (an abort's or a reset's work).
RECOVERY_EVENTS: dict[str, str] = {
    "virtio_scsi_tmf_req": "abort",
    "scsi_req_cancel": "cancel",
    "lsi_do_msgout_abort": "abort",
    "lsi_do_msgout_clearqueue": "abort",
    "lsi_do_msgout_busdevicereset": "reset",
    "lsi_reset": "reset",
    "mptsas_reset": "reset",
    "megasas_abort_frame": "abort",
    "megasas_reset": "reset",
    "megasas_dcmd_reset_ld": "reset",
    "pci_nvme_admin_cmd": "abort",
    "pci_nvme_mmio_stopped": "reset",
    "ahci_reset_port": "reset",
    "ahci_reset": "reset",
    "ide_reset": "reset",
    "ide_bus_reset_aio": "reset",
    "ide_cancel_dma_sync_buffered": "cancel",
    "ide_cancel_dma_sync_remaining": "cancel",
    "virtio_set_status": "reset",
}
#: QEMU 7.2's trace events that show each controller's device model aborting, cancelling or
#: resetting (:data:`RECOVERY_EVENTS` says which each is). SCSI HBAs share ``scsi_req_cancel``
#: (the SCSI layer's cancel of a queued request) and have their own reset and abort events;
#: virtio-blk has no abort, only a device reset (``virtio_set_status`` 0, as any virtio device).
CONTROLLER_EVENTS: dict[str, tuple[str, ...]] = {
    "virtio-blk": ("virtio_set_status",),
    "virtio-scsi": ("virtio_scsi_tmf_req", "scsi_req_cancel", "virtio_set_status"),
    "mptsas1068": ("scsi_req_cancel", "mptsas_reset"),
    "lsi53c895a": ("scsi_req_cancel", "lsi_do_msgout_abort", "lsi_do_msgout_clearqueue",
                   "lsi_do_msgout_busdevicereset", "lsi_reset"),
    "megasas": ("scsi_req_cancel", "megasas_abort_frame", "megasas_reset", "megasas_dcmd_reset_ld"),
    "megasas-gen2": ("scsi_req_cancel", "megasas_abort_frame", "megasas_reset", "megasas_dcmd_reset_ld"),
    "nvme": ("pci_nvme_admin_cmd", "pci_nvme_mmio_stopped"),
    "ahci": ("ahci_reset_port", "ahci_reset", "ide_cancel_dma_sync_buffered", "ide_cancel_dma_sync_remaining"),
    "ide": ("ide_reset", "ide_bus_reset_aio", "ide_cancel_dma_sync_buffered", "ide_cancel_dma_sync_remaining"),
}
#: The NVMe admin commands that are error handling: Abort, and Delete I/O Submission Queue (the
#: first step of the guest's controller reset). Its other admin commands (Identify, Get Log Page,
#: Set Features) are routine.
NVME_RECOVERY_OPCODES = frozenset({0x08, 0x00})  # Abort, Delete I/O SQ

_LINE = re.compile(r"^(?:\S+Z\s+)?(?:\d+@(?P<sec>\d+)\.(?P<usec>\d{6}):)?(?P<event>[a-z][a-z0-9_]*)(?:\s+(?P<args>.*))?$")
_OPC = re.compile(r"\bopc 0x(?P<opc>[0-9a-fA-F]+)")
_VAL = re.compile(r"\bval (?P<val>\d+)")


def _recovery(event: str, args: str) -> str | None:
    kind = RECOVERY_EVENTS.get(event)
    if kind is None:
        return None
    if event == "pci_nvme_admin_cmd":
        m = _OPC.search(args)
        if m is None or int(m.group("opc"), 16) not in NVME_RECOVERY_OPCODES:
            return None
        return "abort" if int(m.group("opc"), 16) == 0x08 else "reset"
    if event == "virtio_set_status":
        m = _VAL.search(args)
        return kind if m is not None and int(m.group("val")) == 0 else None
    return kind


def parse_recovery_events(text: str) -> list[HostEvent]:
    """The aborts, resets and cancels in QEMU trace log text, in order (other events are left out)."""
    out = []
    for line in text.splitlines():
        m = _LINE.match(line.strip())
        if m is None:
            continue
        args = (m.group("args") or "").strip()
        kind = _recovery(m.group("event"), args)
        if kind is None:
            continue
        t = int(m.group("sec")) * 1_000_000 + int(m.group("usec")) if m.group("sec") else 0
        out.append(HostEvent(t, m.group("event"), kind, args))
    return out


def lines_after_mark(text: str, token: str) -> tuple[list[str], bool]:
    """The lines of a kernel log after the last line holding ``token``, and whether one held it
    (every line where none did: the ring buffer wrapped past the mark)."""
    lines = text.splitlines()
    at = max((i for i, line in enumerate(lines) if token in line), default=None)
    if at is None:
        return lines, False
    return lines[at + 1:], True


def fio_outcome(stdout: str, stderr: str, status: int, source: str) -> tuple[FioResult, str]:
    """fio's results after a stall and the error it reported ("" for none): an I/O error in the stall
    is the rule's to judge, not a harness error; output that holds no results raises fio's own
    error (FioError, model.parse.fio_json.parse_fio_run)."""
    try:
        result = parse_fio_json(stdout, source)
    except ParseError:
        return parse_fio_run(stdout, stderr, status, source), ""  # raises fio's own error
    failed = [j for j in result.jobs if j.error]
    lines = fio_messages(stdout, stderr).splitlines()
    said = [line for line in lines if "err=" in line] or lines  # a failed job's own line, before the stop's
    if failed:
        names = "; ".join(f"error {j.error} ({errno.errorcode.get(j.error, '?')}: {os.strerror(j.error)})"
                          for j in failed)
        return result, names + (f"; fio said: {said[-1]}" if said else "")
    if status != 0:
        return result, f"fio exited with status {status}" + (f"; fio said: {said[-1]}" if said else "")
    return result, ""
