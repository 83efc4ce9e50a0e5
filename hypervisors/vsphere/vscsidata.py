"""Parsers for what ESXi's vscsiStats says besides the CSV histograms (which ``model.parse.vscsistats_csv`` parses).

Pure code, tested on recorded-format text:

- ``vscsiStats -l``: which worlds (VMs) and handles (virtual disks) exist::

    Virtual Machine worldGroupID: 2099979, Virtual Machine Display Name: vm1, Virtual Machine Config File: /vmfs/volumes/ds1/vm1/vm1.vmx, {
     Virtual SCSI Disk handleID: 8194 (scsi0:0)
     Virtual SCSI Disk handleID: 8195 (scsi1:0)
    }

- the ServiceManager "VscsiStats" service's ``FetchAllHistograms`` answer: XML with one ``<VM>``
  per VM and one ``<VirtualDisk>`` per disk, each holding ``key: value`` lines, and one
  ``<histo>`` per histogram whose first line is ``VSCSIVsi_<Name>: Histogram: <vscsiStats title>``
  followed by ``min:``, ``max:``, ``mean:``, ``count:``, ``numBuckets:``, ``limits:`` (the last is
  the int64 maximum: the overflow bucket) and ``counts:``. Histograms are matched by the
  vscsiStats title, so the service's internal names do not matter. The layout follows published
  client code for the service (VMware's own RVC); ESXi documents no schema and VMware warns
  that it may change between releases.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass

from model.errors import HypervisorError, ParseError
from model.parse.histogram import TITLE_TO_KIND, Histogram, HistogramSet

_WORLD = re.compile(r"worldGroupID:\s*(?P<w>\d+),\s*Virtual Machine Display Name:\s*(?P<name>.*?),"
                    r"\s*Virtual Machine Config File:\s*(?P<vmx>.*?),\s*\{\s*$")
_HANDLE = re.compile(r"handleID:\s*(?P<h>\d+)\s*\((?P<label>[^)]*)\)")


@dataclass(frozen=True)
class VscsiDisk:
    """One virtual disk as vscsiStats names it: the VM's world group and the disk's handle."""

    vm_name: str
    world_group_id: int
    handle_id: int
    label: str  # "scsi0:0", the same instance name the perf counters use


def parse_vscsistats_list(text: str) -> list[VscsiDisk]:
    """Every (VM, disk) in ``vscsiStats -l`` output."""
    disks: list[VscsiDisk] = []
    world: tuple[str, int] | None = None
    for line in text.splitlines():
        if m := _WORLD.search(line):
            world = (m.group("name"), int(m.group("w")))
        elif (m := _HANDLE.search(line)) and world is not None:
            disks.append(VscsiDisk(world[0], world[1], int(m.group("h")), m.group("label").strip()))
        elif line.strip() == "}":
            world = None
    return disks


def find_disk(disks: list[VscsiDisk], vm_name: str, label: str, where: str) -> VscsiDisk:
    """The disk ``label`` of ``vm_name``; the error lists what vscsiStats does know."""
    for d in disks:
        if d.vm_name == vm_name and d.label == label:
            return d
    known = sorted({f"{d.vm_name}/{d.label}" for d in disks})
    raise HypervisorError(f"{where}: vscsiStats knows no disk {label} of VM {vm_name!r} (is the VM powered on "
                          f"on this host?); it lists {', '.join(known[:10]) or 'nothing'}")


def _key_values(text: str | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition(":")
        if sep:
            out[key.strip()] = value.strip()
    return out


def _histo(text: str, where: str) -> Histogram | None:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    if not lines:
        return None
    _, _, title = lines[0].partition(": Histogram: ")
    kind_dir = TITLE_TO_KIND.get(title.strip())
    if kind_dir is None:
        return None
    f = _key_values("\n".join(lines[1:]))
    try:
        limits = [int(x) for x in f["limits"].split(",")]
        counts = tuple(int(x) for x in f["counts"].split(","))
        count = int(f["count"])
        empty = count == 0
        return Histogram(kind_dir[0], kind_dir[1], tuple(limits[:-1]), counts,
                         None if empty else int(f["min"]), None if empty else int(f["max"]),
                         float(f["mean"]), count)
    except (KeyError, ValueError, ParseError) as e:
        raise HypervisorError(f"{where}: histogram {title!r} is malformed: {e}") from None


def parse_fetch_all_histograms(xml_text: str) -> list[tuple[str, str, HistogramSet]]:
    """(VM display name, disk name, histograms) for every disk in a FetchAllHistograms answer."""
    try:
        root = ET.fromstring(xml_text)
    except ET.ParseError as e:
        raise HypervisorError(f"FetchAllHistograms answer is not XML ({e}): {xml_text[:200]!r}") from None
    out: list[tuple[str, str, HistogramSet]] = []
    for vm in root.iter("VM"):
        vm_name = _key_values(vm.text).get("VM display name", "")
        for disk in vm.iter("VirtualDisk"):
            label = _key_values(disk.text).get("Virtual disk name", "")
            where = f"FetchAllHistograms {vm_name}/{label}"
            hists = [h for h in (_histo(e.text or "", where) for e in disk.iter("histo")) if h is not None]
            out.append((vm_name, label, HistogramSet(tuple(hists), disk_label=label)))
    return out
