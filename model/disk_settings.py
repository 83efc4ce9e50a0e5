"""How a disk is set up on the host, as data: QEMU's cache mode, aio, iothread, discard,
detect-zeroes, block sizes, image format, serial, WWN and I/O limits.

Every setting is None by default: nothing asked, so the suite sets up the disk as it always
has (a file-backed disk as libvirt's ``cache='none' io='native' discard='unmap'``, a latency
disk as QEMU's null-co; QEMU's and libvirt's defaults for the rest). ``pairs()`` gives what
was asked, sorted, as the configuration's part of the test id shows it: ``--disk
cache=none,aio=native`` gives ``(("aio", "native"), ("cache", "none"))``, shown as
``:aio=native,cache=none``; no ``--disk`` gives ``()`` and the ids without settings.

Where the values come from: QEMU's ``qemu-options.hx`` (``-drive cache=``, ``aio=``,
``discard=``, ``detect-zeroes=``) and ``qapi/block-core.json`` (``BlockdevDetectZeroesOptions``,
``BlockdevAioOptions``, the throttle limits), and libvirt's ``<driver>``, ``<blockio>``,
``<serial>``, ``<wwn>`` and ``<iotune>`` elements (formatdomain, "Hard drives, floppy disks,
CDROMs").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields, replace
from typing import Final

#: QEMU's cache modes (qemu-options.hx, ``-drive cache=``): what each sets of
#: ``cache.writeback`` (the guest is told of a volatile write cache), ``cache.direct``
#: (O_DIRECT on the host) and ``cache.no-flush`` (flushes dropped).
CACHE_MODES: Final = {
    "writeback": (True, False, False),
    "none": (True, True, False),
    "writethrough": (False, False, False),
    "directsync": (False, True, False),
    "unsafe": (True, False, True),
}
AIO_MODES: Final = ("threads", "native", "io_uring")
ON_OFF: Final = ("on", "off")
DISCARD_MODES: Final = ("unmap", "ignore")
DETECT_ZEROES_MODES: Final = ("off", "on", "unmap")
FORMATS: Final = ("raw", "qcow2")
#: vSphere's disk modes (``VirtualDiskMode``) and multi-writer sharing (``VirtualDiskSharing``), as
#: the suite names them; libvirt's disks have neither.
DISK_MODES: Final = {"persistent": "persistent", "independent_persistent": "independent_persistent",
                     "independent_nonpersistent": "independent_nonpersistent"}
SHARING: Final = {"none": "sharingNone", "multi_writer": "sharingMultiWriter"}
#: The settings only vSphere has.
VSPHERE_ONLY: Final = ("disk_mode", "sharing")
#: Block sizes QEMU's block devices take (a power of two from 512 B to 32 KiB; the physical one
#: no smaller than the logical one: QEMU refuses it).
BLOCK_SIZES: Final = (512, 1024, 2048, 4096, 8192, 16384, 32768)
#: The characters a serial may hold here: those every bus carries unchanged (SCSI VPD 0x80 and
#: ATA IDENTIFY are ASCII; libvirt refuses others in ``<serial>``).
SERIAL_PATTERN: Final = re.compile(r"[A-Za-z0-9_.-]{1,36}")
#: A WWN (NAA) as 16 hex digits, not all zero: Linux's mptsas skips a SAS phy whose address is 0.
WWN_PATTERN: Final = re.compile(r"(0x)?[0-9a-fA-F]{16}")

#: How an aio mode and a cache mode go together: QEMU refuses ``aio=native`` without O_DIRECT
#: ("aio=native was specified, but it requires cache.direct=on").
NATIVE_NEEDS_DIRECT: Final = ("none", "directsync")


class DiskSettingsError(ValueError):
    """A ``--disk`` value that names an unknown setting or a value the setting does not take."""


@dataclass(frozen=True)
class DiskSettings:
    """One disk's settings on the host; None: not asked (the suite's own set-up, see the module).

    ``iothread``: "on" gives the disk (virtio-blk) or its HBA (virtio-scsi) an iothread of its own.
    ``serial``: the serial's text; each disk gets it followed by ``-<index>``, so that the guest
    tells the two disks of a controller apart. ``wwn``: 16 hex digits; each disk gets it plus its
    index. ``iops``, ``bps``: libvirt's ``total_iops_sec`` and ``total_bytes_sec`` (vSphere: ``iops`` is
    the disk's ``storageIOAllocation.limit``). ``disk_mode``, ``sharing``: vSphere's only.
    """

    cache: str | None = None
    aio: str | None = None
    iothread: str | None = None
    discard: str | None = None
    detect_zeroes: str | None = None
    logical_block_size: int | None = None
    physical_block_size: int | None = None
    format: str | None = None
    serial: str | None = None
    wwn: str | None = None
    iops: int | None = None
    bps: int | None = None
    disk_mode: str | None = None
    sharing: str | None = None

    def pairs(self) -> tuple[tuple[str, str], ...]:
        """What was asked, as sorted (key, value) strings (the configuration's ``disk_settings``)."""
        return tuple(sorted((f.name, str(getattr(self, f.name))) for f in fields(self)
                            if getattr(self, f.name) is not None))

    def __str__(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.pairs())

    @property
    def host_writeback(self) -> bool | None:
        """Whether the host tells the guest of a volatile write cache (QEMU's ``cache.writeback``);
        None when the cache mode was not asked."""
        return None if self.cache is None else CACHE_MODES[self.cache][0]

    def merged(self, other: DiskSettings) -> DiskSettings:
        """These settings with what ``other`` asks put over them (a profile and a ``--disk`` on top)."""
        return replace(self, **{f.name: getattr(other, f.name) for f in fields(other)
                                if getattr(other, f.name) is not None})


def _block_size(key: str, value: str) -> int:
    if not value.isdigit() or int(value) not in BLOCK_SIZES:
        raise DiskSettingsError(f"--disk {key}={value}: {key} takes a block size in bytes, one of "
                                f"{', '.join(map(str, BLOCK_SIZES))}")
    return int(value)


def _limit(key: str, value: str) -> int:
    if not value.isdigit() or int(value) == 0:
        raise DiskSettingsError(f"--disk {key}={value}: {key} takes a whole number above 0 "
                                f"({'I/Os' if key == 'iops' else 'bytes'} per second)")
    return int(value)


def _serial(key: str, value: str) -> str:
    if not SERIAL_PATTERN.fullmatch(value):
        raise DiskSettingsError(f"--disk {key}={value}: a serial is 1 to 36 letters, digits, '_', '.' or '-'")
    return value


def _wwn(key: str, value: str) -> str:
    if not WWN_PATTERN.fullmatch(value) or int(value, 16) == 0:
        raise DiskSettingsError(f"--disk {key}={value}: a WWN is 16 hex digits, not all zero, e.g. 5000c50015ea7100")
    return value.lower().removeprefix("0x")


_CHOICES: Final = {
    "cache": tuple(CACHE_MODES), "aio": AIO_MODES, "iothread": ON_OFF, "discard": DISCARD_MODES,
    "detect_zeroes": DETECT_ZEROES_MODES, "format": FORMATS, "disk_mode": tuple(DISK_MODES), "sharing": tuple(SHARING),
}
_CONVERT: Final = {"logical_block_size": _block_size, "physical_block_size": _block_size,
                   "serial": _serial, "wwn": _wwn, "iops": _limit, "bps": _limit}
#: Every key ``--disk`` takes, in the order the dataclass declares them.
KEYS: Final = tuple(f.name for f in fields(DiskSettings))


def _value(key: str, value: str) -> object:
    if key in _CHOICES:
        if value not in _CHOICES[key]:
            raise DiskSettingsError(f"--disk {key}={value}: {key} takes {', '.join(_CHOICES[key])}")
        return value
    return _CONVERT[key](key, value)


def parse_disk_settings(text: str) -> DiskSettings:
    """``KEY=VALUE[,KEY=VALUE...]`` as DiskSettings; DiskSettingsError names the bad key or value
    and what it takes. A key given twice, or a combination QEMU refuses whatever the bus, is an error too."""
    values: dict[str, object] = {}
    for item in text.split(","):
        key, sep, value = item.strip().partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key or not value.strip():
            raise DiskSettingsError(f"--disk {text!r}: {item.strip()!r} is not KEY=VALUE; the keys are {', '.join(KEYS)}")
        if key not in KEYS:
            raise DiskSettingsError(f"--disk {key}={value}: no setting {key!r}; the keys are {', '.join(KEYS)}")
        if key in values:
            raise DiskSettingsError(f"--disk {text!r}: {key} is given twice")
        values[key] = _value(key, value.strip())
    settings = DiskSettings(**values)  # type: ignore[arg-type]
    problem = combination_problem(settings)
    if problem:
        raise DiskSettingsError(f"--disk {text!r}: {problem}")
    return settings


def combination_problem(s: DiskSettings) -> str:
    """Why QEMU would refuse these settings together on any disk, or "".

    A cache mode not asked stays the suite's ``none`` on a file-backed disk, so ``aio=native`` alone
    is accepted."""
    if s.aio == "native" and s.cache is not None and s.cache not in NATIVE_NEEDS_DIRECT:
        return (f"aio=native needs cache=none or cache=directsync (O_DIRECT); QEMU refuses it with "
                f"cache={s.cache}: use aio=threads or aio=io_uring, or another cache mode")
    if s.detect_zeroes == "unmap" and s.discard == "ignore":
        return "detect_zeroes=unmap needs discard=unmap: QEMU refuses it with discard=ignore"
    if (s.logical_block_size and s.physical_block_size and s.physical_block_size < s.logical_block_size):
        return (f"physical_block_size={s.physical_block_size} is below logical_block_size={s.logical_block_size}: "
                "QEMU refuses a physical block smaller than the logical one")
    return ""
