"""Waiting for a user's image to answer SSH: each cause of a boot that will not succeed is named as
soon as it shows (hypervisors.bootwait.BootJudge, fed observations here), and the SSH probe tells
the stages apart against a real SSH server on 127.0.0.1."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import paramiko
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from hypervisors.base import kernel_panic
from hypervisors.bootwait import (
    BOOTED_READ_BYTES,
    MISMATCH_GRACE_S,
    NOT_BOOTED_S,
    SSHD_GRACE_S,
    Access,
    BootFailed,
    BootJudge,
    Observation,
    cloud_init_lines,
    last_line,
)
from hypervisors.libvirt.imageboot import wait_for_ssh
from model.errors import HypervisorError
from model.types import SshEndpoint
from tests.vsphere.vsphere_sshd import LoopbackSshd
from transport.probe import ProbeResult, Stage, probe

SEEDED = Access("vioconform", seeded=True, key_name="the run's key")
LOGIN = Access("qa", seeded=False, key_name="--guest-key /keys/qa")
BOOTING = ProbeResult(Stage.NO_BANNER, "Error reading SSH protocol banner")
MIB = 1024**2
CONSOLE = ("SeaBIOS (version 1.16.2)\r\nBooting from Hard Disk...\r\n\x1b[0m[    3.1] Linux version 6.1.0-28-cloud-amd64\n"
           "[   20.5] cloud-init[250]: Cloud-init v. 22.4.2 running 'init-local' at Mon, 23 Nov 2026 18:00:00 +0000.\n"
           "[\x1b[0;32m  OK  \x1b[0m] Started ssh.service - OpenBSD Secure Shell server.\n")


def judge(access: Access = SEEDED, timeout_s: float = 300.0, firmware: str = "bios") -> BootJudge:
    return BootJudge("vioconform-1", 2222, timeout_s, access, "ssh-ed25519 AAAApinned", firmware)


def feed(j: BootJudge, seconds: float, probe_result: ProbeResult, console: str = CONSOLE,
         read: int | None = 50 * MIB, start: float = 0.0) -> None:
    """One observation a second from ``start`` for ``seconds``; the judge must keep waiting."""
    t = start
    while t <= start + seconds:
        assert j.judge(Observation(t, probe_result, console, read)) is False
        t += 1.0


def test_ready_ends_the_wait() -> None:
    j = judge()
    feed(j, 40, BOOTING)
    assert j.judge(Observation(41, ProbeResult(Stage.READY, banner="SSH-2.0-OpenSSH_9.2p1"), CONSOLE, 80 * MIB))


def test_another_host_key_fails_after_the_grace_with_the_cloud_init_hint() -> None:
    j = judge()
    other = ProbeResult(Stage.HOST_KEY_MISMATCH, "ssh-ed25519 AAAAimagesown", "SSH-2.0-OpenSSH_9.2p1")
    feed(j, 30, BOOTING)
    feed(j, MISMATCH_GRACE_S - 1, other, start=31)
    with pytest.raises(BootFailed) as e:
        j.judge(Observation(31 + MISMATCH_GRACE_S, other, CONSOLE, 60 * MIB))
    said = str(e.value).splitlines()[0]
    assert said.startswith("guest vioconform-1 presents the SSH host key ssh-ed25519 AAAAimagesown, not the one the "
                           "suite's cloud-init seed gave it: cloud-init did not apply the suite's seed")
    assert "give --guest-user, --guest-key and --guest-host-key" in said
    assert "--- cloud-init on the console ---" in str(e.value) and "running 'init-local'" in str(e.value)


def test_a_mismatch_that_clears_is_forgiven() -> None:
    """sshd may answer a moment before cloud-init wrote the seed's key: a short mismatch is no failure."""
    j = judge()
    feed(j, MISMATCH_GRACE_S - 2, ProbeResult(Stage.HOST_KEY_MISMATCH, "ssh-ed25519 AAAAold"))
    feed(j, 5, BOOTING, start=MISMATCH_GRACE_S)
    feed(j, MISMATCH_GRACE_S - 2, ProbeResult(Stage.HOST_KEY_MISMATCH, "ssh-ed25519 AAAAold"), start=20)


def test_a_refused_key_names_the_user_and_the_remedy() -> None:
    refused = ProbeResult(Stage.AUTH_REFUSED, "Authentication failed.", "SSH-2.0-OpenSSH_9.2p1")
    for access, expected in ((SEEDED, ("refused the run's key for user vioconform (Authentication failed.): "
                                      "cloud-init did not apply the suite's seed")),
                             (LOGIN, ("refused --guest-key /keys/qa for user qa (Authentication failed.): its public "
                                     "key must be in ~qa/.ssh/authorized_keys in the image"))):
        j = judge(access)
        feed(j, MISMATCH_GRACE_S - 1, refused)
        with pytest.raises(BootFailed, match=expected.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
            j.judge(Observation(MISMATCH_GRACE_S, refused, CONSOLE, 60 * MIB))


def test_an_image_without_a_bootloader_fails_once_the_boot_disk_stays_unread() -> None:
    j = judge()
    feed(j, NOT_BOOTED_S - 1, BOOTING, console="SeaBIOS\nBooting from Hard Disk...\n", read=512)
    with pytest.raises(BootFailed) as e:
        j.judge(Observation(NOT_BOOTED_S, BOOTING, "SeaBIOS\nBooting from Hard Disk...\n", 512))
    assert str(e.value).startswith("guest vioconform-1 did not boot: 30 s after the start its firmware had read "
                                   "512 bytes of the boot disk and nothing more: does the image have a bootloader "
                                   "for BIOS (--firmware bios), or does it need --firmware uefi?")
    assert "Booting from Hard Disk..." in str(e.value)
    # a guest that read its kernel is booting, however slowly
    feed(judge(), 100, BOOTING, read=BOOTED_READ_BYTES)
    # a firmware that has read nothing yet is still starting (OVMF on a loaded host)
    feed(judge(), 100, BOOTING, read=0)


def test_a_firmware_that_starts_reading_late_is_judged_from_when_its_read_stops() -> None:
    """OVMF on a loaded host read nothing for 35 s, then its first 12 KiB: it is still starting, not
    stuck. Only a read that stays where it is for NOT_BOOTED_S is a disk it cannot boot."""
    late, started = judge(firmware="uefi"), NOT_BOOTED_S + 5
    feed(late, started, BOOTING, console="", read=0)
    feed(late, NOT_BOOTED_S - 1, BOOTING, console="", read=12 * 1024, start=started + 1)
    with pytest.raises(BootFailed, match="did not boot: 66 s after the start its firmware had read 12 KiB of the "
                                         "boot disk and nothing more: does the image have a bootloader for UEFI"):
        late.judge(Observation(started + 1 + NOT_BOOTED_S, BOOTING, "", 12 * 1024))
    # one that goes on reading is booting, however slowly
    going = judge(firmware="uefi")
    feed(going, started, BOOTING, console="", read=0)
    for step in range(60):
        assert going.judge(Observation(started + 1 + step, BOOTING, "", 12 * 1024 + step * 4096)) is False


def test_firmware_that_gave_up_fails_at_once() -> None:
    for console in ("SeaBIOS\nBoot failed: not a bootable disk\n\nNo bootable device.\n",
                    'BdsDxe: starting Boot0003 "EFI Internal Shell" from Fv(7CB8BDC9)\nShell> '):
        with pytest.raises(BootFailed, match="its firmware found nothing to boot"):
            judge().judge(Observation(4, BOOTING, console, 2048))


def test_a_booted_guest_without_sshd_fails_after_the_grace() -> None:
    booted = CONSOLE + "\nDebian GNU/Linux 12 vioconform-guest ttyS0\n\nvioconform-guest login: "
    j = judge()
    feed(j, 50, BOOTING)
    feed(j, SSHD_GRACE_S - 1, BOOTING, console=booted, start=51)
    with pytest.raises(BootFailed) as e:
        j.judge(Observation(51 + SSHD_GRACE_S, BOOTING, booted, 90 * MIB))
    said = str(e.value).splitlines()[0]
    assert said.startswith("guest vioconform-1 booted (its console: 'vioconform-guest login:') but nothing answered "
                           "SSH on its port 22 for 20 s since: does the image have an SSH server (openssh-server)")


def test_an_ssh_server_that_failed_to_start_is_named_at_once() -> None:
    """As the test image without its seed shows it (no host keys): systemd's FAILED line on the console."""
    console = CONSOLE + ("         Starting \x1b[0;1;39mssh.service\x1b[0m - OpenBSD Secure Shell server...\n"
                         "[\x1b[0;1;31mFAILED\x1b[0m] Failed to start \x1b[0;1;39mssh.servic…\x1b[0m - OpenBSD Secure "
                         "Shell server.\nSee 'systemctl status ssh.service' for details.\n")
    with pytest.raises(BootFailed) as e:
        judge(LOGIN).judge(Observation(40, BOOTING, console, 60 * MIB))
    assert str(e.value).startswith("guest vioconform-1's SSH server failed to start (its console: '[FAILED] Failed to "
                                   "start ssh.servic… - OpenBSD Secure Shell server.'): see the console below")


def test_the_timeout_says_whether_sshd_ever_answered() -> None:
    j = judge(timeout_s=60)
    feed(j, 59, BOOTING)
    with pytest.raises(BootFailed) as e:
        j.judge(Observation(60, BOOTING, CONSOLE, 90 * MIB, host_load=9.5))
    said = str(e.value).splitlines()[0]
    assert said == ("guest vioconform-1 did not answer SSH within 60 s: sshd never answered on port 22, and the guest "
                    "was still booting (its console's last line: '[  OK  ] Started ssh.service - OpenBSD Secure Shell "
                    "server.'): under TCG a systemd guest takes 40-75 s on an idle host and much longer on a busy "
                    "one; this host's load average is 9.5 (raise --boot-timeout if the host is slow)")
    j = judge(timeout_s=60)
    feed(j, 59, BOOTING, console="")
    with pytest.raises(BootFailed) as e:
        j.judge(Observation(60, BOOTING, "", 90 * MIB))
    assert str(e.value).splitlines()[0] == (
        "guest vioconform-1 did not answer SSH within 60 s: sshd never answered on port 22: does the image have an "
        "SSH server, and does its network come up on the virtio-net NIC by DHCP? (raise --boot-timeout if the host "
        "is slow)")
    j = judge()
    broken = ProbeResult(Stage.SSH_ERROR, "Incompatible ssh peer (no acceptable kex algorithm)", "SSH-2.0-Ancient_1.0")
    feed(j, MISMATCH_GRACE_S - 1, broken)
    with pytest.raises(BootFailed, match=r"guest vioconform-1's SSH server \(SSH-2.0-Ancient_1.0\) answers, but the "
                                         r"SSH handshake fails: Incompatible ssh peer"):
        j.judge(Observation(MISMATCH_GRACE_S, broken, CONSOLE, 90 * MIB))
    j = judge(timeout_s=60)
    feed(j, 5, ProbeResult(Stage.SSH_ERROR, "kex failed", "SSH-2.0-OpenSSH_9.2p1"))
    feed(j, 53, BOOTING, start=6)
    with pytest.raises(BootFailed, match="its SSH server answered, but the last attempt ended with"):
        j.judge(Observation(60, BOOTING, CONSOLE, 90 * MIB))


def test_progress_and_console_lines() -> None:
    j = judge()
    j.judge(Observation(20.2, BOOTING, CONSOLE, 35 * MIB))
    assert j.progress() == ("vioconform-1: waiting for SSH, 20 of 300 s (connection closed or silent before an SSH "
                            "banner); boot disk read 35 MiB; console: [  OK  ] Started ssh.service - OpenBSD Secure "
                            "Shell server.")
    assert last_line("") == "(nothing yet)"
    assert cloud_init_lines(CONSOLE) == [("[   20.5] cloud-init[250]: Cloud-init v. 22.4.2 running 'init-local' at "
                                         "Mon, 23 Nov 2026 18:00:00 +0000.")]


# --- the probe against a real SSH server ------------------------------------------------------
def ed25519(path: Path) -> paramiko.Ed25519Key:
    path.write_bytes(Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()))
    return paramiko.Ed25519Key.from_private_key_file(str(path))


@pytest.fixture
def sshd(tmp_path: Path) -> Iterator[tuple[LoopbackSshd, paramiko.Ed25519Key]]:
    client = ed25519(tmp_path / "client")
    server = LoopbackSshd(tmp_path, lambda _user: [client.get_base64()])
    yield server, client
    server.stop()


def test_probe_tells_the_stages_apart(sshd: tuple[LoopbackSshd, paramiko.Ed25519Key], tmp_path: Path) -> None:
    server, client = sshd
    ok = probe("127.0.0.1", server.port, "vioconform", client, server.host_key_line)
    assert ok.stage is Stage.READY and ok.banner.startswith("SSH-2.0-")
    other = ed25519(tmp_path / "other")
    mismatch = probe("127.0.0.1", server.port, "vioconform", client, f"ssh-ed25519 {other.get_base64()}")
    assert mismatch.stage is Stage.HOST_KEY_MISMATCH and mismatch.detail == server.host_key_line
    refused = probe("127.0.0.1", server.port, "vioconform", other, server.host_key_line)
    assert refused.stage is Stage.AUTH_REFUSED and refused.spoke_ssh


def test_probe_without_an_ssh_server(tmp_path: Path) -> None:
    """QEMU's forward accepts and closes while nothing listens in the guest: no banner, not an SSH error."""
    key = ed25519(tmp_path / "k")
    line = f"ssh-ed25519 {key.get_base64()}"
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    port = listener.getsockname()[1]

    def close_one() -> None:
        conn, _ = listener.accept()
        conn.close()

    threading.Thread(target=close_one, daemon=True).start()
    result = probe("127.0.0.1", port, "u", key, line)
    assert result.stage is Stage.NO_BANNER and not result.spoke_ssh, result
    listener.close()
    assert probe("127.0.0.1", port, "u", key, line).stage is Stage.NO_CONNECTION


def test_wait_for_ssh_logs_in_or_names_a_panic(sshd: tuple[LoopbackSshd, paramiko.Ed25519Key], tmp_path: Path) -> None:
    """The boot wait itself (probes in their thread, the console, the callbacks) against a real SSH server."""
    server, _ = sshd
    key_path = tmp_path / "client"  # the fixture's client key file
    endpoint = SshEndpoint("127.0.0.1", server.port, "vioconform", key_path, server.host_key_line)
    console = tmp_path / "console.log"
    console.write_text(CONSOLE)
    took = wait_for_ssh("vioconform-1", endpoint, 60, SEEDED, "bios", console, stopped=lambda: None,
                        panicked=kernel_panic, boot_disk_read=lambda: 50 * MIB)
    assert 0 <= took < 30
    console.write_text(CONSOLE + "[   30.1] Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)\n")
    with pytest.raises(HypervisorError) as e:
        wait_for_ssh("vioconform-1", endpoint, 60, SEEDED, "bios", console, stopped=lambda: None,
                     panicked=kernel_panic, boot_disk_read=lambda: 50 * MIB)
    assert str(e.value).startswith('guest vioconform-1 did not boot: its kernel panicked (console: "Kernel panic - '
                                   'not syncing: VFS: Unable to mount root fs on unknown-block(0,0)")')
