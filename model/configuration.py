"""One configuration under test: the backend, the host of a pool, the controller and the disk under
test, and the disk's non-default settings. ``str(config)`` is the test id, and
``Configuration.parse(test_id)`` reads one back::

    libvirt:virtio-scsi:latency5ms           the libvirt backend, virtio-scsi, a 5 ms latency disk
    libvirt:virtio-blk:file                  a sparse file as the disk under test
    vsphere:pvscsi                           vSphere: the disk is a VMDK on the datastore, not named
    kvm7-libvirt:virtio-scsi:latency5ms      one host of a pool (``--hosts``): its name first
    libvirt:virtio-scsi:latency5ms:cache=none,iothreads=2
                                             non-default disk settings, sorted by key, after the disk

Read from the right: the settings (a part holding ``=``), the disk (``latency<ms>ms`` or ``file``),
the controller, then ``[<host>-]<backend>``; a host name may hold ``-``, ``.`` and ``:`` (a URI's
``host:port``), a backend name none of them, so the id is never ambiguous. The latency is written with
Python's ``g`` format (6 significant digits), as the ids have always been.

``to_dict``/``from_dict`` give and read its JSON form (what a reproducer bundle writes out and its replay
reads back). Pure: no hypervisor, SSH or pytest import.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from model.types import DiskSpec

#: A backend's name: a lower-case word (no ``-``: a host's name is cut from it at the last ``-``).
BACKEND_NAME = re.compile(r"[a-z][a-z0-9_]*")
#: A controller's name (``virtio-scsi``, ``lsilogic-sas``, ``mptsas1068``).
CONTROLLER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
#: A pool host's name, as fixtures' host inventory allows it (letters, digits, ``-_.:``).
HOST_NAME = re.compile(r"[A-Za-z0-9_.:-]+")
#: A disk setting's key and value: nothing that separates the id's parts (``:``, ``,``, ``=``, space).
SETTING_KEY = re.compile(r"[a-z][a-z0-9_]*")
SETTING_VALUE = re.compile(r"[A-Za-z0-9_.+/-]+")
#: The disk part of an id: a latency disk of some milliseconds, or a file.
DISK_PART = re.compile(r"latency(?P<ms>[0-9.e+-]+)ms|file")
BACKINGS = ("latency", "file")

#: An example for error messages.
EXAMPLE = "libvirt:virtio-scsi:latency5ms"


class ConfigurationError(ValueError):
    """A test id or a configuration's JSON that is not one; the message names what is wrong."""


@dataclass(frozen=True)
class Configuration:
    """One configuration under test; ``str()`` is its test id (see the module docstring)."""

    #: the backend's name (``libvirt``, ``vsphere``)
    backend: str
    controller: str
    #: the host of a pool of libvirt hosts (None: one host, not named in the id)
    host: str | None = None
    #: the disk under test's backing, ``latency`` or ``file``; None where the backend's disk is not the
    #: suite's to name (vSphere's VMDKs)
    backing: str | None = None
    #: the latency disk's service time in ms (None for a file or an unnamed disk)
    latency_ms: float | None = None
    #: the disk's non-default settings, as sorted (key, value) pairs; () for the defaults
    disk_settings: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        problem = self._problem()
        if problem:
            raise ConfigurationError(f"not a configuration: {problem}")

    def _problem(self) -> str:
        if not BACKEND_NAME.fullmatch(self.backend):
            return f"backend {self.backend!r} is not a lower-case word (libvirt, vsphere)"
        if not CONTROLLER_NAME.fullmatch(self.controller):
            return f"controller {self.controller!r} is not a controller's name (virtio-scsi, pvscsi)"
        if self.host is not None and not HOST_NAME.fullmatch(self.host):
            return f"host {self.host!r}: letters, digits, '-', '_', '.' and ':' only"
        if self.backing is not None and self.backing not in BACKINGS:
            return f"disk backing {self.backing!r} is not one of {', '.join(BACKINGS)}"
        if (self.backing == "latency") != (self.latency_ms is not None):
            return "a latency (and only a latency) disk has a latency_ms"
        if self.latency_ms is not None and not self.latency_ms > 0:
            return f"latency_ms {self.latency_ms!r} is not above 0"
        for key, value in self.disk_settings:
            if not SETTING_KEY.fullmatch(key) or not SETTING_VALUE.fullmatch(value):
                return (f"disk setting {key}={value}: a key of lower-case letters, digits and '_', a value without "
                        "':', ',', '=' or spaces")
        keys = [k for k, _ in self.disk_settings]
        if keys != sorted(set(keys)):
            return f"disk settings {', '.join(keys)} are not sorted by key, each once"
        return ""

    @classmethod
    def of_disk(cls, backend: str, spec: DiskSpec | None, controller: str | None = None, host: str | None = None,
                disk_settings: tuple[tuple[str, str], ...] = ()) -> Configuration:
        """The configuration of a disk under test (``spec``: None where the backend does not name its disk,
        then ``controller`` names the controller)."""
        if spec is None:
            if controller is None:
                raise ConfigurationError("not a configuration: neither a disk nor a controller")
            return cls(backend, controller, host, disk_settings=disk_settings)
        latency = spec.latency_ms if spec.backing == "latency" else None
        return cls(backend, spec.controller, host, spec.backing, latency, disk_settings)

    @property
    def disk_label(self) -> str:
        """The id's part after the backend: ``virtio-scsi:latency5ms``, ``pvscsi`` (as ``DiskSpec.label``)."""
        if self.backing is None:
            return self.controller
        disk = f"latency{self.latency_ms:g}ms" if self.backing == "latency" else "file"
        return f"{self.controller}:{disk}"

    def __str__(self) -> str:
        head = f"{self.host}-{self.backend}" if self.host is not None else self.backend
        tail = f":{','.join(f'{k}={v}' for k, v in self.disk_settings)}" if self.disk_settings else ""
        return f"{head}:{self.disk_label}{tail}"

    @classmethod
    def parse(cls, test_id: str) -> Configuration:
        """The configuration a test id names; ConfigurationError saying what is wrong otherwise."""
        def bad(why: str) -> ConfigurationError:
            return ConfigurationError(f"{test_id!r} is not a test id ({why}); one looks like {EXAMPLE}, "
                                      "vsphere:pvscsi or kvm7-libvirt:virtio-scsi:latency5ms")
        parts = test_id.split(":")
        settings: tuple[tuple[str, str], ...] = ()
        if "=" in parts[-1]:
            pairs = [p.partition("=") for p in parts.pop().split(",")]
            if any(not k or not sep or not v for k, sep, v in pairs):
                raise bad("its settings are key=value pairs separated by ','")
            settings = tuple((k, v) for k, _, v in pairs)
        backing, latency = None, None
        disk = DISK_PART.fullmatch(parts[-1]) if len(parts) >= 3 else None
        if disk is not None:
            parts.pop()
            backing = "latency" if disk.group("ms") is not None else "file"
            try:
                latency = float(disk.group("ms")) if backing == "latency" else None
            except ValueError:
                raise bad(f"{disk.group(0)!r} holds no number of milliseconds") from None
        if len(parts) < 2 or not parts[-1]:
            raise bad("no controller after the backend")
        controller = parts.pop()
        rest = ":".join(parts)
        host, dash, backend = rest.rpartition("-")
        if dash and not host:
            raise bad("an empty host name before the '-'")
        if not backend or ":" in backend:
            raise bad(f"{rest!r} before the controller {controller!r} is not [<host>-]<backend>")
        try:
            return cls(backend, controller, host or None, backing, latency, settings)
        except ConfigurationError as e:
            raise bad(str(e).removeprefix("not a configuration: ")) from None

    def to_dict(self) -> dict[str, object]:
        """Its JSON form: every field, ``disk_settings`` as a list of [key, value] pairs."""
        return {"backend": self.backend, "host": self.host, "controller": self.controller, "backing": self.backing,
                "latency_ms": self.latency_ms, "disk_settings": [[k, v] for k, v in self.disk_settings]}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Configuration:
        """The configuration of :meth:`to_dict`'s form; ConfigurationError naming the field otherwise."""
        def text(key: str, optional: bool = False) -> str | None:
            value = data.get(key)
            if value is None and optional:
                return None
            if not isinstance(value, str):
                raise ConfigurationError(f"a configuration's {key!r} must be text, not {value!r}")
            return value

        unknown = sorted(set(data) - {"backend", "host", "controller", "backing", "latency_ms", "disk_settings"})
        if unknown:
            raise ConfigurationError(f"a configuration has no field {', '.join(map(repr, unknown))}")
        latency = data.get("latency_ms")
        if latency is not None and (isinstance(latency, bool) or not isinstance(latency, (int, float))):
            raise ConfigurationError(f"a configuration's 'latency_ms' must be a number, not {latency!r}")
        raw = data.get("disk_settings", [])
        if not isinstance(raw, list) or not all(
                isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in raw):
            raise ConfigurationError(f"a configuration's 'disk_settings' must be a list of [key, value] texts, "
                                     f"not {raw!r}")
        backend, controller = text("backend"), text("controller")
        assert backend is not None and controller is not None
        return cls(backend, controller, text("host", True), text("backing", True),
                   float(latency) if latency is not None else None, tuple((k, v) for k, v in raw))
