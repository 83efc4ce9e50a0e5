"""A run's series: the nightly job it belongs to. The fingerprint (model/across/fingerprint.py) is what
changed between two runs of it.

A series is named by ``--series NAME``, or by default derived from what the job asks for (never
from what it found: a new QEMU, libvirt, kernel, machine type, image build or fio is the same job
on another build, which is what the nightly comparison is for):

    <hypervisor>_<hosts>_<controllers>[_inject_<faults>]_<disk>_<image name>

- the hypervisor (``libvirt``, ``vsphere``);
- the host names: libvirt's hosts as the run names them (``local`` for this machine's daemon, a
  remote URI's host, an inventory's ``name``), sorted; vSphere: the vCenter's host name;
- the controllers, as a set (sorted: ``virtio-scsi,virtio-blk`` is ``virtio-blk,virtio-scsi``);
- the faults of ``--inject`` as a set, left out when there are none;
- the disk backing and latency: ``lat5ms`` (``--disk-backing latency --disk-latency-ms 5``), ``file``;
  with disk settings asked (``--disk``, ``--profile``), ``_set_`` and :data:`SETTINGS_HASH_CHARS` hex
  digits of their SHA-256 after it (``lat5ms_set_1a2b3c4d``): another set-up of the disk is another job;
- the image's *name*: ``embedded`` for the embedded guest (its recipe hash is left out), the file
  name of ``--image`` without its last suffix, the vSphere template's name; never the image's hash
  (:func:`image_part`: a name the reduction below would lose information of carries a short hash of
  the name itself, so two images whose names reduce to the same text are two series).

Each part is lower-cased and every run of other characters becomes one ``_``, e.g.
``libvirt_local_virtio_blk_virtio_scsi_lat5ms_embedded``. A derived name longer than
:data:`MAX_SERIES_CHARS` keeps its first :data:`SHORTENED_KEEP_CHARS` characters and a hash of the
whole (``_`` and :data:`SHORTENED_HASH_CHARS` hex digits of its SHA-256), so it stays unique.

A name (given or derived) is letters, digits and underscores, starting with a letter, at most
:data:`MAX_SERIES_CHARS` characters: the characters a file name and an unquoted SQL identifier both
hold (no quoting, escaping or case folding question can arise where it goes).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath

#: The default name's parts, as the docs and ``--help`` show them.
SERIES_FORMAT = "<hypervisor>_<hosts>_<controllers>[_inject_<faults>]_<disk>[_set_<hash>]_<image name>"
#: Hex digits of the disk settings' hash in a default name: 8 tell 4 billion set-ups apart.
SETTINGS_HASH_CHARS = 8
#: The suite property (JUnit) that holds a run's series.
SERIES_KEY = "series"
#: The longest name. A file name holds 255 bytes (ext4, XFS); 120 leaves room for what a tool adds
#: around it (``trend-<series>-20261123.html``) and holds the derived name of a two-host pool with
#: three controllers, a fault and a long image name (about 100 characters).
MAX_SERIES_CHARS = 120
#: A derived name longer than that: this many characters of it, ``_``, then a hash of the whole;
#: 8 hex digits (32 bits) tell apart the few dozen series a store holds with no collision to fear.
SHORTENED_HASH_CHARS = 8
SHORTENED_KEEP_CHARS = MAX_SERIES_CHARS - 1 - SHORTENED_HASH_CHARS
#: What a name may hold (letters, digits, underscores; a letter first).
SERIES_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
#: The options' defaults a run stored before series were recorded did not write (its
#: ``options`` JSON may lack them): ``--disk-backing latency --disk-latency-ms 5``.
DEFAULT_DISK_BACKING = "latency"
DEFAULT_DISK_LATENCY_MS = 5.0
#: The image name of the embedded guest, and of a vSphere template whose name is not known.
EMBEDDED_IMAGE = "embedded"
UNKNOWN_TEMPLATE = "template"
#: The host name of a vCenter whose name is not known (a run stored before series were recorded).
UNKNOWN_VCENTER = "vcenter"
#: The host name of this machine's libvirt daemon (hypervisors/libvirt/inventory.py default_name).
LOCAL_HOST = "local"
#: What a run stored before series were recorded said of where it ran, by its backend: the host its
#: series names when it stored none, and its image name when that is a template's (None: the run's
#: image file or the embedded guest, from its options or fingerprint). Such runs came from these two
#: backends only (a backend added since records its series); any other name reads as libvirt's.
UNRECORDED_TARGET: dict[str, tuple[str, str | None]] = {"libvirt": (LOCAL_HOST, None),
                                                        "vsphere": (UNKNOWN_VCENTER, UNKNOWN_TEMPLATE)}
#: An image name the reduction to a name part keeps whole: lower-case ASCII letters and digits in runs
#: joined by single hyphens (``debian-12-genericcloud-amd64``, ``rhel9``), so its part (hyphens made
#: ``_``) names it alone. Any other name (capitals, dots, underscores, non-ASCII letters) would share
#: its reduced text with another name, so its part carries a hash of the name (:func:`image_part`).
PLAIN_IMAGE_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
#: The hex digits of the name's SHA-256 an image part carries when the name is not plain: 32 bits,
#: for the few dozen image names a store holds.
IMAGE_HASH_CHARS = 8
#: The readable part of an image name with no ASCII letter or digit at all (``日本語``).
NO_READABLE_PART = "image"


def series_problem(name: str) -> str | None:
    """Why ``name`` cannot name a series (None: it can), one sentence."""
    if not SERIES_NAME.fullmatch(name):
        bad = sorted({c for c in name if not (c.isascii() and (c.isalnum() or c == "_"))})
        what = (f"it holds {', '.join(repr(c) for c in bad)}" if bad else
                "it is empty" if not name else "it does not start with a letter")
        return (f"{what}; a series name is letters, digits and underscores, starting with a letter, at most "
                f"{MAX_SERIES_CHARS} characters (what a file name and an SQL identifier both hold), e.g. qemu_nightly")
    if len(name) > MAX_SERIES_CHARS:
        return f"it is {len(name)} characters long; a series name is at most {MAX_SERIES_CHARS}, e.g. qemu_nightly"
    return None


@dataclass(frozen=True)
class SeriesInputs:
    """What a job asks for that names its default series."""

    hypervisor: str
    hosts: tuple[str, ...]
    controllers: tuple[str, ...]
    faults: tuple[str, ...]
    disk_backing: str
    disk_latency_ms: float
    #: :func:`image_name` (libvirt) or :func:`image_part` of the template's name (vSphere)
    image_name: str
    #: each controller's disk settings asked, as JSON (``{"virtio-scsi": {"cache": "none"}}``); "" for none
    disk_settings: str = ""


def _part(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def _set(values: Iterable[str]) -> str:
    return "_".join(p for p in sorted({_part(v) for v in values if v.strip()}) if p)


def default_series(i: SeriesInputs) -> str:
    """The series name derived from ``i`` (the module's docstring)."""
    disk = "file" if i.disk_backing == "file" else f"lat{i.disk_latency_ms:g}ms".replace(".", "p")
    if i.disk_settings:
        disk += f"_set_{hashlib.sha256(i.disk_settings.encode()).hexdigest()[:SETTINGS_HASH_CHARS]}"
    faults = _set(i.faults)
    parts = [_part(i.hypervisor) or "hypervisor", _set(i.hosts) or LOCAL_HOST, _set(i.controllers) or "none",
             *([f"inject_{faults}"] if faults else []), _part(disk), _part(i.image_name) or EMBEDDED_IMAGE]
    name = "_".join(parts)
    if not name[0].isalpha():
        name = f"s_{name}"
    if len(name) <= MAX_SERIES_CHARS:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:SHORTENED_HASH_CHARS]
    return f"{name[:SHORTENED_KEEP_CHARS].rstrip('_')}_{digest}"


def image_part(name: str) -> str:
    """The series part of a user image or template named ``name``: the name reduced like every part
    when that loses nothing (:data:`PLAIN_IMAGE_NAME`), else the reduced text (``image`` when nothing
    is left) and ``_`` plus :data:`IMAGE_HASH_CHARS` hex digits of the name's SHA-256, so names that
    reduce to the same text, or to the embedded guest's ``embedded``, name different series:
    ``debian-12`` -> ``debian_12``; ``Debian_12`` -> ``debian_12_<hash>``; ``日本語`` -> ``image_<hash>``."""
    reduced = _part(name)
    if PLAIN_IMAGE_NAME.fullmatch(name) and reduced != EMBEDDED_IMAGE:
        return reduced
    return f"{reduced or NO_READABLE_PART}_{hashlib.sha256(name.encode()).hexdigest()[:IMAGE_HASH_CHARS]}"


def image_name(image: str | None) -> str:
    """The name of a run's image as the series knows it: ``embedded`` (None, or the embedded guest's
    ``embedded:<recipe>``), else :func:`image_part` of the file name without its last suffix (no
    directory; the same file rebuilt, or converted to another format, is the same job)."""
    if not image or image.startswith(f"{EMBEDDED_IMAGE}:") or image == EMBEDDED_IMAGE:
        return EMBEDDED_IMAGE
    return image_part(PurePosixPath(image).stem)


def _listed(value: str | None) -> tuple[str, ...]:
    """A stored option's list: comma-separated (a suite property), or a JSON list (the options JSON)."""
    if not value or value == "none":
        return ()
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        parsed = None
    if isinstance(parsed, list):
        return tuple(str(v) for v in parsed)
    return tuple(v.strip() for v in value.split(",") if v.strip() and v.strip() != "none")


def stored_inputs(options: Mapping[str, str], fingerprint: Mapping[str, str]) -> SeriesInputs:
    """The series inputs of a run stored before series were recorded, from its stored options (the
    run's hypervisor, controllers and inject properties and its ``options`` JSON, each value a
    string) and its fingerprint. What such a run did not record takes the option's default: the
    latency disk of 5 ms; the host ``local`` (a pool's host names are its fingerprint's
    ``<host>:`` prefixes); the embedded guest, unless the fingerprint's ``image`` names a file."""
    hypervisor = options.get("hypervisor") or "libvirt"
    unknown_host, template = UNRECORDED_TARGET.get(hypervisor, UNRECORDED_TARGET["libvirt"])
    hosts = _listed(options.get("hosts"))
    if not hosts:
        hosts = tuple(sorted({k.partition(":")[0] for k in fingerprint if ":" in k}))
    if not hosts:
        hosts = (unknown_host,)
    try:
        latency = float(options.get("disk_latency_ms") or DEFAULT_DISK_LATENCY_MS)
    except ValueError:
        latency = DEFAULT_DISK_LATENCY_MS
    image = options.get("image")
    if image in (None, "", "null"):
        image = fingerprint.get("image")
    # a file's path, or embedded:<recipe>; "unknown (...)" where the guest said nothing
    name = template or image_name(image if image and ("/" in image or image.startswith(EMBEDDED_IMAGE)) else None)
    return SeriesInputs(hypervisor, hosts, _listed(options.get("controllers")), _listed(options.get("inject")),
                        options.get("disk_backing") or DEFAULT_DISK_BACKING, latency, name)


def stored_series(options: Mapping[str, str], fingerprint: Mapping[str, str], given: str | None = None) -> str:
    """A run's series: ``given`` (what it recorded), else the default derived from what it stored."""
    if given and series_problem(given) is None:
        return given
    return default_series(stored_inputs(options, fingerprint))
