"""What was tested, as the guest reports it: its OS release, its kernel, each disk's driver chain
and driver versions, and the block-layer settings the image chose at boot.

Pure parsing of the text the guest's facts tool (guest/tools/facts.py) prints, so it is tested
on recorded output. The tool prints sections, each starting with a marker line
``@@ <section> [argument]``; a section's lines are the raw text of what it read.

Kernels and images differ in what they have, and a missing file is a fact, not an error:

- ``/etc/os-release`` (systemd's format, also in ``/usr/lib/os-release``): every systemd
  distribution has one; the embedded busybox guest has none, and says so through
  ``/etc/vioconform-image`` (written by images/build.py);
- a driver's version: ``/sys/module/<m>/version`` (the module's ``MODULE_VERSION``), or what
  ``modinfo -F version`` says (kmod, or busybox's modinfo), else the module's ``srcversion``
  (a checksum of its source: loadable modules only), else "built-in" when
  ``modules.builtin`` lists it: a driver built into the kernel has the kernel's version;
- a block-layer setting: ``device/queue_depth`` exists only on SCSI disks, ``queue/write_cache``
  from Linux 4.7; a setting the kernel does not show is None.

Example::

    system = parse_system_facts(text)       # system.os_release: "Debian GNU/Linux 12 (bookworm)"
    disk = parse_disk_facts(text)           # disk.boot.scheduler: "mq-deadline"
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from model.errors import ParseError

#: What the facts say of an OS without /etc/os-release that is the suite's own embedded guest.
EMBEDDED_OS = "vioconform embedded guest (busybox initramfs, Debian kernel)"

#: The block-layer settings read when a disk is first found (before any fault or --guest-setup),
#: as (key in the report, file under /sys/block/<disk>/).
BOOT_SETTINGS: tuple[tuple[str, str], ...] = (
    ("scheduler", "queue/scheduler"),
    ("nr_requests", "queue/nr_requests"),
    ("read_ahead_kb", "queue/read_ahead_kb"),
    ("queue_depth", "device/queue_depth"),
    ("max_sectors_kb", "queue/max_sectors_kb"),
    ("write_cache", "queue/write_cache"),
    ("nomerges", "queue/nomerges"),
    ("rq_affinity", "queue/rq_affinity"),
)


def sections(text: str, source: str) -> list[tuple[str, str, list[str]]]:
    """The ``@@ name arg`` sections of ``text``, in order: (name, arg, lines)."""
    out: list[tuple[str, str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("@@ "):
            name, _, arg = line[3:].strip().partition(" ")
            out.append((name, arg.strip(), []))
        elif out:
            out[-1][2].append(line)
        elif line.strip():
            raise ParseError(f"{source}: text before the first section marker: {line.strip()!r}")
    if not out:
        raise ParseError(f"{source}: no sections (empty output?)")
    return out


def parse_os_release(text: str) -> dict[str, str]:
    """``KEY=value`` lines of os-release(5), values unquoted as a shell would."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, raw = line.strip().partition("=")
        if not sep or not re.fullmatch(r"[A-Z][A-Z0-9_]*", key):
            continue
        try:
            words = shlex.split(raw)
        except ValueError:
            words = [raw.strip("\"'")]
        values[key] = " ".join(words)
    return values


@dataclass(frozen=True)
class SystemFacts:
    """The guest as a whole: its OS and kernel."""

    os_release: str  # PRETTY_NAME, or a description where the guest has no os-release
    os_id: str  # ID ("debian", "rhel"), "embedded" or "unknown"
    os_version_id: str  # VERSION_ID ("12", "9.4"), or "" where it has none
    kernel: str  # uname -r
    #: the embedded guest's image recipe hash (``/etc/vioconform-image``), "" for any other image
    embedded_recipe: str = ""

    def properties(self) -> dict[str, str]:
        return {"guest.os_release": self.os_release, "guest.os_id": self.os_id,
                "guest.os_version_id": self.os_version_id or "none", "guest.kernel": self.kernel}


def parse_system_facts(text: str, source: str = "guest facts") -> SystemFacts:
    found = {name: lines for name, _, lines in sections(text, source)}
    kernel = next((line.strip() for line in found.get("uname", []) if line.strip()), "")
    if not kernel:
        raise ParseError(f"{source}: no kernel release (uname -r printed nothing)")
    image = parse_os_release("\n".join(found.get("vioconform-image", [])))
    osr = parse_os_release("\n".join(found.get("os-release", [])))
    recipe = image.get("RECIPE", "")
    if osr:
        name = osr.get("PRETTY_NAME") or " ".join(filter(None, (osr.get("NAME"), osr.get("VERSION")))) or "unknown"
        return SystemFacts(name, osr.get("ID", "unknown"), osr.get("VERSION_ID", ""), kernel, recipe)
    if recipe:
        return SystemFacts(EMBEDDED_OS, "embedded", "", kernel, recipe)
    return SystemFacts("unknown (the guest has no /etc/os-release)", "unknown", "", kernel)


@dataclass(frozen=True)
class ModuleFacts:
    """One kernel module the disk's drivers come from, and what the guest says of its version."""

    name: str
    version: str = ""  # /sys/module/<m>/version, else modinfo's "version:"
    srcversion: str = ""  # /sys/module/<m>/srcversion, else modinfo's: a checksum of the module's source
    builtin: bool = False  # listed in modules.builtin, or modinfo says "filename: (builtin)"
    intree: bool | None = None  # modinfo's "intree: Y"; None where modinfo said nothing
    filename: str = ""  # modinfo's "filename:"

    def describe(self, kernel: str) -> str:
        """The module's version as one string, precise enough to tell two builds apart: its own
        version with its srcversion ("3.04.20 srcversion 016480FA..."), else the kernel it came
        with ("in-tree 6.1.0-28-amd64", "built-in 6.1.0-28-amd64"): an in-tree module without a
        version of its own is the kernel's."""
        if self.version:
            return f"{self.version} srcversion {self.srcversion}" if self.srcversion else self.version
        if self.srcversion:
            return f"srcversion {self.srcversion}"
        if self.builtin:
            return f"built-in {kernel}"
        if self.intree is False:
            return f"out-of-tree, unversioned ({self.filename or 'no file'}) on {kernel}"
        if self.intree:
            return f"in-tree {kernel}"
        return f"unversioned, kernel {kernel}"  # no modinfo in the guest to say more


def parse_modinfo(lines: list[str]) -> dict[str, str]:
    """``modinfo``'s ``key: value`` lines (kmod and busybox alike); the first value of each key."""
    out: dict[str, str] = {}
    for line in lines:
        key, sep, value = line.partition(":")
        if sep and re.fullmatch(r"[a-z_][a-z0-9_.]*", key.strip()):
            out.setdefault(key.strip(), value.strip())
    return out


@dataclass(frozen=True)
class BoundDriver:
    """A driver bound along the disk's sysfs path: ``sd`` from module ``sd_mod``, ``virtio-pci`` from
    ``virtio_pci``. ``module`` is "" for a driver without a module link (built in without a name)."""

    driver: str
    module: str


@dataclass(frozen=True)
class DiskFacts:
    """One disk as the guest found it: its kernel name, the drivers along its path (the disk's own
    first: ``sd``, ``virtio_scsi``, ``virtio-pci``), their modules, and its boot-time settings."""

    name: str
    drivers: tuple[BoundDriver, ...]
    modules: dict[str, ModuleFacts]
    #: BOOT_SETTINGS' keys to the value read; None where the kernel shows no such file
    boot: dict[str, str | None] = field(default_factory=dict)

    def controller_driver(self, expected: str = "") -> BoundDriver | None:
        """The driver of the disk's controller: ``expected`` if bound along the path, else the first
        that is not a generic disk driver (sd, the PCI transport of virtio)."""
        for d in self.drivers:
            if expected and expected in (d.driver, d.module):
                return d
        generic = {"sd", "sd_mod", "virtio-pci", "virtio_pci", "pcieport"}
        return next((d for d in self.drivers if d.driver not in generic and d.module not in generic),
                    self.drivers[0] if self.drivers else None)

    def version_of(self, d: BoundDriver, kernel: str) -> str:
        m = self.modules.get(d.module or d.driver)
        return m.describe(kernel) if m else f"unknown ({kernel})"


def scheduler_in_use(text: str) -> str:
    """The scheduler of ``queue/scheduler``: the bracketed one of "mq-deadline kyber [bfq] none";
    "none" for a queue without a choice (a file reading just "none")."""
    m = re.search(r"\[([^\]]+)\]", text)
    if m:
        return m.group(1)
    words = text.split()
    return words[0] if len(words) == 1 else text.strip() or "none"


def parse_disk_facts(text: str, source: str = "guest disk facts") -> DiskFacts:
    name = ""
    drivers: list[BoundDriver] = []
    modules: dict[str, ModuleFacts] = {}
    boot: dict[str, str | None] = {key: None for key, _ in BOOT_SETTINGS}
    files = {path: key for key, path in BOOT_SETTINGS}
    sysfs: dict[str, dict[str, str]] = {}
    modinfo: dict[str, dict[str, str]] = {}
    for section, arg, lines in sections(text, source):
        if section == "disk":
            name = arg
            for line in lines:
                path, sep, value = line.partition("=")
                if sep and path in files:
                    value = value.strip()
                    boot[files[path]] = scheduler_in_use(value) if path == "queue/scheduler" else value
        elif section == "drivers":
            for line in lines:
                words = line.split()
                if words:
                    drivers.append(BoundDriver(words[0], words[1] if len(words) > 1 else ""))
        elif section == "module":
            sysfs[arg] = dict(line.partition("=")[::2] for line in lines if "=" in line)
        elif section == "modinfo":
            modinfo[arg] = parse_modinfo(lines)
    for m in dict.fromkeys([*sysfs, *modinfo]):
        own, info = sysfs.get(m, {}), modinfo.get(m, {})
        intree = info.get("intree")
        modules[m] = ModuleFacts(
            m, own.get("version", "").strip() or info.get("version", ""),
            own.get("srcversion", "").strip() or info.get("srcversion", ""),
            own.get("builtin", "0").strip() == "1" or info.get("filename") == "(builtin)",
            None if intree is None else intree.upper() == "Y", info.get("filename", ""))
    if not name:
        raise ParseError(f"{source}: no disk section")
    return DiskFacts(name, tuple(drivers), modules, boot)


def image_properties(image: str, fmt: str, sha256: str = "", virtual_size_bytes: int | None = None) -> dict[str, str]:
    """The report's properties of the image the guest booted: ``image`` (the user's file, or
    ``embedded:<recipe hash>`` for the suite's own guest), ``image.format``, ``image.sha256``,
    ``image.virtual_size_bytes`` ("none" where there is no such thing)."""
    return {"image": image, "image.format": fmt, "image.sha256": sha256 or "none",
            "image.virtual_size_bytes": "none" if virtual_size_bytes is None else str(virtual_size_bytes)}


def disk_properties(controller: str, role: str, facts: DiskFacts, kernel: str,
                    expected_driver: str = "") -> dict[str, str]:
    """The report's properties of one disk, every key present whatever the guest showed, so two
    runs line up key for key. The controller's driver (the same for both of its disks):
    ``disk.<controller>.driver``, ``.driver_module``, ``.driver_version``, ``.driver_chain``. The
    disk under test's kernel name and boot settings: ``disk.<controller>.kernel_name``,
    ``disk.<controller>.boot.<setting>``; the scratch disk's under ``disk.<controller>.scratch.``.
    A setting the kernel does not show is "none"."""
    base = f"disk.{controller}"
    own = base if role == "dut" else f"{base}.{role}"
    ctl = facts.controller_driver(expected_driver)
    props = {
        f"{base}.driver": ctl.driver if ctl else "unknown",
        f"{base}.driver_module": (ctl.module or "none") if ctl else "unknown",
        f"{base}.driver_version": facts.version_of(ctl, kernel) if ctl else "unknown",
        f"{base}.driver_chain": ", ".join(f"{d.driver} ({facts.version_of(d, kernel)})" for d in facts.drivers)
        or "none",
        f"{own}.kernel_name": facts.name,
    }
    for key, _ in BOOT_SETTINGS:
        value = facts.boot.get(key)
        props[f"{own}.boot.{key}"] = "none" if value is None else value
    return props


def missing_driver_properties(controller: str, module: str) -> dict[str, str]:
    """The properties of a controller whose driver the guest's kernel lacks: the same keys as
    ``disk_properties``' for the disk under test, ``driver`` "missing: <module>", the rest "none"."""
    base = f"disk.{controller}"
    props = {f"{base}.driver": f"missing: {module}", f"{base}.driver_module": "none",
             f"{base}.driver_version": "none", f"{base}.driver_chain": "none", f"{base}.kernel_name": "none"}
    props.update({f"{base}.boot.{key}": "none" for key, _ in BOOT_SETTINGS})
    return props


@dataclass(frozen=True)
class DriverPresence:
    """Whether the guest's kernel has a driver module: loaded, built in, or a file under
    ``/lib/modules/<kernel>``; ``known`` False where the guest cannot tell (no modules directory)."""

    module: str
    kernel: str
    loaded: bool
    builtin: bool
    files: tuple[str, ...]
    modules_dir: bool
    builtin_list: bool

    @property
    def present(self) -> bool:
        return self.loaded or self.builtin or bool(self.files)

    @property
    def known(self) -> bool:
        """Whether absence can be trusted: the modules directory and its modules.builtin exist."""
        return self.present or (self.modules_dir and self.builtin_list)


def parse_driver_presence(text: str, module: str, source: str = "driver lookup") -> DriverPresence:
    """The guest's answer to guest/tools/facts.py's ``DRIVER_SCRIPT``: ``key=value`` lines."""
    values: dict[str, list[str]] = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep:
            values.setdefault(key, []).append(value.strip())
    kernel = (values.get("kernel") or [""])[0]
    if not kernel:
        raise ParseError(f"{source}: no kernel release in {text.strip()!r}")

    def flag(key: str) -> bool:
        return (values.get(key) or ["0"])[0] == "1"

    return DriverPresence(module, kernel, flag("loaded"), flag("builtin"),
                          tuple(v for v in values.get("file", []) if v), flag("modules_dir"), flag("builtin_list"))
