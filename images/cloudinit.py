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

#: The modules of cloud-init's init stage that the suite's documents need: the hostname in
#: /etc/hosts (sudo resolves it at every start), the user with its sudo rule, and the SSH keys. The
#: user-data's lists replace the image's own (cloud-init merges user-data over its system
#: configuration), so the image's other modules do not run: growpart and resizefs (nothing to grow
#: on an overlay of the image's own size), disk_setup and mounts (which would look at the disks under
#: test), ca_certs, rsyslog, bootcmd, write_files. This stage comes before sshd in the boot.
INIT_MODULES = ("set_hostname", "update_hostname", "update_etc_hosts", "users_groups", "ssh")
#: The config stage runs none (set_passwords among them, which restarts sshd beside the suite's first
#: commands), the final stage only final_message: its "Cloud-init ... finished" line on the console
#: is how the boot wait knows the boot ended on an image with no login prompt there (hypervisors/bootwait.py).
CONFIG_MODULES: tuple[str, ...] = ()
FINAL_MODULES = ("final_message",)

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
    sudo (its password locked: no password to log in with), the suite's host key and no other, no
    package changes, and only the modules those need (``INIT_MODULES``)."""
    config = {
        "user": {"name": user, "sudo": "ALL=(ALL) NOPASSWD:ALL", "lock_passwd": True},
        "ssh_authorized_keys": [f"ssh-ed25519 {authorized_key_b64} vioconform-run"],
        "disable_root": True,
        "ssh_deletekeys": True,
        "ssh_keys": {"ed25519_private": host_key.private_openssh, "ed25519_public": host_key.public_line},
        "package_update": False,
        "package_upgrade": False,
        "cloud_init_modules": list(INIT_MODULES),
        "cloud_config_modules": list(CONFIG_MODULES),
        "cloud_final_modules": list(FINAL_MODULES),
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
