"""The libvirt backend (backend.py) and what it needs: the connection's checks (host_checks.py), the
remote host's SSH (hostlink.py), the domain XML and the QEMU it runs."""

from __future__ import annotations

import os

#: The libvirt URI when none is given: the local system daemon (as root, qemu:///session is the same daemon).
FALLBACK_URI = "qemu:///system"


def default_uri() -> str:
    """``$LIBVIRT_DEFAULT_URI`` (libvirt's own variable, as ``virsh`` reads it), else ``qemu:///system``."""
    return os.environ.get("LIBVIRT_DEFAULT_URI", "").strip() or FALLBACK_URI
