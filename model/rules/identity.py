"""identity: the serial, the WWN (where the bus has one) and the size the guest sees of each disk
are what the host configured, read from the guest's sysfs (the serial from ``serial``,
``device/vpd_pg80`` or ``device/serial``; the WWN from VPD page 0x83's NAA designator, else
``device/wwid``; the size from ``size``), beside what the hypervisor says the device has
(QEMU's ``serial`` and ``wwn`` properties, ``qom-get``).

A serial the bus cuts (virtio-blk, ATA and NVMe carry 20 bytes) is named as truncation. The layer
at fault is the rule's own evidence (its verdict's ``hint``): the hypervisor where the device has
other than what was configured, or where the guest sees what the bus carries of it; the guest's
driver where the device has the configured value and the guest shows another; unknown where the
hypervisor did not say.

Example::

    v = judge_identity([("dut", configured, seen, device)])
    v.problems  # ("dut disk vda: serial: the suite configured 'vioc-dut0', the device has ... [blame: hypervisor]",)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from model.advertised import Advertised
from model.blame import Blame, BlameSettings, Layer
from model.judging.spec import PARAM, Metrics, MetricSpec
from model.judging.verdict import Number, RuleVerdict
from model.parse.identity_files import parse_identity_files, text_of, vpd_naa, vpd_serial, wwid_naa
from model.rules.limits import ROLES  # the same two disks of a controller

RULE = "identity"
#: No sysfs setting of the blame trails decides it: its own evidence names the layer (``hint``).
BLAME = BlameSettings(frozenset())
#: It reads settings, which do not vary: one read, whatever --repeats says.
DEFAULT_REPEATS = 1
REPEATABLE = False
#: outside the default suite (its time is a budget of 13 rules): runs where --with-rules names it
OPT_IN = True
HOST_CPU_BOUND: tuple[str, ...] = ()
_ROLE = "(" + "|".join(ROLES) + ")_"
#: What it records, as text: per disk role the serial, WWN and size as configured, as the device
#: has them and as the guest sees them, and the disk's kernel name.
METRICS: Metrics = (
    (_ROLE + "(serial|wwn|size_bytes)_(guest|configured|device)", MetricSpec("", PARAM)),
    (_ROLE + "identity_disk", MetricSpec("", PARAM)),
)
MIN_EFFECTS: Mapping[str, float] = {}


@dataclass(frozen=True)
class ConfiguredIdentity:
    """What the host was told to give a disk. ``wwn``: 16 hex digits, None where the bus has no WWN
    or none was set; ``serial_bytes``: how much of a serial the bus carries; ``bus``: its name in sentences."""

    serial: str
    wwn: str | None
    size_bytes: int
    serial_bytes: int
    bus: str


@dataclass(frozen=True)
class DeviceIdentity:
    """What the hypervisor says the device has (None: not said), and where it said it."""

    serial: str | None = None
    wwn: str | None = None
    serial_said_by: str = ""  # "serial of /machine/peripheral/ua-vioc-dut00, QEMU 7.2.22, QMP qom-get"
    wwn_said_by: str = ""


@dataclass(frozen=True)
class GuestIdentity:
    """What the guest's kernel shows of the disk ``name``; ``*_from``: the sysfs file it came from."""

    name: str
    size_bytes: int
    serial: str | None
    serial_from: str = ""
    wwn: str | None = None
    wwn_from: str = ""
    vpd_pages: tuple[str, ...] = ()


#: Linux's ``size`` file counts 512-byte sectors whatever the logical block size.
SECTOR_BYTES = 512


def guest_identity(name: str, text: str) -> GuestIdentity:
    """What the guest tool read of disk ``name`` (``FILE=HEX`` lines), decoded: the serial from
    ``serial`` (virtio-blk), VPD page 0x80 (SCSI, ATA) or ``device/serial`` (NVMe), the WWN from VPD
    page 0x83's NAA designator, else the kernel's ``device/wwid``."""
    files = parse_identity_files(text, f"{name} identity")
    if "size" not in files:
        raise ValueError(f"{name} identity: the guest shows no /sys/block/{name}/size")
    serial, serial_from = None, ""
    for f in ("serial", "device/vpd_pg80", "device/serial"):
        if f in files:
            raw = files[f]
            serial, serial_from = (vpd_serial(raw, f"{name} {f}") if f.endswith("vpd_pg80") else text_of(raw)), f
            break
    wwn, wwn_from = None, ""
    if "device/vpd_pg83" in files:
        wwn, wwn_from = vpd_naa(files["device/vpd_pg83"], f"{name} device/vpd_pg83"), "device/vpd_pg83"
    if wwn is None and "device/wwid" in files:
        wwn, wwn_from = wwid_naa(text_of(files["device/wwid"])), "device/wwid"
    pages = tuple(f"0x{f[-2:]}" for f in ("device/vpd_pg80", "device/vpd_pg83") if f in files)
    return GuestIdentity(name, int(text_of(files["size"])) * SECTOR_BYTES, serial, serial_from,
                         wwn, wwn_from if wwn else "", pages)


def device_identity(advertised: Advertised | None) -> DeviceIdentity:
    """The device's ``serial`` and ``wwn`` among the properties the hypervisor answered (QEMU's
    ``wwn`` is a number: given here as 16 hex digits)."""
    if advertised is None:
        return DeviceIdentity()
    said = {p.name: p for p in advertised.properties if p.known and p.name in ("serial", "wwn")}
    wwn = said.get("wwn")
    wwn_hex = f"{int(wwn.value):016x}" if wwn is not None and wwn.value.isdigit() and int(wwn.value) else None
    by = {n: f"{n} of {p.owner}, {advertised.source}" for n, p in said.items()}
    return DeviceIdentity(said["serial"].value if "serial" in said else None, wwn_hex,
                          by.get("serial", ""), by.get("wwn", "") if wwn_hex else "")


def _compare(what: str, configured: str | None, device: str | None, guest: str | None, said_by: str,
             limit: int | None = None, bus: str = "") -> tuple[str, Layer] | None:
    """Why ``guest`` is not ``configured``, and the layer at fault; None where it is."""
    if configured is None or guest == configured:
        return None
    cut = ""
    layer: Layer = "unknown"
    longest = device if device is not None and device != configured else configured
    if limit is not None and guest is not None and len(longest) > limit and guest == longest[:limit]:
        cut = f": truncated to {limit} bytes, what {bus} carries of a serial"
    if device is not None and device != configured:
        said, layer = f"the device has {device!r} ({said_by}), the guest sees", "hypervisor"
    elif cut:
        said, layer = "the guest sees", "hypervisor"
    elif device is not None:
        said, layer = f"the device has it ({said_by}), the guest's driver shows", "guest driver"
    else:
        said = "the hypervisor did not say what the device has, the guest sees"
    seen = "none" if guest is None else repr(guest)
    return f"{what}: the suite configured {configured!r}, {said} {seen}{cut}", layer


def judge_identity(disks: Sequence[tuple[str, ConfiguredIdentity, GuestIdentity, DeviceIdentity]]) -> RuleVerdict:
    """``disks``: (role, what the host was told, what the guest sees, what the device has) per disk of one controller."""
    lines: list[str] = []
    problems: list[str] = []
    props: dict[str, Number] = {}
    hint: Blame | None = None
    for role, cfg, seen, dev in disks:
        name = f"{role} disk {seen.name}"
        found = [_compare("serial", cfg.serial, dev.serial, seen.serial, dev.serial_said_by, cfg.serial_bytes, cfg.bus),
                 _compare("WWN", cfg.wwn, dev.wwn, seen.wwn, dev.wwn_said_by)]
        if seen.size_bytes != cfg.size_bytes:
            found.append((f"size: the suite configured {cfg.size_bytes} bytes, the guest sees {seen.size_bytes}",
                          "unknown"))
        for problem in found:
            if problem is None:
                continue
            problems.append(f"{name}: {problem[0]} [blame: {problem[1]}]")
            hint = hint or Blame(problem[1], f"{name}: {problem[0]}")
        wwn = f"WWN {seen.wwn} ({seen.wwn_from})" if seen.wwn else "no WWN" + (" (the bus has none)" if cfg.wwn is None else "")
        lines.append(f"{name} on {cfg.bus}: serial {seen.serial!r} ({seen.serial_from or 'no file'}); {wwn}; "
                     f"size {seen.size_bytes} bytes; VPD pages {', '.join(seen.vpd_pages) or 'none'}")
        for key, value in (("serial", (cfg.serial, dev.serial, seen.serial)), ("wwn", (cfg.wwn, dev.wwn, seen.wwn)),
                           ("size_bytes", (cfg.size_bytes, None, seen.size_bytes))):
            for side, v in zip(("configured", "device", "guest"), value, strict=True):
                if v is not None:
                    props[f"{role}_{key}_{side}"] = str(v)
        props[f"{role}_identity_disk"] = seen.name
    return RuleVerdict(RULE, tuple(lines), tuple(problems), (), props, hint=hint)
