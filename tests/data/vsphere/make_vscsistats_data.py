"""Write the vscsiStats test data in this directory (deterministic; rerun after changing it).

There is no ESXi host here, so the files are built from known I/O streams in the formats the
real tools print: ``vscsiStats -l``, ``vscsiStats -p all -c`` (via model.parse.histogram's writer, whose
titles and bucket limits are those of real captures) and the ServiceManager's FetchAllHistograms
XML (layout of published client code; see hypervisors/vsphere/vscsidata.py). Two cumulative
snapshots per format: the second adds a known workload to the first, so tests can check the
differences exactly.

Run as ``PYTHONPATH=. python3 tests/data/vsphere/make_vscsistats_data.py`` from the repo root.
"""

from __future__ import annotations

from pathlib import Path

from model.parse.histogram import Histogram, HistogramKind, HistogramSet

HERE = Path(__file__).resolve().parent
VM = "vioc-sample"
WORLD = 2099979
DISKS = {8194: "scsi1:0", 8195: "scsi0:0"}
INT64_MAX = 2**63 - 1

LIST = f"""Virtual Machine worldGroupID: {WORLD}, Virtual Machine Display Name: {VM}, Virtual Machine Config File: /vmfs/volumes/5f1e-ds1/{VM}/{VM}.vmx, {{
 Virtual SCSI Disk handleID: 8195 (scsi0:0)
 Virtual SCSI Disk handleID: 8194 (scsi1:0)
}}
Virtual Machine worldGroupID: 2100412, Virtual Machine Display Name: other-vm, Virtual Machine Config File: /vmfs/volumes/5f1e-ds1/other-vm/other-vm.vmx, {{
 Virtual SCSI Disk handleID: 8201 (scsi0:0)
}}
"""


def workload(snapshot: int, handle: int) -> dict[HistogramKind, tuple[list[int], list[int]]]:
    """(read values, write values) per kind; snapshot 2 adds a QD32 4 KiB read burst on handle 8194."""
    reads_depth = [1] * 50 + [2] * 10
    reads_len = [4096] * 60
    writes_depth = [1] * 20
    writes_len = [65536] * 19 + [1048576]  # one write above the last limit: the overflow row
    if snapshot == 2 and handle == 8194:
        reads_depth += [32] * 1000 + [30] * 200 + [100] * 5
        reads_len += [4096] * 1205
    lat = [5000] * len(reads_depth), [8000] * len(writes_depth)
    return {
        HistogramKind.OUTSTANDING_IOS: (reads_depth, writes_depth),
        HistogramKind.IO_LENGTH: (reads_len, writes_len),
        HistogramKind.LATENCY_US: lat,
        HistogramKind.INTERARRIVAL_US: ([200] * len(reads_depth), [900] * len(writes_depth)),
        HistogramKind.SEEK_DISTANCE: ([8] * len(reads_depth), [128] * len(writes_depth)),
    }


def histogram_set(snapshot: int, handle: int) -> HistogramSet:
    hists = []
    for kind, (reads, writes) in workload(snapshot, handle).items():
        hists += [Histogram.from_values(kind, "all", reads + writes), Histogram.from_values(kind, "read", reads),
                  Histogram.from_values(kind, "write", writes)]
    hists.append(Histogram.from_values(HistogramKind.SEEK_DISTANCE_PREV16, "all", [8] * 80))
    return HistogramSet(tuple(hists), WORLD, handle, DISKS[handle])


def fetch_all_xml(snapshot: int) -> str:
    out = ["<vscsiStats>", "<VM>", f"VM display name: {VM}", f"VM vmx path: /vmfs/volumes/5f1e-ds1/{VM}/{VM}.vmx",
           "VM BIOS uuid: 42 1c 5e 8a 11 9b 4f 20-9c 1e 0d 55 6a 7b 8c 9d",
           "VC uuid: 50 1c 2d 3e 4f 50 61 72-83 94 a5 b6 c7 d8 e9 f0"]
    for handle, label in DISKS.items():
        out += ["<VirtualDisk>", f"Virtual disk name: {label}", f"Virtual disk handleID: {handle}"]
        for h in histogram_set(snapshot, handle).histograms:
            name = f"VSCSIVsi_{h.kind.value[0].upper()}{h.kind.value[1:]}{h.direction.capitalize()}Histogram"
            out += ["<histo>", f"{name}: Histogram: {h.kind.title(h.direction)}",
                    f"min: {h.min or 0}", f"max: {h.max or 0}", f"mean: {int(h.mean)}", f"count: {h.count}",
                    f"numBuckets: {len(h.counts)}",
                    "limits: " + ",".join(str(x) for x in (*h.bucket_limits, INT64_MAX)),
                    "counts: " + ",".join(str(c) for c in h.counts), "</histo>"]
        out.append("</VirtualDisk>")
    out += ["</VM>", "</vscsiStats>"]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> None:
    import argparse

    argparse.ArgumentParser(prog="python3 tests/data/vsphere/make_vscsistats_data.py", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter).parse_args(argv)
    (HERE / "vscsistats-l.txt").write_text(LIST)
    for snap in (1, 2):
        csv = "".join(histogram_set(snap, h).to_vscsistats_csv() for h in DISKS)
        (HERE / f"vscsistats-p-all-c-{snap}.csv").write_text(csv)
        (HERE / f"fetch-all-histograms-{snap}.xml").write_text(fetch_all_xml(snap))


if __name__ == "__main__":
    main()
