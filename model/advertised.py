"""What a disk's virtual device really advertises, as the hypervisor itself answers, beside what
the suite asked for.

The suite asks for a device (``model.device_limits.ConfiguredLimits``: the queue depth, block sizes,
queues... it expects), but the hypervisor may give the guest something else: a QEMU build with
another default, or a ``-global virtio-scsi-pci.cmd_per_lun=1`` in a wrapper the suite never saw.
So before the rules run the backend asks the running hypervisor what each disk's device
advertises (QEMU: QMP ``qom-get`` on the device, ``hypervisors/libvirt/qom.py``; vSphere:
the VM's device config) and the answer is an :class:`Advertised`. A limit the hypervisor does not
say is None: it is never filled in from what was asked, so a failure is blamed on "the hypervisor
advertised X" only where the hypervisor said X (``model/blame.py``).

QEMU's answer is mapped here, pure, from the properties read (:func:`qom_reads` says which;
:func:`advertised_from_qom` maps the answers). Measured on QEMU 7.2: an explicit ``-device``
property (what libvirt writes from the domain XML) wins over a ``-global``, and a property libvirt
does not write (``cmd_per_lun``, ``queue-size``) keeps QEMU's default or a ``-global``'s; either
way ``qom-get`` answers the value in force. A property an older QEMU does not know is a note,
never an error.

Example::

    reads = qom_reads("virtio-scsi", "/machine/peripheral/ua-vioc-dut00", "/machine/peripheral/ua-vioc-virtio-scsi")
    adv = advertised_from_qom(reads, {(r.path, r.prop): ... for r in reads}, "QEMU 7.2.22, QMP qom-get")
    adv.queue_depth  # 1 where a -global set cmd_per_lun=1
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, fields
from typing import Literal

#: The limits an :class:`Advertised` can say: ``ConfiguredLimits``' own fields, in its units.
LIMIT_FIELDS = ("queue_depth", "max_transfer_bytes", "logical_block_bytes", "physical_block_bytes",
                "optimal_io_bytes", "write_cache", "discard", "queues")

#: QEMU's NVMe controller states its maximum transfer (MDTS) as a power of two of its minimum
#: memory page, which QEMU's NVMe emulation fixes at 4 KiB (CAP.MPSMIN 0): 2^7 x 4 KiB = 512 KiB.
NVME_MIN_PAGE_BYTES = 4096
SECTOR_BYTES = 512

#: How a disk hangs on its device, for what QEMU is asked: virtio-scsi's HBA carries the queue
#: depth and queues; virtio-blk's own device carries them; other SCSI HBAs (LSI, MegaRAID) and
#: ATA (AHCI, IDE) expose no queue property; NVMe its MDTS.
DeviceFamily = Literal["virtio-scsi", "virtio-blk", "scsi", "ata", "nvme"]


@dataclass(frozen=True)
class DeviceProperty:
    """One property as the hypervisor answered it: its owner (a QOM path, a vSphere device),
    its name and its value as text; ``known`` False where the hypervisor has no such property."""

    owner: str
    name: str
    value: str
    known: bool = True


@dataclass(frozen=True)
class Advertised:
    """What the hypervisor says one disk's device advertises (None: not said), where each limit
    came from (``said_by``: "cmd_per_lun of /machine/peripheral/ua-vioc-virtio-scsi/virtio-backend"),
    every property read, and notes (a property an older hypervisor does not know). ``unavailable``
    says why the hypervisor could not be asked at all ("" when it was)."""

    source: str = ""  # "QEMU 7.2.22, QMP qom-get"; "vSphere device config"
    queue_depth: int | None = None
    max_transfer_bytes: int | None = None
    logical_block_bytes: int | None = None
    physical_block_bytes: int | None = None
    optimal_io_bytes: int | None = None
    write_cache: bool | None = None
    discard: bool | None = None
    queues: int | None = None
    said_by: Mapping[str, str] = field(default_factory=dict)
    #: limit -> why a property read is not taken as what the device advertises
    unsaid: Mapping[str, str] = field(default_factory=dict)
    properties: tuple[DeviceProperty, ...] = ()
    notes: tuple[str, ...] = ()
    unavailable: str = ""

    def value(self, limit: str) -> int | bool | None:
        """The value said for one of :data:`LIMIT_FIELDS`, None where not said."""
        if limit not in LIMIT_FIELDS:
            raise KeyError(limit)
        said: int | bool | None = getattr(self, limit)
        return said

    def why_not_said(self, limit: str) -> str:
        """Why the hypervisor said nothing of ``limit``, for messages."""
        if self.unavailable:
            return f"the hypervisor could not be asked: {self.unavailable}"
        if not self.source:
            return "the hypervisor was not asked"
        if limit in self.unsaid:
            return self.unsaid[limit]
        return f"{self.source} has no property that says it on this device"

    def record(self) -> dict[str, str]:
        """The run's properties of this answer (``advertised.<limit>``, ``advertised.source``, and
        ``device.<owner>.<property>`` for every property read), every limit present so two runs
        line up key for key: "not said" where the hypervisor did not say it."""
        out = {f"advertised.{k}": _text(self.value(k)) for k in LIMIT_FIELDS}
        out["advertised.source"] = self.source or f"none ({self.unavailable or 'not asked'})"
        for p in self.properties:
            out[f"device.{short_owner(p.owner)}.{p.name}"] = p.value if p.known else "unknown to this hypervisor"
        return out


def _text(value: object) -> str:
    return "not said" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def short_owner(owner: str) -> str:
    """A QOM path as a run property's part: ``/machine/peripheral/ua-vioc-virtio-scsi/virtio-backend``
    -> ``ua-vioc-virtio-scsi/virtio-backend``."""
    return owner.removeprefix("/machine/peripheral/")


@dataclass(frozen=True)
class QomRead:
    """One QOM property to read: where (``path``), which (``prop``), and the limit it says
    (one of :data:`LIMIT_FIELDS`; None: recorded only). ``unsaid`` is a limit the property is
    about but does not say, with ``why`` (the device's protocol carries it by other rules)."""

    path: str
    prop: str
    limit: str | None = None
    unsaid: str | None = None
    why: str = ""


#: Why a property of QEMU's NVMe namespace is recorded, not taken as what it advertises: QEMU 7.2
#: sets the namespace's preferred write granularity and atomic write unit (from which Linux takes
#: the physical block size and optimal I/O size) and its volatile write cache by its own rules
#: (measured here: physical_block_size=4096 on the device, 512 in the guest).
NVME_OWN_RULES = "QEMU's NVMe emulation states it in Identify by its own rules, not from this property"
#: ATA's IDENTIFY has no field for an optimal I/O size.
ATA_NO_FIELD = "ATA's IDENTIFY has no field for it"


def _block_reads(path: str, family: DeviceFamily) -> list[QomRead]:
    """A disk device's own block properties (scsi-hd, ide-hd, virtio-blk, nvme): its block sizes,
    optimal I/O size and write cache, each taken as advertised where the device's protocol carries
    the property as it is (recorded only otherwise, with the reason)."""
    own = {"nvme": NVME_OWN_RULES, "ata": ""}.get(family, "")
    opt_why = NVME_OWN_RULES if family == "nvme" else ATA_NO_FIELD if family == "ata" else ""
    return [QomRead(path, "logical_block_size", "logical_block_bytes"),
            QomRead(path, "physical_block_size", None if own else "physical_block_bytes",
                    "physical_block_bytes" if own else None, own),
            QomRead(path, "opt_io_size", None if opt_why else "optimal_io_bytes",
                    "optimal_io_bytes" if opt_why else None, opt_why),
            QomRead(path, "write-cache", None if own else "write_cache", "write_cache" if own else None, own),
            *_identity_reads(path, family)]


def _identity_reads(path: str, family: DeviceFamily) -> list[QomRead]:
    """The device's ``serial`` and, on SCSI and ATA disks, its ``wwn``: recorded, for the identity rule
    (NVMe's serial is its controller's, not read)."""
    if family == "nvme":
        return []
    return [QomRead(path, "serial")] + ([QomRead(path, "wwn")] if family != "virtio-blk" else [])


def qom_reads(family: DeviceFamily, disk_path: str, hba_path: str | None = None) -> list[QomRead]:
    """The QOM properties that say what one disk's device advertises. ``disk_path`` is the disk's
    device (``/machine/peripheral/<device id>``), ``hba_path`` its HBA's where it has one.

    - virtio-scsi: the HBA's virtio device (``<hba>/virtio-backend``): ``cmd_per_lun`` (the
      queue depth of each LUN), ``num_queues``, ``max_sectors`` (512-byte sectors per request),
      ``virtqueue_size``, ``seg_max_adjust``; the scsi-hd's block properties;
    - virtio-blk: the disk's virtio device: ``queue-size`` (the requests the guest may queue),
      ``num-queues``, ``discard``, ``seg-max-adjust``, ``config-wce``, and its block properties;
    - another SCSI HBA (LSI, MegaRAID): the queue depth is the emulation's own, no property; the
      scsi-hd's block properties and ``max_io_size``;
    - ATA (AHCI, IDE): the ide-hd's block properties;
    - NVMe: ``mdts`` (the maximum transfer), ``max_ioqpairs``, and the namespace's block properties
      (its logical block size taken as advertised; the rest recorded: NVME_OWN_RULES).
    """
    reads: list[QomRead] = []
    if family == "virtio-scsi" and hba_path:
        backend = f"{hba_path}/virtio-backend"
        reads += [QomRead(backend, "cmd_per_lun", "queue_depth"), QomRead(backend, "num_queues", "queues"),
                  QomRead(backend, "max_sectors", "max_transfer_bytes"), QomRead(backend, "virtqueue_size"),
                  QomRead(backend, "seg_max_adjust")]
    if family == "virtio-blk":
        backend = f"{disk_path}/virtio-backend"
        reads += [QomRead(backend, "queue-size", "queue_depth"), QomRead(backend, "num-queues", "queues"),
                  QomRead(backend, "discard", "discard"), QomRead(backend, "seg-max-adjust"),
                  QomRead(backend, "config-wce")]
        return reads + _block_reads(backend, family)
    if family == "nvme":
        reads += [QomRead(disk_path, "mdts", "max_transfer_bytes"), QomRead(disk_path, "max_ioqpairs")]
    reads += _block_reads(disk_path, family)
    if family in ("virtio-scsi", "scsi"):
        reads.append(QomRead(disk_path, "max_io_size"))
    return reads


#: A property value QMP returned: JSON scalars.
QomValue = int | bool | str | float | None


def _as_limit(read: QomRead, value: QomValue, writeback: bool | None) -> int | bool | None:
    """A QOM value in ``ConfiguredLimits``' units; None where it says nothing definite."""
    if read.prop == "write-cache":  # OnOffAuto: "auto" is the block backend's cache mode (query-block)
        return {"on": True, "off": False}.get(str(value), writeback)
    if isinstance(value, bool):
        return value
    if not isinstance(value, int):
        return None
    if read.prop == "mdts":  # 0: no limit stated
        return NVME_MIN_PAGE_BYTES << value if value > 0 else None
    if read.prop == "max_sectors":
        return value * SECTOR_BYTES
    return value


def advertised_from_qom(reads: Collection[QomRead], answers: Mapping[tuple[str, str], QomValue], source: str,
                        unknown: Collection[tuple[str, str]] = (), writeback: bool | None = None,
                        notes: Collection[str] = ()) -> Advertised:
    """QEMU's answer as an :class:`Advertised`. ``answers``: (path, property) -> the value
    ``qom-get`` returned; ``unknown``: the reads QEMU has no such property (or device) for, each a
    note; ``writeback``: the disk's block backend's write cache (query-block's ``cache.writeback``),
    which a ``write-cache=auto`` device advertises."""
    limits: dict[str, int | bool | None] = {}
    said_by: dict[str, str] = {}
    unsaid = {r.unsaid: f"{r.prop} of {r.path} is read, not taken as advertised: {r.why}" for r in reads if r.unsaid}
    props = []
    out_notes = list(notes)
    for r in reads:
        key = (r.path, r.prop)
        if key in unknown:
            props.append(DeviceProperty(r.path, r.prop, "", known=False))
            out_notes.append(f"QEMU has no property {r.prop} on {r.path} (an older QEMU?): "
                             + (f"what the device advertises for {r.limit} is not said" if r.limit else "not read"))
            continue
        if key not in answers:
            continue
        value = answers[key]
        props.append(DeviceProperty(r.path, r.prop, _qom_text(value)))
        if r.limit is None or r.limit in limits:
            continue
        said = _as_limit(r, value, writeback)
        if said is not None:
            limits[r.limit] = said
            how = " (auto: the block backend's write cache, query-block)" if r.prop == "write-cache" and \
                value == "auto" else ""
            said_by[r.limit] = f"{r.prop} {_qom_text(value)} of {r.path}{how}"
    names = {f.name for f in fields(Advertised)}
    return Advertised(source, **{k: v for k, v in limits.items() if k in names},  # type: ignore[arg-type]
                      said_by=said_by, unsaid=unsaid, properties=tuple(props), notes=tuple(out_notes))


def _qom_text(value: QomValue) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)
