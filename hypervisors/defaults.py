"""What the suite's options need to know of a backend before, and without, its SDK: its default
controllers and steady-state window, and how its configurations are named. Each backend declares one
:class:`BackendDefaults` in its own ``defaults.py`` (which imports no SDK, so ``--help`` and the
option checks never need libvirt-python or pyVmomi); ``hypervisors.backend_defaults(name)`` reads it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BackendDefaults:
    """A backend's defaults and naming, as the options, the test ids and the run header use them."""

    #: the backend's name, as ``--hypervisor`` takes it and a test id starts with it
    name: str
    #: its name in prose (``--help``, the docs): "libvirt", "vSphere"
    title: str
    #: the controllers it tests without ``--controllers``
    controllers: tuple[str, ...]
    #: the steady-state window without ``--window-s``, in seconds, and why (for ``--help``; "" when the
    #: derivation is in its module only)
    window_s: float
    window_note: str
    #: whether its guests run on the libvirt hosts of ``--libvirt-uri`` / ``--hosts`` (one backend per
    #: host; a pool of several runs every rule on each and names the host in the test id); otherwise on
    #: the target of ``--vcenter``
    host_pool: bool
    #: whether its disk under test is one the suite makes (``--disk-backing``, ``--disk-latency-ms``),
    #: so the test id names it (``latency5ms``, ``file``); vSphere's are thin VMDKs on the datastore
    names_disk: bool
    #: the run header's "where" for the names of its hosts (``{hosts}``, comma-separated)
    where: str
    #: whether it boots the suite's embedded guest or a file of ``--image`` (and so takes
    #: ``--guest-kernel``/``--guest-kernel-deb``); otherwise a template of its own is the guest
    boots_images: bool
    #: the run property that says which build of the hypervisor ran, "unknown (...)" when it could not be read
    version_property: str
    #: the run's ``image`` property for a guest booted from neither ``--image`` nor the embedded guest
    other_image: str
