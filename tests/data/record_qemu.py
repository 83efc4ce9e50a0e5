"""Record the QEMU test data in this directory from the installed qemu-system-x86_64.

Run as ``python3 tests/data/record_qemu.py`` (from the repo root). It boots a VM with no OS:
SeaBIOS itself reads the disk while looking for a boot sector, which gives real per-request
trace events for virtio-blk, SCSI (virtio-scsi) and NVMe. The block statistics come from
QMP ``query-blockstats`` after a few accounted requests issued through the HMP ``qemu-io``
command (its aio_read/aio_write/aio_flush do block accounting like a device would).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
QEMU = "/usr/bin/qemu-system-x86_64"
# -blockdev wants size in bytes: "size=1G" is refused ("Parameter 'size' expects integer").
NULL_DISK = "driver=null-co,node-name=d0,size=1073741824,latency-ns=200000,read-zeroes=on"

# controller: (QEMU arguments, events to trace, the qdev that owns the BlockBackend for HMP qemu-io -d)
CONTROLLERS = {
    "virtio-blk": (["-device", "virtio-blk-pci,drive=d0,id=dut,bootindex=0",
                    # a second, idle disk, so that the blockstats reply has more than one entry
                    "-blockdev", "driver=null-co,node-name=d1,size=1073741824",
                    "-device", "virtio-blk-pci,drive=d1,id=other"],
                   "virtio_blk_handle_read,virtio_blk_handle_write,virtio_blk_req_complete",
                   "/machine/peripheral/dut/virtio-backend"),
    "virtio-scsi": (["-device", "virtio-scsi-pci,id=scsi0",
                     "-device", "scsi-hd,drive=d0,id=dut,bus=scsi0.0,bootindex=0"],
                    "scsi_req_parsed,scsi_req_parsed_lba,scsi_req_dequeue", "dut"),
    "nvme": (["-device", "nvme,drive=d0,id=dut,serial=vioconform,bootindex=0"],
             # QEMU 7.2 has no pci_nvme_flush event: a flush shows only as pci_nvme_io_cmd opc 0x0
             "pci_nvme_io_cmd,pci_nvme_read,pci_nvme_write,pci_nvme_enqueue_req_completion", "dut"),
}


class Qmp:
    """A minimal QMP client: enough to record replies, not a library."""

    def __init__(self, path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX)
        for _ in range(100):
            time.sleep(0.1)
            try:
                self.sock.connect(path)
                break
            except (FileNotFoundError, ConnectionRefusedError):
                continue
        self.file = self.sock.makefile("rw")
        self.file.readline()  # greeting
        self.cmd("qmp_capabilities")

    def cmd(self, name: str, **args: object) -> str:
        self.file.write(json.dumps({"execute": name, "arguments": args}) + "\n")
        self.file.flush()
        while True:
            line = self.file.readline()
            if '"event"' not in line:
                return line

    def hmp(self, line: str) -> str:
        return self.cmd("human-monitor-command", **{"command-line": line})


def run(controller: str, tmp: str, boot_seconds: float) -> tuple[str, str]:
    dev_args, events, qdev = CONTROLLERS[controller]
    sock, trace = f"{tmp}/{controller}.sock", f"{tmp}/{controller}.log"
    proc = subprocess.Popen([QEMU, "-machine", "pc", "-accel", "tcg", "-nodefaults", "-display", "none",
                             "-m", "128", "-qmp", f"unix:{sock},server=on,wait=off",
                             "-blockdev", NULL_DISK, *dev_args,
                             "-msg", "timestamp=on", "-D", trace,
                             # one -trace per event: "enable=a,b" reads b as a boolean option
                             *[arg for event in events.split(",") for arg in ("-trace", f"enable={event}")]],
                            stdout=subprocess.DEVNULL)  # HMP qemu-io reports on stdout
    try:
        qmp = Qmp(sock)
        time.sleep(boot_seconds)
        for cmd in ("aio_read 0 4k", "aio_read 1M 64k", "aio_write 8k 4k", "aio_write 2M 128k", "aio_flush"):
            reply = json.loads(qmp.hmp(f'qemu-io -d {qdev} "{cmd}"'))
            if "Error" in reply.get("return", "Error"):
                raise RuntimeError(f"qemu-io {cmd}: {reply}")
        time.sleep(0.5)
        stats = qmp.cmd("query-blockstats")
        qmp.cmd("quit")
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    return stats, Path(trace).read_text()


def main(argv: list[str] | None = None) -> int:
    import argparse

    argparse.ArgumentParser(prog="python3 tests/data/record_qemu.py", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter).parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o755)
        for controller in CONTROLLERS:
            stats, trace = run(controller, tmp, boot_seconds=4.0)
            (HERE / f"qemu-trace-seabios-{controller}.log").write_text(trace)
            (HERE / f"qmp-query-blockstats-{controller}.json").write_text(
                json.dumps(json.loads(stats), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
