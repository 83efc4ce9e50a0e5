"""The QEMU log libvirt keeps of each domain: its one-line cause of death, and its removal.

libvirtd writes ``/var/log/libvirt/qemu/<domain>.log`` (QEMU's command line, then whatever
QEMU printed) and never removes it. The suite moves a domain's log into the run directory
when it removes the domain (the session copies it to the results), and removes the logs of
domains of killed runs when it sweeps their leftovers.
"""

from __future__ import annotations

import logging
import re
import shutil
from collections.abc import Collection
from pathlib import Path

from hypervisors.cleanup import owner_alive

log = logging.getLogger("vioconform.libvirt")

#: Where the local libvirt daemon (qemu:///system, and qemu:///session as root) keeps QEMU's logs.
QEMU_LOG_DIR = Path("/var/log/libvirt/qemu")
#: Log names that carry their owner's pid: the session guest and the KVM probe
#: (``vioconform-<pid>.log``, ``vioconform-kvmprobe-<pid>.log``).
OWNED_LOG = re.compile(r"vioconform-(?:kvmprobe-)?(\d+)(?:-\d+)?\.log")

# "2026-11-23T14:28:06.713888Z qemu-system-x86_64: error: failed to set MSR 0x10a to 0x69"
_QEMU_SAID = re.compile(r"(?:^|\s)qemu-system-\w+: (?:error: )?(.+)$")
# "../../target/i386/kvm/kvm.c:3183: kvm_buf_set_msrs: Assertion ..." -> "kvm_buf_set_msrs: Assertion ..."
_SOURCE_LINE = re.compile(r"^\S+\.c:\d+: ")


def qemu_cause(text: str, lines: int = 2) -> str | None:
    """The last things QEMU itself said in a log or a libvirt error, on one line, e.g.
    ``failed to set MSR 0x10a to 0x69; kvm_buf_set_msrs: Assertion `...' failed.``;
    None if QEMU said nothing (a guest that was merely slow)."""
    said: list[str] = []
    for line in text.splitlines():
        m = _QEMU_SAID.search(line)
        if m and "terminating on signal" not in m.group(1):
            msg = _SOURCE_LINE.sub("", m.group(1).strip())
            if msg not in said:
                said.append(msg)
    return "; ".join(said[-lines:]) or None


#: The line libvirtd writes before each start of a domain, e.g.
#: "2026-11-23 14:26:13.156+0000: starting up libvirt version: 9.0.0, package: ...".
_STARTING_UP = re.compile(r"^\S+ \S+: starting up libvirt version:", re.MULTILINE)


def last_start(text: str) -> str:
    """A domain's log from libvirtd's last "starting up" line: what its latest start wrote (a
    name used again, as a retried start does, keeps the earlier starts above it)."""
    starts = [m.start() for m in _STARTING_UP.finditer(text)]
    return text[starts[-1]:] if starts else text


def log_path(name: str, log_dir: Path = QEMU_LOG_DIR) -> Path:
    return log_dir / f"{name}.log"


def keep_log(name: str, dest_dir: Path | None, log_dir: Path = QEMU_LOG_DIR) -> None:
    """Move a removed domain's log to ``dest_dir/<name>.qemu.log`` (or just remove it)."""
    src = log_path(name, log_dir)
    if not src.exists():
        return
    if dest_dir is not None and dest_dir.is_dir():
        shutil.copyfile(src, dest_dir / f"{name}.qemu.log")
    src.unlink(missing_ok=True)


def sweep_logs(log_dir: Path = QEMU_LOG_DIR, running: Collection[str] = ()) -> list[Path]:
    """Remove the logs of this suite's domains whose owner process is gone; returns them.
    Only names that carry a pid (``OWNED_LOG``): any other log is someone else's. A domain still
    ``running`` keeps its log: another machine's run on a shared libvirt host (its pid means nothing here)."""
    swept = []
    for path in sorted(log_dir.glob("vioconform-*.log")):
        m = OWNED_LOG.fullmatch(path.name)
        if m and path.name.removesuffix(".log") not in running and not owner_alive(int(m.group(1))):
            log.info("removing QEMU log %s of dead process %s", path, m.group(1))
            path.unlink(missing_ok=True)
            swept.append(path)
    return swept
