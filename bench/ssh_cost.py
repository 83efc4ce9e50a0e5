"""What one guest command costs over the suite's SSH transport, and where that time goes.

Boots the project's cloud-init test image (``bench.testimage``; systemd, a non-root login with
passwordless ``sudo``) through the suite's own path, then times, interleaved ``--repeats`` times:

- ``open``: a session channel opened and closed (the SSH round trip a command starts with);
- ``exec true``: ``true`` as the login user, on its own channel (no sudo);
- ``exec sudo -n true`` and ``exec sudo -n sh -c true`` (the second is what each command was);
- ``run true``: the transport's ``run("true")``, whatever way it runs a command as root;

then, inside the guest (one command, no SSH in the figure), 20 of each: ``sh -c true``,
``sudo -n true``, ``sudo -n sh -c true``: what sudo itself costs, apart from the round trip. It
prints the medians and ranges in milliseconds, the host's load average before and after, and the
guest's sudo and PAM set-up (what a sudo runs through).

With ``--embedded`` it boots the embedded guest instead (root login, no sudo; the sudo lines are
left out) and adds ``framed in one sh``: ``true`` sent framed to one ``sh`` on one channel, as the
root shell of a non-root login runs it (transport/root_shell.py): what one such shell would save there.

    python -m bench.ssh_cost [--repeats 20] [--controller virtio-scsi] [--embedded]
"""

from __future__ import annotations

import argparse
import logging
import os
import select
import statistics
import time
from collections.abc import Callable

import paramiko

from bench.booted import booted_guest
from bench.testimage import ensure_test_image
from hypervisors.base import ImageRequest
from images.user import inspect_image
from model.types import DiskSpec
from transport.root_shell import Frame
from transport.ssh import SshTransport

#: Inside the guest: N of a command, timed with the guest's own clock (/proc/uptime, in 10 ms), in µs each.
IN_GUEST = ('n=20; read -r a _ </proc/uptime; i=0; while [ $i -lt $n ]; do {cmd} >/dev/null 2>&1; i=$((i + 1)); done; '
            'read -r b _ </proc/uptime; echo $(( (${{b%.*}}${{b#*.}} - ${{a%.*}}${{a#*.}}) * 10000 / n ))')
#: What the guest's sudo goes through.
SETUP = ("cat /etc/pam.d/sudo | grep -v '^#' | grep .; echo ---; grep -rh '^[^#]' /etc/pam.d/common-session-noninteractive; "
         "echo ---; systemctl is-enabled systemd-logind 2>&1; sudo -V | head -1")


def _exec(ssh: SshTransport, command: str) -> Callable[[], None]:
    def once() -> None:
        transport = ssh._client.get_transport()
        assert transport is not None
        channel = transport.open_session()
        channel.exec_command(command)
        status = channel.recv_exit_status()
        channel.close()
        assert status == 0, f"{command}: exit {status}"
    return once


def _open(ssh: SshTransport) -> None:
    transport = ssh._client.get_transport()
    assert transport is not None
    transport.open_session().close()


def _framed_in(shell: paramiko.Channel) -> Callable[[], None]:
    def once() -> None:
        frame = Frame("true")
        shell.sendall(frame.script())
        out, err = b"", b""
        while frame.read(out, err) is None:
            if shell.recv_ready():
                out += shell.recv(65536)
            elif shell.recv_stderr_ready():
                err += shell.recv_stderr(65536)
            else:
                select.select([shell], [], [], 1.0)
    return once


def _run_true(ssh: SshTransport) -> None:
    ssh.run("true")


def _line(name: str, ms: list[float]) -> str:
    return (f"{name:<28} median {statistics.median(ms):7.1f} ms  ({min(ms):.1f}-{max(ms):.1f}, "
            f"{len(ms)} runs)")


def measure(ssh: SshTransport, repeats: int) -> list[str]:
    """The figures as printed lines."""
    probes: dict[str, Callable[[], None]] = {"open": lambda: _open(ssh), "exec true": _exec(ssh, "true")}
    root = ssh.endpoint.user == "root"
    if root:
        transport = ssh._client.get_transport()
        assert transport is not None
        shell = transport.open_session()
        shell.exec_command("sh")
        probes["framed in one sh"] = _framed_in(shell)
    else:
        probes["exec sudo -n true"] = _exec(ssh, "sudo -n true")
        probes["exec sudo -n sh -c true"] = _exec(ssh, "sudo -n sh -c true")
    probes["run true"] = lambda: _run_true(ssh)
    times: dict[str, list[float]] = {name: [] for name in probes}
    for _ in range(repeats):
        for name, probe in probes.items():
            t0 = time.perf_counter()
            probe()
            times[name].append((time.perf_counter() - t0) * 1000)
    lines = [_line(name, ms) for name, ms in times.items()]
    for cmd in ("sh -c true",) if root else ("sh -c true", "sudo -n true", "sudo -n sh -c true"):
        each = ssh.run(IN_GUEST.format(cmd=cmd)).stdout.strip()
        lines.append(f"in the guest: {cmd:<19} {int(each) / 1000:7.1f} ms each (20 in a loop)")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.ssh_cost", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--controller", default="virtio-scsi")
    ap.add_argument("--embedded", action="store_true", help="the embedded guest (root login) instead of the test image")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("paramiko").setLevel(logging.WARNING)
    image = None if args.embedded else ImageRequest(inspect_image(ensure_test_image(logging.getLogger("bench").info).path),
                                                    "bios")
    try:
        with booted_guest(f"vioconform-sshcost-{os.getpid()}", DiskSpec(args.controller, 0),
                          512 if image is None else 1024, 900.0, image) as (guest, ssh, _):
            print(f"booted in {guest.boot_seconds:.1f} s ({guest.accel}); load average {os.getloadavg()}")
            if image is not None:
                print(ssh.run(SETUP, check=False).stdout.rstrip())
            for line in measure(ssh, args.repeats):
                print(line)
            print(f"load average after: {os.getloadavg()}")
    except paramiko.SSHException as e:
        print(f"bench.ssh_cost: error: {e}")
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
