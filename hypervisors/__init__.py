"""Hypervisor backends: one package per hypervisor, imported only when chosen.

``get_backend("libvirt")`` imports ``hypervisors.libvirt`` on first use, so a machine
without pyVmomi can still run the libvirt backend, and the error for a missing SDK
names the package to install.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

from hypervisors.defaults import BackendDefaults
from hypervisors.libvirt.defaults import DEFAULTS as LIBVIRT_DEFAULTS
from hypervisors.vsphere.defaults import DEFAULTS as VSPHERE_DEFAULTS
from model.types import DiskSpec

#: backend name -> (module:class, module:controller table, what to install when the import fails,
#: module:function saying why its disks cannot carry their --disk settings, "" when they can).
#: The controller tables import no connection SDK (libvirt's is pure; vSphere's needs pyvmomi's
#: pure-Python type library), so options are checked before, and without, the backend's SDK.
BACKENDS: dict[str, tuple[str, str, str, str]] = {
    "libvirt": ("hypervisors.libvirt.backend:LibvirtBackend", "hypervisors.libvirt.controllers:CONTROLLERS",
                "pip install libvirt-python (needs libvirt-dev, pkg-config)",
                "hypervisors.libvirt.controllers:disk_settings_refusal"),
    "vsphere": ("hypervisors.vsphere.backend:VSphereBackend", "hypervisors.vsphere.controllers:CONTROLLERS",
                "pip install pyvmomi", "hypervisors.vsphere.disk_settings:disks_refusal"),
}
#: Each backend's defaults and naming (its ``defaults.py``, which imports no SDK), in BACKENDS' order.
DEFAULTS: dict[str, BackendDefaults] = {d.name: d for d in (LIBVIRT_DEFAULTS, VSPHERE_DEFAULTS)}


class BackendUnavailable(RuntimeError):
    """The chosen backend cannot be imported; the message says what to install."""


def _load(name: str, which: int) -> Any:
    try:
        entry = BACKENDS[name]
    except KeyError:
        raise BackendUnavailable(f"unknown hypervisor backend {name!r}; choose one of {', '.join(BACKENDS)}") from None
    module_name, _, attr = entry[which].partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise BackendUnavailable(f"backend {name!r} needs a missing module ({e.name}): {entry[2]}") from e
    return getattr(module, attr)


def get_backend_class(name: str) -> Any:
    """The backend's class; imports its SDK."""
    return _load(name, 0)


def controller_names(name: str) -> tuple[str, ...]:
    """The controllers a backend offers, without importing its connection SDK."""
    return tuple(_load(name, 1))


def guest_driver(name: str, controller: str) -> str:
    """The Linux module that drives ``controller`` in the guest ("mptsas", "virtio_scsi"), or ""
    where the backend's table does not say (an unknown backend or controller)."""
    try:
        table = _load(name, 1)
    except BackendUnavailable:
        return ""
    return str(getattr(table.get(controller), "guest_driver", "") or "")


def backend_defaults(name: str) -> BackendDefaults:
    """The backend's defaults and naming (hypervisors/defaults.py), without importing its SDK."""
    try:
        return DEFAULTS[name]
    except KeyError:
        raise BackendUnavailable(f"unknown hypervisor backend {name!r}; choose one of {', '.join(BACKENDS)}") from None


def disk_settings_refusal(name: str, disks: Sequence[DiskSpec]) -> str:
    """Why backend ``name`` cannot carry ``disks``' ``--disk`` settings, or "" (without its SDK)."""
    return str(_load(name, 3)(disks))
