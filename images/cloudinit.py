"""cloud-init data for a guest booted from a user's image: who logs in, with which key, and
which SSH host key the guest presents, chosen by the suite before the guest exists.

The same two documents go to the guest two ways:

- libvirt: a NoCloud seed, an ISO 9660 volume labelled ``cidata`` holding ``user-data`` and
  ``meta-data`` (``images.seed``);
- vSphere: cloud-init's VMware datasource, the documents base64-encoded in the clone's
  extraConfig (``guestinfo.userdata``, ``guestinfo.metadata`` and their ``.encoding`` keys).

The host key is pinned from the first connection: cloud-init's ``ssh_keys`` installs the
ed25519 key the suite generated (cloud-init 22.4's cc_ssh generates no key of its own when ``ssh_keys`` gives
some, and ``ssh_deletekeys`` removes the image's), so the key
the suite expects is known before the guest boots. No trust-on-first-use, no console scraping.

The user is cloud-init's default user, renamed (``user: {name: vioconform}``): cloud-init
merges that with the distribution's default-user settings, and the suite adds passwordless
sudo. The suite runs its commands through ``sudo -n``.

Both documents are JSON, which is YAML too: no YAML library is needed and quoting is exact.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

#: The login the seed creates (cloud-init's default user under the suite's name).
DEFAULT_GUEST_USER = "vioconform"
#: The hostname the guest takes (``local-hostname`` in meta-data).
GUEST_HOSTNAME = "vioconform-guest"


@dataclass(frozen=True)
class HostKey:
    """An ed25519 SSH host key made for one guest: the private half goes into the guest,
    the public line (``ssh-ed25519 AAAA...``) is what the suite accepts from it."""

    private_openssh: str
    public_line: str


def generate_host_key() -> HostKey:
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return HostKey(private, public.decode().strip())


def user_data(user: str, authorized_key_b64: str, host_key: HostKey) -> str:
    """The ``#cloud-config`` document: the login ``user`` with the run's key and passwordless
    sudo, the suite's host key and no other, no passwords, no package changes."""
    config = {
        "user": {"name": user, "sudo": "ALL=(ALL) NOPASSWD:ALL", "lock_passwd": True},
        "ssh_authorized_keys": [f"ssh-ed25519 {authorized_key_b64} vioconform-run"],
        "ssh_pwauth": False,
        "disable_root": True,
        "ssh_deletekeys": True,
        "ssh_keys": {"ed25519_private": host_key.private_openssh, "ed25519_public": host_key.public_line},
        "package_update": False,
        "package_upgrade": False,
    }
    return "#cloud-config\n" + json.dumps(config, indent=2) + "\n"


def meta_data(instance_id: str, hostname: str = GUEST_HOSTNAME, redact: Sequence[str] = ()) -> str:
    """The ``meta-data`` document. A new ``instance_id`` per guest makes cloud-init run its
    per-instance modules even on an image that booted before.

    ``redact`` (VMware datasource only) names guestinfo keys cloud-init clears inside the guest
    once it has read them (``["userdata"]``: processes in the guest can no longer read the
    host's private key with ``vmware-rpctool``); other datasources ignore the key."""
    doc: dict[str, object] = {"instance-id": instance_id, "local-hostname": hostname}
    if redact:
        doc["redact"] = list(redact)
    return json.dumps(doc, indent=2) + "\n"


def vmware_guestinfo(user_data_text: str, meta_data_text: str) -> dict[str, str]:
    """The extraConfig keys cloud-init's VMware datasource reads, base64-encoded."""
    def b64(text: str) -> str:
        return base64.b64encode(text.encode()).decode()
    return {
        "guestinfo.metadata": b64(meta_data_text),
        "guestinfo.metadata.encoding": "base64",
        "guestinfo.userdata": b64(user_data_text),
        "guestinfo.userdata.encoding": "base64",
    }
