"""``vscsiStats`` for KVM: record the exact I/O histograms of one disk of a running libvirt domain.

    python -m hypervisors.libvirt.record --domain web01 --disk vda --seconds 30
    python -m hypervisors.libvirt.record --domain web01 --disk sdb --seconds 10 --out sdb.csv

Prints (or saves) vscsiStats-style CSV: outstanding I/Os when a new I/O is issued, I/O
lengths, seek distances, latency and interarrival time, each for all, read and write.
The domain can be any running QEMU domain on this host, started by vioconform or not, or on
a remote libvirt host (``--uri qemu+ssh://user@host/system``: the trace file is made and read
there over the same SSH, in ``--host-dir``, and removed). For the window, QEMU's trace events of
the disk's controller family are switched on through the monitor and QEMU's log file is pointed
at a file of ours; afterwards the events are off and the log goes to /dev/null (QEMU's log only
carries -d debug output and trace events).
"""

from __future__ import annotations

import argparse
import re
import shlex
import shutil
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path, PurePath, PurePosixPath
from urllib.parse import parse_qsl, urlparse

import libvirt

from hypervisors.cleanup import CleanupStack
from hypervisors.cli import emit, output_file, seconds_to_record
from hypervisors.libvirt import default_uri, trace
from hypervisors.libvirt.host_checks import check_drives_qemu, is_local, open_connection
from hypervisors.libvirt.hostfiles import DEFAULT_HOST_DIR, RemoteFiles
from hypervisors.libvirt.hostlink import HostAddress, HostLink
from hypervisors.libvirt.qmp import DomainQmp
from model.errors import HypervisorError
from model.file_kinds import not_regular
from model.parse.histogram import HistogramKind, HistogramSet
from model.secret import redact_url

#: libvirt disk bus -> QEMU trace family
BUS_FAMILY = {"virtio": "virtio-blk", "scsi": "scsi", "nvme": "nvme", "sata": "ahci"}


def find_disk(dom: libvirt.virDomain, disk: str) -> tuple[str, str, int]:
    """(qdev id, trace family, logical block size) of the domain's disk whose target dev,
    alias or serial is ``disk``."""
    root = ET.fromstring(dom.XMLDesc(0))
    names = []
    for d in root.iter("disk"):
        target = d.find("target")
        alias = d.find("alias")
        serial = d.findtext("serial") or ""
        dev = target.get("dev", "") if target is not None else ""
        alias_name = alias.get("name", "") if alias is not None else ""
        names.append(dev)
        if disk in (dev, alias_name, serial):
            bus = target.get("bus", "") if target is not None else ""
            if bus not in BUS_FAMILY:
                raise HypervisorError(f"disk {disk} of {dom.name()} is on bus {bus!r}; QEMU 7.2 has per-request "
                                      f"trace events for {', '.join(BUS_FAMILY)} only")
            blockio = d.find("blockio")
            lbs = int(blockio.get("logical_block_size", "512")) if blockio is not None else 512
            return alias_name, BUS_FAMILY[bus], lbs
    # Disks given on the QEMU command line (vioconform's latency disks) have no <disk> element.
    for arg in root.iter("{http://libvirt.org/schemas/domain/qemu/1.0}arg"):
        value = arg.get("value", "")
        if f'"serial": "{disk}"' in value or f'"id": "{disk}"' in value:
            qdev = re.search(r'"id": "([^"]+)"', value)
            driver = re.search(r'"driver": "([^"]+)"', value)
            on_ide = re.search(r'"bus": "ide\.', value)  # the machine's PIIX IDE, not an AHCI port
            if qdev and driver:
                family = {"virtio-blk-pci": "virtio-blk", "scsi-hd": "scsi", "nvme": "nvme",
                          "ide-hd": None if on_ide else "ahci"}.get(driver.group(1))
                if family:
                    return qdev.group(1), family, 512
    raise HypervisorError(f"domain {dom.name()} has no disk {disk!r}; its disks are {', '.join(n for n in names if n)}"
                          " (give a target dev such as vda, an alias, or a serial)")


def record(uri: str, domain: str, disk: str, seconds: float, kind: HistogramKind | None = None,
           host_dir: PurePath = DEFAULT_HOST_DIR) -> str:
    """Record ``seconds`` of the disk's I/O and return vscsiStats-style CSV (of one ``kind``, or all).

    It opens a connection and touches nothing but the domain's trace events and log file for the
    window: no backend, no sweep of anything on the host (the domain is a user's)."""
    cleanup = CleanupStack()
    try:
        link = None if is_local(uri) else HostLink(HostAddress.from_uri(uri))  # its host key checked first
        if link is not None:
            cleanup.push("SSH connection to the libvirt host", link.close)
        conn = open_connection(uri)
        cleanup.push("libvirt connection", conn.close)
        check_drives_qemu(uri, conn)
        try:
            dom = conn.lookupByName(domain)
        except libvirt.libvirtError:
            running = [d.name() for d in conn.listAllDomains(libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE)]
            raise HypervisorError(f"no domain {domain!r} at {redact_url(uri)}; running domains: "
                                  f"{', '.join(running) or 'none'}") from None
        if not dom.isActive():
            raise HypervisorError(f"domain {domain} is not running")
        qdev, family, lbs = find_disk(dom, disk)
        channel = DomainQmp(conn, domain, qdev)
        channel.counters()  # fails clearly now if QMP cannot see the disk
        tmp = _trace_dir(link, host_dir, cleanup)
        files = None if link is None else RemoteFiles(link, PurePosixPath(host_dir))
        tracer = trace.QemuTracer(channel, family, tmp / "qemu-trace.log", logical_block_bytes=lbs,
                                  redirect_log=True, files=files)
        tracer.check_available()
        cleanup.push("trace events", tracer.abort)
        tracer.start()
        time.sleep(seconds)
        hists = tracer.stop().histograms
        if kind is not None:
            hists = HistogramSet(tuple(h for h in hists.histograms if h.kind == kind))
        return hists.to_vscsistats_csv(world_group_id=dom.ID(), handle_id=0, disk_label=disk)
    finally:
        cleanup.run()


def _trace_dir(link: HostLink | None, host_dir: PurePath, cleanup: CleanupStack) -> PurePath:
    """A directory QEMU's user can enter for the trace file: in $TMPDIR here, in ``host_dir`` on a
    remote host; removed by ``cleanup``."""
    if link is None:
        tmp = Path(tempfile.mkdtemp(prefix="vioconform-record-"))
        tmp.chmod(0o755)
        cleanup.push(f"trace directory {tmp}", lambda: shutil.rmtree(tmp, ignore_errors=True))
        return tmp
    base = shlex.quote(str(host_dir))
    made = PurePosixPath(link.run(f"mkdir -p -m 0755 {base} && d=$(mktemp -d {base}/vioconform-record-XXXXXX) "
                                  "&& chmod 0755 \"$d\" && echo \"$d\"").strip())
    cleanup.push(f"trace directory {made} on {link.address.host}", lambda: link.remove_tree(made))
    return made


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hypervisors.libvirt.record", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--domain", required=True, help="name of a running libvirt domain")
    ap.add_argument("--disk", required=True, help="target dev (vda, sdb), alias or serial of the disk")
    ap.add_argument("--seconds", type=seconds_to_record, default=10.0, help="how long to record (default 10)")
    ap.add_argument("--uri", default=default_uri(),
                    help="libvirt URI (default $LIBVIRT_DEFAULT_URI, else qemu:///system); a remote host: "
                         "qemu+ssh://user@host/system")
    ap.add_argument("--host-dir", default=str(DEFAULT_HOST_DIR),
                    help=f"on a remote host, where the trace file is made (default {DEFAULT_HOST_DIR})")
    ap.add_argument("--out", type=output_file, help="write the CSV here instead of standard output")
    ap.add_argument("--histogram", choices=[k.name.lower() for k in HistogramKind],
                    help="print only this histogram kind")
    args = ap.parse_args(argv)
    try:
        _ = urlparse(args.uri).port
        for name, value in parse_qsl(urlparse(args.uri).query):
            if name in ("known_hosts", "keyfile") and (what := not_regular(Path(value).expanduser())):
                ap.error(f"--uri: {name}={value} is {what}, not a regular file (a FIFO would be read for ever)")
    except ValueError:  # its words may quote the userinfo
        ap.error(f"--uri {redact_url(args.uri)} is not a URI whose host and port this command can read (an IPv6 "
                 "address needs both brackets, [::1]; a port is 1 to 65535); give one such as "
                 "qemu+ssh://root@HOST/system")
    kind = HistogramKind[args.histogram.upper()] if args.histogram else None
    try:
        csv = record(args.uri, args.domain, args.disk, args.seconds, kind, PurePosixPath(args.host_dir))
    except (HypervisorError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return emit(csv, args.out, "record")


if __name__ == "__main__":
    raise SystemExit(main())
