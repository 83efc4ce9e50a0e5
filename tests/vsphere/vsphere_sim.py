"""Runs the project's extended vcsim (tests/vsphere/vcsim) for the tests and talks to it from the test side.

The simulator is a real vCenter API server (govmomi's), started on a random loopback port with
a login user and password, a JSON file feeding its virtualDisk counters and a file its
VscsiStats service answers FetchAllHistograms with.

vcsim runs no guest OS: ``SimGuestSshd`` plays the guest of the clone that booted last. When the
backend (``SimBackend``) has powered a clone on, the "guest" reads the clone's guestinfo as the
template would: cloud-init's VMware datasource (``guestinfo.userdata``: the login user, its
key and the host key) or the rpctool boot script (``guestinfo.vioconform.authorized_key`` for
root, the template's own host key).
"""

from __future__ import annotations

import base64
import json
import os
import re
import secrets
import selectors
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from pyVim.connect import Disconnect, SmartConnect
from pyVmomi import vim

from hypervisors.base import Guest
from hypervisors.cleanup import CleanupStack
from hypervisors.vsphere.backend import KEY_PROPERTY, VSphereBackend
from hypervisors.vsphere.config import VSphereConfig
from images.cache import cache_dir
from model.secret import Secret
from tests.vsphere.vsphere_sshd import LoopbackSshd

SIM_USER = "vioconform@vsphere.local"
#: The simulator's model has this VM; the session fixture turns it into the template.
TEMPLATE = "DC0_C0_RP0_VM0"
DATASTORE = "LocalDS_0"
CLUSTER = "DC0_C0"
#: Seconds per generated realtime sample (ESXi: 20); short so the tests need not wait long.
SAMPLE_S = 1


DATA = Path(__file__).resolve().parents[1] / "data" / "vsphere"
SAMPLE_VM = "vioc-sample"  # the VM name in the recorded-format files
FAKE_VSCSISTATS = r"""#!/bin/sh
# Plays ESXi's vscsiStats from files next to its bin/ directory; logs each call.
d=$(cd "$(dirname "$0")/.." && pwd)
echo "vscsiStats $*" >> "$d/calls.log"
case "$1" in
  -l) cat "$d/list.txt" ;;
  -s|-x|-r) echo "Success." ;;
  -p) h=$(echo "$*" | sed -n 's/.*-i \([0-9]*\).*/\1/p')  # each handle has its own snapshot counter
      n=$(cat "$d/n$h" 2>/dev/null || echo 0); n=$((n + 1)); echo $n > "$d/n$h"; cat "$d/snap$n.csv" ;;
  *) echo "vscsiStats: bad option $1" >&2; exit 1 ;;
esac
"""


FAKE_SUDO = r"""#!/bin/sh
# Plays sudo for a user cloud-init made a passwordless sudoer (NOPASSWD). Like the real one for such
# a user without a terminal, it runs the command only with -n; the command runs as the SSH server's user.
n=
while [ $# -gt 0 ]; do
  case "$1" in
    --) shift; break ;;
    -u|-g|-p|-C|-D|-h|-r|-t|-U) shift 2 ;;
    -*n*) n=1; shift ;;
    -*) shift ;;
    *) break ;;
  esac
done
[ -n "$n" ] || { echo "sudo: a terminal is required to read the password" >&2; exit 1; }
exec "$@"
"""


def bin_dir() -> Path:
    return Path(os.environ.get("VIOCONFORM_BIN_DIR") or cache_dir() / "bin")


@dataclass
class Sim:
    """A running simulator: where it listens, how to log in, and the files that drive it."""

    port: int
    password: str = field(repr=False)
    perf_path: Path
    vscsi_xml_path: Path
    process: subprocess.Popen[bytes]
    stderr: IO[bytes]

    @contextmanager
    def session(self) -> Iterator[Any]:
        si = SmartConnect(host="127.0.0.1", port=self.port, user=SIM_USER, pwd=self.password,
                          disableSslCertValidation=True)
        try:
            yield si.RetrieveContent()
        finally:
            Disconnect(si)
            si._stub.DropConnections()  # Disconnect leaves the pooled TLS sockets open

    def vms(self, prefix: str = "") -> list[str]:
        with self.session() as content:
            view = content.viewManager.CreateContainerView(content.rootFolder, [vim.VirtualMachine], True)
            return sorted(vm.name for vm in view.view if vm.name.startswith(prefix))

    def guestinfo(self, vm_name: str) -> dict[str, str]:
        """The ``guestinfo.*`` keys of the VM's extraConfig, as vCenter stores them."""
        with self.session() as content:
            view = content.viewManager.CreateContainerView(content.rootFolder, [vim.VirtualMachine], True)
            vm = next(v for v in view.view if v.name == vm_name)
            return {o.key: str(o.value) for o in vm.config.extraConfig if o.key.startswith("guestinfo.")}

    def set_perf(self, data: dict[str, Any]) -> None:
        tmp = self.perf_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        tmp.replace(self.perf_path)  # the simulator re-reads the file on every query: replace it atomically


def _first_line(proc: subprocess.Popen[bytes], timeout_s: float) -> str:
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    if not sel.select(timeout_s):
        raise RuntimeError(f"vioconform-vcsim printed nothing within {timeout_s:.0f} s")
    return proc.stdout.readline().decode()


def start_sim(directory: Path) -> Sim:
    exe = bin_dir() / "vioconform-vcsim"
    if not exe.exists():
        raise FileNotFoundError(f"{exe} is missing: run scripts/setup-vcsim.sh")
    password = secrets.token_hex(12)
    perf, xml = directory / "perf.json", directory / "vscsistats.xml"
    perf.write_text("{}")
    xml.write_text("<vscsiStats></vscsiStats>")
    # The simulator outlives this function: its stderr file stays open with it (the child holds its own copy).
    stderr = open(directory / "vcsim.stderr", "wb")  # noqa: SIM115
    proc = subprocess.Popen([str(exe), "-l", "127.0.0.1:0", "-username", SIM_USER, "-perf-source", str(perf),
                             "-vscsistats-xml", str(xml), "-realtime-interval", str(SAMPLE_S)],
                            stdout=subprocess.PIPE, stderr=stderr,
                            env=dict(os.environ, VIOCONFORM_VCSIM_PASSWORD=password))
    line = _first_line(proc, 30)
    m = re.search(r"export GOVC_URL=https://[^@]+@127\.0\.0\.1:(\d+)/sdk", line)
    if m is None:
        proc.kill()
        err = (directory / "vcsim.stderr").read_text(errors="replace")[-1500:]
        raise RuntimeError(f"unexpected first line from vioconform-vcsim: {line!r}; stderr: {err} "
                           f"(is the binary older than tests/vsphere/vcsim? run scripts/setup-vcsim.sh)")
    sim = Sim(int(m.group(1)), password, perf, xml, proc, stderr)
    _make_template(sim)
    return sim


def _make_template(sim: Sim) -> None:
    with sim.session() as content:
        view = content.viewManager.CreateContainerView(content.rootFolder, [vim.VirtualMachine], True)
        vm = next(v for v in view.view if v.name == TEMPLATE)
        task = vm.PowerOffVM_Task()
        while task.info.state in ("queued", "running"):
            time.sleep(0.05)
        vm.MarkAsTemplate()


def stop_sim(sim: Sim) -> None:
    sim.process.terminate()
    try:
        sim.process.wait(10)
    except subprocess.TimeoutExpired:
        sim.process.kill()
        sim.process.wait()
    assert sim.process.stdout is not None
    sim.process.stdout.close()
    sim.stderr.close()


def sim_config(sim: Sim, sshd: LoopbackSshd, guest_prep: str = "cloud-init", **overrides: object) -> VSphereConfig:
    """A config for the simulator whose guests answer SSH on ``sshd``; with ``rpctool`` the pinned
    host key is ``sshd``'s own (the template's, which clones keep)."""
    values: dict[str, object] = {
        "host": "127.0.0.1", "port": sim.port, "user": "vioconform@vsphere.local", "template": TEMPLATE,
        "datastore": DATASTORE, "cluster": CLUSTER, "insecure": True, "guest_prep": guest_prep,
        "guest_ssh_port": sshd.port, "simulate_guest_ip": "127.0.0.1", "ip_timeout_s": 5.0, "connect_timeout_s": 10.0,
        "task_timeout_s": 30.0}
    if guest_prep == "rpctool":
        values["guest_host_key"] = sshd.host_key_line
    values.update(overrides)
    return VSphereConfig(password=Secret(sim.password), **values)  # type: ignore[arg-type]


def decoded(info: Mapping[str, str], name: str) -> str:
    """The text of ``guestinfo.<name>``, decoded as its ``.encoding`` key says (cloud-init's rule)."""
    value, encoding = info[f"guestinfo.{name}"], info.get(f"guestinfo.{name}.encoding", "")
    assert encoding == "base64", f"guestinfo.{name}.encoding is {encoding!r}"
    return base64.b64decode(value, validate=True).decode()


def cloud_init_documents(info: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(user-data, meta-data) as cloud-init's VMware datasource reads them from guestinfo, or None.

    Both are JSON, which YAML reads the same; the user-data's first line is ``#cloud-config``."""
    if "guestinfo.userdata" not in info:
        return None
    header, _, body = decoded(info, "userdata").partition("\n")
    assert header == "#cloud-config", header
    return json.loads(body), json.loads(decoded(info, "metadata"))


class SimGuestSshd(LoopbackSshd):
    """The guest OS of the clone that booted last: ``boot`` applies that clone's guestinfo."""

    def __init__(self, directory: Path) -> None:
        sudo = directory / "sudo-bin"
        sudo.mkdir()
        (sudo / "sudo").write_text(FAKE_SUDO)
        (sudo / "sudo").chmod(0o755)
        self.users: dict[str, set[str]] = {}
        super().__init__(directory, lambda user: self.users.get(user, set()), path_prepend=[sudo])

    def boot(self, extra_config: Mapping[str, str], has_cloud_init: bool = True) -> None:
        """What the template makes of the guestinfo at boot: cloud-init installs the user, its key and
        the host key; without cloud-init (or with the rpctool script) root trusts the rpctool key and
        the template's own host key stays."""
        documents = cloud_init_documents(extra_config) if has_cloud_init else None
        if documents is not None:
            user_data, _ = documents
            self.use_host_key(user_data["ssh_keys"]["ed25519_private"])
            self.users = {user_data["user"]["name"]: {k.split()[1] for k in user_data["ssh_authorized_keys"]}}
        else:
            self.use_host_key(None)
            self.users = {"root": {extra_config[KEY_PROPERTY]}} if KEY_PROPERTY in extra_config else {}


class SimBackend(VSphereBackend):
    """The backend as the tests run it: once a clone is powered on and has an IP, its guest "boots"
    (``SimGuestSshd.boot``) before the backend's first SSH connection."""

    def __init__(self, cleanup: CleanupStack, config: VSphereConfig, guest: SimGuestSshd, run_id: str | None = None,
                 has_cloud_init: bool = True) -> None:
        super().__init__(cleanup, config, run_id)
        self.guest = guest
        self.has_cloud_init = has_cloud_init

    def wait_for_ssh(self, guest: Guest, timeout_s: float) -> None:
        config = self.vm_of(guest).config
        assert config is not None
        self.guest.boot({o.key: str(o.value) for o in config.extraConfig}, self.has_cloud_init)
        super().wait_for_ssh(guest, timeout_s)


def fake_esxi_dir(root: Path, vm_name: str, with_vscsistats: bool = True) -> Path:
    (root / "bin").mkdir(parents=True)
    if with_vscsistats:
        script = root / "bin" / "vscsiStats"
        script.write_text(FAKE_VSCSISTATS)
        script.chmod(0o755)
    (root / "list.txt").write_text((DATA / "vscsistats-l.txt").read_text().replace(SAMPLE_VM, vm_name))
    for n in (1, 2):
        shutil.copy(DATA / f"vscsistats-p-all-c-{n}.csv", root / f"snap{n}.csv")
    return root


#: make_esxi(with_vscsistats) -> (server, its state directory)
EsxiFactory = Callable[[bool], tuple[LoopbackSshd, Path]]


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port: int = s.getsockname()[1]
    s.close()
    return port


def write_target(path: Path, backend: VSphereBackend, **extra: object) -> Path:
    """A TOML config file for the simulator, as a user would write one (no password in it)."""
    cfg = backend.config
    lines = ["[vsphere]", f'host = "{cfg.host}"', f"port = {cfg.port}", f'user = "{cfg.user}"',
             f'template = "{cfg.template}"', "insecure = true", "connect_timeout_s = 10"]
    lines += [f"{k} = {v!r}".replace("'", '"') for k, v in extra.items()]
    path.write_text("\n".join(lines) + "\n")
    return path
