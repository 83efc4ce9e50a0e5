"""A run's environment fingerprint: what it was measured on, as the nightly question needs it.

"Did tonight's QEMU, libvirt or ESXi build change what the guest's storage sees, compared with
last night's?" compares the runs of one series (the job: model/across/series.py) across changes of the
environment (:data:`FINGERPRINT_KEYS`); :func:`change_line` says what changed between two of
them. Everything else a run records about what was tested (each disk's kernel name, driver chain,
boot settings) is kept too, but is not part of the fingerprint: a disk's kernel name (sda or sdb)
depends on the order the kernel probes the disks in, and changed between 7 of 10 otherwise
identical runs here.
"""

from __future__ import annotations

from collections.abc import Mapping

#: The run properties that make up the fingerprint (JUnit suite properties, written by the
#: fixtures): the hypervisor build (libvirt: QEMU's version, binary, machine type and accelerator,
#: libvirt's library and daemon versions, the host's kernel; vSphere: the vCenter and ESXi builds),
#: the guest (image and its SHA-256, OS release, kernel) and the fio that measured it.
FINGERPRINT_KEYS = (
    "qemu.version", "qemu.emulator", "qemu.machine", "qemu.accel",
    "libvirt.version", "libvirt.daemon_version", "host.kernel",
    "vcenter.version", "vcenter.build", "esxi.version", "esxi.build",
    "image", "image.sha256", "guest.os_release", "guest.kernel", "fio_version",
)
#: The run's own options, written as suite properties of their own (the rest are in ``options``).
SERIES_OPTIONS = ("hypervisor", "controllers", "inject")
#: Run options whose value is a comma-separated set: ``--controllers virtio-blk,virtio-scsi`` and
#: ``--controllers virtio-scsi,virtio-blk`` test the same controllers (each is its own test).
SET_OPTIONS = ("controllers",)
#: The suite property with vioconform's own revision (``git describe``), and the one with the
#: options that shaped the results (JSON); neither is part of the fingerprint.
REVISION_KEY = "vioconform_revision"
OPTIONS_KEY = "options"


def is_fingerprint_key(key: str) -> bool:
    """A fingerprint entry: one of :data:`FINGERPRINT_KEYS`, or one host's of a pool of libvirt
    hosts, named ``<host>:<key>`` (``kvm7:qemu.version``)."""
    return key in FINGERPRINT_KEYS or key.rpartition(":")[2] in FINGERPRINT_KEYS


def fingerprint(properties: Mapping[str, str]) -> dict[str, str]:
    """The fingerprint entries of a run's properties (those it has), a pool's per host."""
    return {k: v for k, v in sorted(properties.items()) if is_fingerprint_key(k)}


def as_set(value: str | None) -> frozenset[str]:
    """A comma-separated option value (``virtio-scsi,virtio-blk``) as the set it names."""
    return frozenset(v.strip() for v in (value or "").split(",") if v.strip())


def same_option(key: str, a: str | None, b: str | None) -> bool:
    """Whether two runs' values of an option are the same: sets (:data:`SET_OPTIONS`) in any order."""
    return as_set(a) == as_set(b) if key in SET_OPTIONS and a is not None and b is not None else a == b


def differences(a: Mapping[str, str], b: Mapping[str, str]) -> tuple[list[tuple[str, str, str]],
                                                                   list[tuple[str, str, str]]]:
    """(fingerprint differences, other differences in what was tested) between two runs'
    properties, each as (key, value in a, value in b), "-" for absent, sorted by key."""
    keys = sorted(set(a) | set(b))
    rows = [(k, a.get(k, "-"), b.get(k, "-")) for k in keys if a.get(k) != b.get(k)]
    return [r for r in rows if is_fingerprint_key(r[0])], [r for r in rows if not is_fingerprint_key(r[0])]


def changes(fp_a: Mapping[str, str], fp_b: Mapping[str, str]) -> tuple[list[tuple[str, str, str]], list[str]]:
    """(the fingerprint entries that differ, as (key, value in a, value in b), "-" for absent; the
    keys both runs have with equal values), each in :data:`FINGERPRINT_KEYS` order (a pool's
    ``<host>:`` entries by host after them)."""
    a, b = fingerprint(fp_a), fingerprint(fp_b)

    def order(key: str) -> tuple[str, int, str]:
        host, _, name = key.rpartition(":")
        return host, FINGERPRINT_KEYS.index(name) if name in FINGERPRINT_KEYS else len(FINGERPRINT_KEYS), name

    keys = sorted(set(a) | set(b), key=order)
    changed = [(k, a.get(k, "-"), b.get(k, "-")) for k in keys if a.get(k) != b.get(k)]
    return changed, [k for k in keys if k in a and k in b and a[k] == b[k]]


def change_line(id_a: int, id_b: int, fp_a: Mapping[str, str], fp_b: Mapping[str, str],
                revision_a: str = "", revision_b: str = "") -> str:
    """What changed between two runs, in one line, the build changes first: ``run 41 -> 42:
    qemu.version 7.2.22 -> 8.0.0; unchanged: guest.kernel, fio_version``. vioconform's own
    revision is named too when it changed (a new suite can change a verdict as well)."""
    changed, same = changes(fp_a, fp_b)
    parts = [f"{k} {va} -> {vb}" for k, va, vb in changed]
    if revision_a and revision_b and revision_a != revision_b:
        parts.append(f"vioconform {revision_a} -> {revision_b}")
    if not parts:
        return f"run {id_a} -> {id_b}: fingerprint unchanged" + (f" ({', '.join(same)})" if same else "")
    return f"run {id_a} -> {id_b}: " + "; ".join(parts) + (f"; unchanged: {', '.join(same)}" if same else "")
