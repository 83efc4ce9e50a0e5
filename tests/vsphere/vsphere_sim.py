"""Runs the project's extended vcsim (tools/vcsim) for the tests and talks to it from the test side.

The simulator is a real vCenter API server (govmomi's), started on a random loopback port with
a login user and password, a JSON file feeding its virtualDisk counters and a file its
VscsiStats service answers FetchAllHistograms with.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import selectors
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from pyVim.connect import Disconnect, SmartConnect
from pyVmomi import vim

from guest.cache import cache_dir
from hypervisors.vsphere.backend import VSphereBackend
from hypervisors.vsphere.config import VSphereConfig
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

    def authorized_keys(self) -> list[str]:
        """The run keys the backend put into VMs' ``guestinfo.vioconform.authorized_key``."""
        with self.session() as content:
            view = content.viewManager.CreateContainerView(content.rootFolder, [vim.VirtualMachine], True)
            return [o.value for vm in view.view if vm.config is not None for o in vm.config.extraConfig
                    if o.key == "guestinfo.vioconform.authorized_key"]

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
                           f"(is the binary older than tools/vcsim? run scripts/setup-vcsim.sh)")
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


def sim_config(sim: Sim, sshd: LoopbackSshd, **overrides: object) -> VSphereConfig:
    """A config for the simulator whose guests answer SSH on ``sshd``."""
    values: dict[str, object] = {
        "host": "127.0.0.1", "port": sim.port, "user": "vioconform@vsphere.local", "template": TEMPLATE,
        "datastore": DATASTORE, "cluster": CLUSTER, "insecure": True, "guest_host_key": sshd.host_key_line,
        "guest_ssh_port": sshd.port, "simulate_guest_ip": "127.0.0.1", "ip_timeout_s": 5.0, "connect_timeout_s": 10.0,
        "task_timeout_s": 30.0}
    values.update(overrides)
    return VSphereConfig(password=Secret(sim.password), **values)  # type: ignore[arg-type]


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
