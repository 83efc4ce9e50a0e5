"""The storage controllers QEMU emulates, and how to attach the disks under test to each.

One guest carries every configured controller at once: one HBA per controller, with the
disk under test and the scratch disk as two targets (SCSI), ports (AHCI) or channels (IDE)
on it; virtio-blk and NVMe get one PCI device per disk. So the whole matrix needs one boot,
and 9 controllers with two disks each fit the PCI slots 0x12-0x1f.

Where libvirt 9.0 has XML for a controller or a file-backed disk, libvirt creates it (and
hands the file to the QEMU user). The null-co latency disk, which libvirt has no XML for,
and what libvirt cannot describe (QEMU's ``megasas-gen2``, NVMe disks) are JSON QEMU
arguments; their disk files are given to the QEMU user here.

Device ids: a disk's QEMU device is ``ua-vioc-dutNN`` (``ua-`` is libvirt's user-alias
prefix) for either backing, so host counters are found the same way. Two digits, because
query-blockstats entries are matched by substring and ``dut1`` is part of ``dut10``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath

from hypervisors.libvirt import disk_settings
from hypervisors.libvirt.trace import qemu_user
from model.device_limits import ConfiguredLimits
from model.disk_settings import CACHE_MODES
from model.errors import HypervisorError
from model.types import DiskSpec

#: First PCI slot used for the suite's own devices; libvirt fills slots from 0x02 upward,
#: so explicit high addresses avoid collisions (measured with libvirt 9.0: net at 0x11 without an
#: explicit address collided with libvirt's devices).
NET_PCI_SLOT = 0x11
#: The guest's entropy source (virtio-rng), below the user image's boot and seed disks.
RNG_PCI_SLOT = 0x0E
FIRST_DISK_PCI_SLOT = 0x12
#: The i440fx root bus has 32 slots.
LAST_PCI_SLOT = 0x1F

KIB = 1024


@dataclass(frozen=True)
class Controller:
    """One emulated storage controller.

    ``scsi_model``: libvirt's ``<controller type='scsi' model=...>`` for SCSI HBAs libvirt can
    create, else None. ``queue_depth``: commands the device accepts per disk, and
    ``max_transfer_bytes`` the largest request it takes, as measured in the Debian 6.1 guest
    here (the guest's ``queue_depth`` and ``max_hw_sectors_kb``; see docs/user-guide.md, "Controllers").
    """

    name: str
    description: str
    scsi_model: str | None
    queue_depth: int
    max_transfer_bytes: int | None
    multiqueue: bool = False
    #: which QEMU trace events carry this controller's requests: "virtio-blk", "scsi", "nvme", "ahci"
    #: (see model/parse/qemutrace.py); None where QEMU has no usable per-request events
    trace_family: str | None = None
    #: how a disk hangs on it: "virtio" (one virtio-blk-pci per disk), "scsi" (scsi-hd on the
    #: HBA), "sata" (ide-hd on an AHCI port), "ide" (ide-hd on the built-in PIIX IDE),
    #: "nvme" (one NVMe controller per disk)
    disk_bus: str = "scsi"
    #: QEMU device of an HBA that libvirt has no XML for, created with a JSON ``-device``
    qemu_hba: str | None = None
    #: the Linux driver that binds the device in the guest
    guest_driver: str = ""
    #: why a host error on this controller's disk must not be injected (it kills the guest), or ""
    injected_error_kills: str = ""
    #: why a disk hot-added on this controller never reaches the guest by itself, or "" (the hotplug rule skips)
    hotplug_unnoticed: str = ""

    @property
    def has_hba(self) -> bool:
        """One PCI HBA carries all of this controller's disks (else a device per disk, or built in)."""
        return self.disk_bus in ("scsi", "sata")

    @property
    def libvirt_disks(self) -> bool:
        """Whether libvirt's ``<disk>`` XML can attach a file-backed disk to it."""
        return self.qemu_hba is None and self.disk_bus != "nvme"

    def configured(self, disk: DiskSpec) -> ConfiguredLimits:
        """What this device, as the suite configures it, offers the guest (the limits rule's reference).

        Measured here with a Debian 6.1 guest (docs/rules/limits.md): every one of these QEMU devices
        advertises discard by default (scsi-hd UNMAP, virtio-blk, NVMe DSM, ATA TRIM) and a volatile
        write cache (cache=none/writeback; writethrough and directsync tell of none). ATA has no field
        for an optimal I/O size, so ide-hd cannot carry one. NVMe: the guest makes one I/O queue pair
        per vCPU (QEMU offers 64), so its queue count is the guest's choice, not a configured value.
        """
        return ConfiguredLimits(
            queue_depth=self.queue_depth,
            max_transfer_bytes=self.max_transfer_bytes,
            logical_block_bytes=disk.logical_block_bytes,
            physical_block_bytes=disk.physical_bytes,
            optimal_io_bytes=0 if self.disk_bus in ("sata", "ide") else disk.optimal_io_bytes,
            write_cache=disk.settings.host_writeback is not False,
            discard=True,
            queues=None if self.disk_bus == "nvme" else disk.queues if self.multiqueue else 1,
        )


#: QEMU 7.2 lets a scsi-hd be added to any SCSI bus (the bus is its own hot-plug handler), but only
#: virtio-scsi tells the guest (its transport-reset event, which makes virtio_scsi scan the target). The
#: emulated LSI and MegaRAID HBAs send nothing: measured, the guest showed no new disk within 5 s on
#: mptsas1068, lsi53c895a and megasas; only a rescan by hand would find it, which the rule does not allow.
_NO_HOTPLUG_EVENT = ("QEMU 7.2's emulated HBA accepts a new disk on its bus but sends the guest no event for it "
                     "(only virtio-scsi does): the guest would need a rescan by hand")

CONTROLLERS: dict[str, Controller] = {c.name: c for c in (
    # virtio-blk: virtqueue of 256 descriptors; the guest's nr_requests is 256.
    Controller("virtio-blk", "virtio-blk-pci, one PCI device per disk", None, 256, None, multiqueue=True,
               trace_family="virtio-blk", disk_bus="virtio", guest_driver="virtio_blk"),
    # virtio-scsi: QEMU's cmd_per_lun default is 128 (guest queue_depth 128, can_queue 256).
    Controller("virtio-scsi", "virtio-scsi-pci HBA with a scsi-hd", "virtio-scsi", 128, None, multiqueue=True,
               trace_family="scsi", guest_driver="virtio_scsi"),
    # Measured here (Debian 6.1 guest, TCG): the guest's queue_depth and max_hw_sectors_kb.
    # LSI SAS1068 (the Solaris mpt_sas case): queue_depth 64 (nr_requests 236), 4096 KiB.
    Controller("mptsas1068", "LSI SAS1068 (mptsas1068) HBA with a scsi-hd", "lsisas1068", 64, 4096 * KIB,
               trace_family="scsi", guest_driver="mptsas", hotplug_unnoticed=_NO_HOTPLUG_EVENT),
    # LSI 53C895A (sym53c8xx): queue_depth 16, which the guest cannot change; 32767 KiB.
    # A read the host fails is never completed in the guest; at the 30 s command timeout the guest's
    # error handler aborts it, and then QEMU 7.2 asserts (lsi_soft_reset: QTAILQ_EMPTY(&s->queue)) or
    # the guest's sym53c8xx takes a general protection fault in sym_interrupt and panics (seen both).
    Controller("lsi53c895a", "LSI 53C895A (lsi53c895a) parallel SCSI HBA with a scsi-hd", "lsilogic", 16,
               32767 * KIB, trace_family="scsi", guest_driver="sym53c8xx",
               injected_error_kills="a failed read is never completed in the guest; the abort at its 30 s command "
                                    "timeout crashes QEMU 7.2 (lsi_soft_reset: Assertion 'QTAILQ_EMPTY(&s->queue)' "
                                    "failed) or the Debian 6.1 guest (general protection fault in sym_interrupt, "
                                    "kernel panic), and every rule after it with the guest",
               hotplug_unnoticed=_NO_HOTPLUG_EVENT),
    # MegaRAID SAS 1078 (libvirt's model lsisas1078): queue_depth 256, can_queue 967, 128 KiB.
    Controller("megasas", "MegaRAID SAS 1078 (megasas) HBA with a scsi-hd", "lsisas1078", 256, 128 * KIB,
               trace_family="scsi", guest_driver="megaraid_sas", hotplug_unnoticed=_NO_HOTPLUG_EVENT),
    # MegaRAID SAS 2108: libvirt 9.0 has no model for it, so the HBA is a QEMU argument.
    Controller("megasas-gen2", "MegaRAID SAS 2108 (megasas-gen2) HBA with a scsi-hd", None, 256, 128 * KIB,
               trace_family="scsi", qemu_hba="megasas-gen2", guest_driver="megaraid_sas"),
    # NVMe: one controller per disk (the serial is the controller's); one I/O queue per vCPU,
    # 1023 requests each (nr_requests; QEMU's MQES 2048 above Linux's io_queue_depth 1024), 512 KiB.
    Controller("nvme", "NVMe controller (nvme), one per disk", None, 1023, 512 * KIB,
               trace_family="nvme", disk_bus="nvme", guest_driver="nvme"),
    # AHCI (ich9-ahci): NCQ with 32 tags (queue_depth 32, nr_requests 64), 128 KiB. Traced by
    # QEMU 7.2's per-tag NCQ events (process_ncq_command / ncq_finish).
    Controller("ahci", "ICH9 AHCI (ich9-ahci) SATA controller with an ide-hd", None, 32, 128 * KIB,
               trace_family="ahci", disk_bus="sata", guest_driver="ahci"),
    # IDE (PIIX3, built into the pc machine): one command at a time (queue_depth 1, can_queue 1),
    # no command queuing; LBA48 allows 65535 sectors (32767 KiB).
    Controller("ide", "PIIX IDE built into the pc machine, with an ide-hd", None, 1, 32767 * KIB,
               disk_bus="ide", guest_driver="ata_piix"),
)}


def guest_drivers(disks: Sequence[DiskSpec]) -> list[str]:
    """The guest modules the disks' controllers need, in load order: each controller's driver, and
    ``sd_mod`` where the guest sees the disk as a SCSI disk (all but virtio-blk and NVMe). The
    embedded guest's init loads these and no other storage driver (``vioconform.drivers=``)."""
    out: list[str] = []
    for disk in disks:
        ctl = CONTROLLERS[disk.controller]
        for module in (ctl.guest_driver, "" if ctl.disk_bus in ("virtio", "nvme") else "sd_mod"):
            if module and module not in out:
                out.append(module)
    return out


def pci_addr(slot: int) -> str:
    return f"bus=pci.0,addr={slot:#x}"


def device_id(disk: DiskSpec) -> str:
    return f"ua-vioc-dut{disk.index:02d}"


def hba_alias(controller: str) -> str:
    """The QEMU id of a controller's HBA; its SCSI bus is ``<alias>.0``, AHCI ports ``<alias>.<n>``."""
    return f"ua-vioc-{controller}"


@dataclass(frozen=True)
class Placement:
    """Where one disk sits in the guest.

    ``slot``: the PCI slot of the disk's own device (virtio-blk, NVMe) or of its HBA, None on
    the built-in IDE. ``hba_index``: libvirt's ``index`` of the HBA among controllers of its
    type. ``position``: the disk's number on its controller (SCSI target, AHCI port, IDE
    channel). ``first``: the first disk of its controller, which brings the HBA with it.
    """

    disk: DiskSpec
    slot: int | None
    hba_index: int
    position: int
    first: bool

    @property
    def controller(self) -> Controller:
        return CONTROLLERS[self.disk.controller]


def layout(disks: Sequence[DiskSpec]) -> list[Placement]:
    """Give each disk its PCI slot and its place on its controller's HBA."""
    next_slot = FIRST_DISK_PCI_SLOT
    hbas: dict[str, tuple[int | None, int]] = {}  # controller -> (slot, libvirt index)
    count: dict[str, int] = {}
    type_count: dict[str, int] = {}
    out = []
    for disk in disks:
        ctl = CONTROLLERS[disk.controller]
        position = count.get(ctl.name, 0)
        count[ctl.name] = position + 1
        first = position == 0
        if ctl.has_hba and first:
            kind = ctl.disk_bus if ctl.qemu_hba is None else "qemu"
            hbas[ctl.name] = (next_slot, type_count.get(kind, 0))
            type_count[kind] = type_count.get(kind, 0) + 1
            next_slot += 1
        if ctl.has_hba:
            slot, index = hbas[ctl.name]
        elif ctl.disk_bus == "ide":
            slot, index = None, 0
        else:
            slot, index = next_slot, 0
            next_slot += 1
        if slot is not None and slot > LAST_PCI_SLOT:
            raise HypervisorError(
                f"too many PCI devices for one guest: {len(disks)} disks on "
                f"{', '.join(dict.fromkeys(d.controller for d in disks))} need slots past {LAST_PCI_SLOT:#x}; "
                "test fewer controllers per run (--controllers)")
        out.append(Placement(disk, slot, index, position, first))
    return out


def _slot_xml(slot: int | None) -> str:
    return f"<address type='pci' domain='0' bus='0' slot='{slot:#x}' function='0'/>" if slot is not None else ""


def hba_xml(p: Placement, queues: int, iothread: bool = False) -> str:
    """The libvirt ``<controller>`` of a disk's HBA: empty unless ``p`` is the first disk of a
    controller libvirt creates. libvirt fills gaps in the indexes with default (LSI) controllers.
    ``iothread``: a virtio-scsi HBA runs in the domain's iothread."""
    ctl = p.controller
    if not (p.first and ctl.has_hba and ctl.qemu_hba is None):
        return ""
    if ctl.disk_bus == "sata":
        head = f"<controller type='sata' index='{p.hba_index}'>"
    else:
        # Always explicit: QEMU's default for virtio-scsi is one queue per vCPU, not the one configured.
        pinned = f" iothread='{disk_settings.IOTHREAD_ID}'" if iothread and ctl.name == "virtio-scsi" else ""
        driver = f"<driver queues='{queues}'{pinned}/>" if ctl.multiqueue else ""
        head = f"<controller type='scsi' index='{p.hba_index}' model='{ctl.scsi_model}'>{driver}"
    return f"{head}<alias name='{hba_alias(ctl.name)}'/>{_slot_xml(p.slot)}</controller>"


def hba_args(p: Placement) -> list[str]:
    """JSON QEMU arguments of an HBA libvirt has no XML for (megasas-gen2)."""
    ctl = p.controller
    if not (p.first and ctl.qemu_hba and p.slot is not None):
        return []
    return ["-device", json.dumps({"driver": ctl.qemu_hba, "id": hba_alias(ctl.name), "bus": "pci.0",
                                   "addr": f"{p.slot:#x}"})]


def _wwn(disk: DiskSpec) -> int:
    # A non-zero WWN: Linux's mptsas skips SAS phys whose address is 0 (seen with QEMU 7.2's mptsas1068).
    return disk_settings.wwn_value(disk, 0x5000C50015EA7100 + disk.index)


def disk_wwn(disk: DiskSpec) -> int | None:
    """The WWN the disk's device gets: every SCSI disk one (the suite's, or the asked one), an ATA disk
    the asked one; None where the device has none (virtio-blk, NVMe) or none was asked (ATA)."""
    bus = CONTROLLERS[disk.controller].disk_bus
    if bus == "scsi" or (bus in ("sata", "ide") and disk.settings.wwn is not None):
        return _wwn(disk)
    return None


#: Every disk hands a host error to the guest (the error-propagation rule makes the scratch disk fail):
#: QEMU's ``rerror``/``werror`` ``report``, libvirt's ``error_policy``/``rerror_policy``. QEMU's own
#: defaults report too (``auto``: report reads, ``enospc`` writes), but say nothing of what was meant.
REPORT_ERRORS = {"rerror": "report", "werror": "report"}


def device_props(p: Placement, node: str) -> dict[str, object]:
    """The QEMU ``-device`` properties of a disk whose block node is ``node``."""
    disk, ctl = p.disk, p.controller
    props: dict[str, object] = {"drive": node, "id": device_id(disk), "serial": disk.serial,
                                "physical_block_size": disk.physical_bytes,
                                "opt_io_size": disk.optimal_io_bytes, **disk_settings.device_options(disk, ctl.disk_bus)}
    if ctl.disk_bus != "nvme":  # QEMU's nvme has no error policy: it reports every error
        props.update(REPORT_ERRORS)
    if ctl.disk_bus == "virtio":
        props.update({"driver": "virtio-blk-pci", "num-queues": disk.queues, "bus": "pci.0", "addr": f"{p.slot:#x}"})
    elif ctl.disk_bus == "nvme":
        props.update({"driver": "nvme", "bus": "pci.0", "addr": f"{p.slot:#x}"})
    elif ctl.disk_bus == "sata":
        props.update({"driver": "ide-hd", "bus": f"{hba_alias(ctl.name)}.{p.position}"})
    elif ctl.disk_bus == "ide":
        # One disk per channel first: the two disks of a channel cannot be busy at once.
        props.update({"driver": "ide-hd", "bus": f"ide.{p.position % 2}", "unit": p.position // 2})
    else:
        props.update({"driver": "scsi-hd", "bus": f"{hba_alias(ctl.name)}.0", "scsi-id": p.position, "lun": 0,
                      "wwn": _wwn(disk)})
    if disk.settings.wwn is not None and ctl.disk_bus in ("sata", "ide"):
        props["wwn"] = _wwn(disk)
    return props


def latency_blockdev(disk: DiskSpec, node: str) -> dict[str, object]:
    """A null-co block node with a fixed service time (libvirt has no XML for null-co)."""
    return {"driver": "null-co", "node-name": node, "size": disk.size_bytes,
            "latency-ns": int(disk.latency_ms * 1_000_000), "read-zeroes": True, **disk_settings.node_options(disk)}


#: How libvirt 9.0 opens the raw format node of a ``<driver name='qemu' type='raw' cache='none' discard='unmap'>`` disk
#: (its ``-blockdev`` on the domain's command line), ``node-name`` and ``file`` aside.
LIBVIRT_FORMAT_OPTIONS: dict[str, object] = {"driver": "raw", "read-only": False, "discard": "unmap",
                                             "cache": {"direct": True, "no-flush": False}}
_CACHE = {"direct": True, "no-flush": False}
#: The raw format node of a file disk the suite gives QEMU itself (``file_blockdev``), ``node-name`` and ``file`` aside.
QEMU_FORMAT_OPTIONS: dict[str, object] = {"driver": "raw", "cache": _CACHE, "discard": "unmap"}


def file_blockdev(path: PurePath, node: str, disk: DiskSpec) -> dict[str, object]:
    """A file's format node set up as libvirt sets up ``cache='none' io='native'`` (raw) where
    ``disk`` asks nothing, else as its settings ask; its file node is ``<node>-file`` (named, so
    that an error injector can put a node between them)."""
    top = {**_settings_format(disk, QEMU_FORMAT_OPTIONS), "node-name": node}
    return {**top, "file": {"driver": "file", "node-name": f"{node}-file", "filename": str(path),
                            "aio": disk_settings.effective_aio(disk.settings), "cache": top["cache"],
                            "discard": top["discard"]}}


def _settings_format(disk: DiskSpec, base: dict[str, object]) -> dict[str, object]:
    """``base`` (a raw format node as the suite opens it) with what ``disk``'s settings change."""
    s = disk.settings
    _, direct, no_flush = CACHE_MODES[disk_settings.effective_cache(s)]
    out = {**base, "driver": s.format or "raw", "cache": {"direct": direct, "no-flush": no_flush},
           "discard": disk_settings.effective_discard(s)}
    if s.detect_zeroes is not None:
        out["detect-zeroes"] = s.detect_zeroes
    return out


def format_options(disk: DiskSpec) -> dict[str, object] | None:
    """What the format node of a file-backed ``disk`` was opened with (``node-name`` and ``file``
    aside), as ``blockdev-reopen`` needs them; None for a disk with no file under it (null-co)."""
    if disk.backing != "file":
        return None
    return _settings_format(disk, LIBVIRT_FORMAT_OPTIONS if CONTROLLERS[disk.controller].libvirt_disks
                            else QEMU_FORMAT_OPTIONS)


def disk_args(p: Placement, run_dir: PurePath) -> list[str]:
    """JSON QEMU arguments of a disk libvirt does not create.

    JSON form: QEMU 7.2 creates all key=value -device options before the JSON ones libvirt
    emits, so a key=value scsi-hd would not find libvirt's controller bus."""
    node = f"vioc-node{p.disk.index}"
    if p.disk.backing == "latency":
        blockdev = latency_blockdev(p.disk, node)
    else:
        path = disk_file(run_dir, p.disk)
        give_to_qemu(Path(path))  # a local disk file (a remote one is given by hostfiles.RemoteFiles)
        blockdev = file_blockdev(path, node, p.disk)
    return ["-blockdev", json.dumps(blockdev), "-device", json.dumps(device_props(p, node))]


def give_to_qemu(path: Path) -> None:
    """Hand a disk file libvirt does not know about to the QEMU user: libvirt relabels only
    the files in its XML, and QEMU runs as libvirt-qemu under the system daemon."""
    if path.exists():
        uid, gid = qemu_user()
        os.chown(path, uid, gid)
        path.chmod(0o660)


def _dev_name(prefix: str, n: int) -> str:
    """Linux-style disk names: sdb, ..., sdz, sdaa."""
    letters = ""
    n += 1  # "a" is left for a boot disk
    while True:
        letters = chr(ord("a") + n % 26) + letters
        n = n // 26 - 1
        if n < 0:
            return prefix + letters


def file_disk_xml(p: Placement, path: str, boot_order: int | None = None) -> str:
    """The libvirt ``<disk>`` for a file-backed disk under test. ``boot_order``: its place in the
    firmware's boot order, given when the guest boots from a disk of its own (a user's image): without
    it libvirt 9.0 makes the first ``<disk>`` the boot disk (bootindex 1, which the image's boot disk has)."""
    disk, ctl = p.disk, p.controller
    blockio = disk_settings.blockio_xml(disk)
    # Always explicit: QEMU's default for virtio-blk is one queue per vCPU, not the one configured.
    queues = f" queues='{disk.queues}'" if ctl.disk_bus == "virtio" else ""
    # libvirt accepts <wwn> only on SCSI and IDE disks; only mptsas needs one, others get one if asked
    wwn = f"<wwn>{_wwn(disk):016x}</wwn>" if disk.settings.wwn is not None and ctl.disk_bus in ("sata", "ide") else ""
    boot = "" if boot_order is None else f"<boot order='{boot_order}'/>"
    if ctl.disk_bus == "virtio":
        bus, prefix, addr = "virtio", "vd", _slot_xml(p.slot)
    elif ctl.disk_bus == "ide":
        bus, prefix = "ide", "hd"
        addr = f"<address type='drive' controller='0' bus='{p.position % 2}' target='0' unit='{p.position // 2}'/>"
    elif ctl.disk_bus == "sata":
        bus, prefix = "sata", "sd"
        addr = f"<address type='drive' controller='{p.hba_index}' bus='0' target='0' unit='{p.position}'/>"
    else:
        bus, prefix = "scsi", "sd"
        wwn = f"<wwn>{_wwn(disk):016x}</wwn>"
        # libvirt 9.0 maps the unit to scsi-id on lsilogic, and target/unit to scsi-id/lun elsewhere.
        target, unit = (0, p.position) if ctl.scsi_model == "lsilogic" else (p.position, 0)
        addr = f"<address type='drive' controller='{p.hba_index}' bus='0' target='{target}' unit='{unit}'/>"
    return (f"<disk type='file' device='disk'><driver name='qemu' {disk_settings.driver_attrs(disk, ctl.disk_bus)}"
            f" error_policy='report' rerror_policy='report'{queues}/>"
            f"<source file='{path}'/><target dev='{_dev_name(prefix, disk.index)}' bus='{bus}'/>"
            f"{disk_settings.iotune_xml(disk)}{blockio}"
            f"<serial>{disk.serial}</serial>{wwn}<alias name='{device_id(disk)}'/>{addr}{boot}</disk>")


def disk_overrides(disks: Sequence[DiskSpec], param_change: bool = True) -> str:
    """``<qemu:override>`` properties libvirt's ``<disk>`` and ``<controller>`` have no XML for: the
    optimal I/O size (libvirt 9.0's ``<blockio>`` carries only the block sizes) and, with
    ``param_change`` False, virtio-scsi's ``param_change=off`` (the ``param-change-off`` fault). Empty
    when none is needed."""
    props = []
    for p in layout(disks):
        if not param_change and p.first and p.controller.name == "virtio-scsi":
            props.append(f"<qemu:device alias='{hba_alias(p.controller.name)}'><qemu:frontend>"
                         "<qemu:property name='param_change' type='bool' value='false'/>"
                         "</qemu:frontend></qemu:device>")
        if p.disk.backing == "file" and p.controller.libvirt_disks and p.disk.optimal_io_bytes:
            props.append(f"<qemu:device alias='{device_id(p.disk)}'><qemu:frontend>"
                         f"<qemu:property name='opt_io_size' type='unsigned' value='{p.disk.optimal_io_bytes}'/>"
                         "</qemu:frontend></qemu:device>")
    return f"<qemu:override>{''.join(props)}</qemu:override>" if props else ""


def disk_file(run_dir: PurePath, disk: DiskSpec) -> PurePath:
    """Where a file-backed disk's image lives (created by the backend: a sparse raw file, or qcow2 with qemu-img)."""
    return run_dir / f"dut{disk.index}.img"


def disk_devices(disks: Sequence[DiskSpec], run_dir: PurePath,
                 first_boot_order: int | None = None) -> tuple[list[str], list[str]]:
    """Domain XML elements and extra QEMU arguments that attach ``disks`` to their controllers.

    File-backed disks that only QEMU arguments can attach must exist already: they are
    handed to the QEMU user here. ``first_boot_order``: the boot order of the first libvirt
    ``<disk>`` (see ``file_disk_xml``), the next ones after it."""
    disk_settings.check(disks, {c.name: (c.disk_bus, c.libvirt_disks) for c in CONTROLLERS.values()})
    xml: list[str] = []
    args: list[str] = []
    queues: dict[str, int] = {}
    iothread: set[str] = set()
    for d in disks:
        queues[d.controller] = max(queues.get(d.controller, 1), d.queues)
        if d.settings.iothread == "on":
            iothread.add(d.controller)
    order = first_boot_order
    for p in layout(disks):
        xml.append(hba_xml(p, queues[p.disk.controller], p.disk.controller in iothread))
        args += hba_args(p)
        if p.disk.backing == "file" and p.controller.libvirt_disks:
            xml.append(file_disk_xml(p, str(disk_file(run_dir, p.disk)), order))
            order = None if order is None else order + 1
        else:
            args += disk_args(p, run_dir)
    return [x for x in xml if x], args


def disk_settings_refusal(disks: Sequence[DiskSpec]) -> str:
    """Why a disk's controller cannot carry its ``--disk`` settings (hypervisors/libvirt/disk_settings.py),
    or "": asked before any guest starts."""
    try:
        disk_settings.check(disks, {c.name: (c.disk_bus, c.libvirt_disks) for c in CONTROLLERS.values()})
    except HypervisorError as e:
        return str(e)
    return ""
