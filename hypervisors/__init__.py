"""Hypervisor backends: one package per hypervisor, imported only when chosen.

``get_backend("libvirt")`` imports ``hypervisors.libvirt`` on first use, so a machine
without pyVmomi can still run the libvirt backend, and the error for a missing SDK
names the package to install.
"""

from __future__ import annotations

import importlib
from typing import Any

#: backend name -> (module:class, what to install when the import fails)
BACKENDS: dict[str, tuple[str, str]] = {
    "libvirt": ("hypervisors.libvirt.backend:LibvirtBackend", "pip install libvirt-python (needs libvirt-dev, pkg-config)"),
    "vsphere": ("hypervisors.vsphere.backend:VSphereBackend", "pip install pyvmomi"),
}


class BackendUnavailable(RuntimeError):
    """The chosen backend cannot be imported; the message says what to install."""


def get_backend_class(name: str) -> Any:
    try:
        target, hint = BACKENDS[name]
    except KeyError:
        raise BackendUnavailable(f"unknown hypervisor backend {name!r}; choose one of {', '.join(BACKENDS)}") from None
    module_name, _, cls = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise BackendUnavailable(f"backend {name!r} needs a missing module ({e.name}): {hint}") from e
    return getattr(module, cls)
