"""Waiting for a guest booted from a user's image to answer SSH, and telling why it does not.

A user's image prints no marker the suite could wait for, so the wait polls: an SSH handshake
against the forwarded port (``transport.probe``) about once a second, with the host key checked
against the pinned one and the run's key offered. ``BootJudge`` reads each observation (the probe's
stage, the console text, the bytes read from the boot disk) and either goes on waiting or ends the
wait with one line naming the cause, as soon as the cause shows:

- another host key, seen for ``MISMATCH_GRACE_S``: the guest is up but is not the guest the seed
  prepared (no cloud-init, or the seed was not applied);
- the key refused for ``MISMATCH_GRACE_S``: the same for the login; a handshake that fails past the
  banner as long: an SSH server the suite cannot talk to;
- the firmware says it found nothing to boot (SeaBIOS "No bootable device", OVMF starting its shell);
- ``NOT_BOOTED_S`` after the start the firmware has read under ``BOOTED_READ_BYTES`` of the boot
  disk: no bootloader ran (or the wrong firmware);
- systemd says on the console that the SSH server failed to start;
- the console shows the boot finished (a login prompt, or cloud-init's "finished" line) and
  ``SSHD_GRACE_S`` later still no SSH banner: no SSH server, or no network;
- the timeout: with the console's tail and cloud-init's lines from it.

A guest whose VM stopped or whose kernel panicked is the backend's to report (it knows QEMU's log).
The judge is pure: tests feed it observations.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from model.errors import HypervisorError
from transport.probe import ProbeResult, Stage

#: A mismatch or a refusal must persist this long: sshd may start a moment before cloud-init has
#: written the seed's host key or the user's authorized key (cloud-init orders itself before sshd;
#: this covers an image where it does not).
MISMATCH_GRACE_S = 10.0
#: Measured here under TCG with the host's load average at 10: the test image (GRUB, Debian 12 cloud
#: kernel) had read 11 MiB of its boot disk 10 s after the start and 20 MiB after 21 s (BIOS); a disk
#: with a boot signature and no bootloader stays at 512 bytes (SeaBIOS) or 9.5 KiB (OVMF) for good.
#: A firmware that has read nothing yet is still starting (OVMF under TCG on a host at load 20+ had
#: read 0 bytes 30 s after the start, and then booted; at load 15 OVMF read its first 12 KiB 36 s after
#: the start): only one that read and then stopped, its read unchanged for this long, is judged here;
#: one that never reads is left to the boot timeout and the firmware's own last words.
NOT_BOOTED_S = 30.0
BOOTED_READ_BYTES = 1024**2
#: After the console shows the boot finished, how long sshd may take to answer: on the test image
#: sshd answers before the login prompt appears.
SSHD_GRACE_S = 20.0
#: Seconds between progress lines.
PROGRESS_S = 10.0

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\x1bc|[\x00-\x08\x0b-\x1f\x7f]")
#: The firmware found nothing it could boot: SeaBIOS's last words, or OVMF falling back to its shell.
_FIRMWARE_GAVE_UP = re.compile(r"No bootable device|Boot failed: not a bootable disk|starting Boot\w+ \"EFI Internal Shell\"")
#: systemd's line for an SSH server that did not start (Debian's ssh.service, RHEL's sshd.service).
_SSHD_FAILED = re.compile(r"FAILED\s*\]\s*Failed to start\s+(?:ssh|sshd|openssh-server)\S*")
_LOGIN = re.compile(r"\blogin:\s*$", re.MULTILINE)
_CLOUD_INIT_DONE = re.compile(r"Cloud-init v\. \S+ finished at")


def clean_console(text: str) -> list[str]:
    """The console's lines without terminal escapes and control characters, empty ones dropped."""
    lines = (_ANSI.sub("", line.replace("\r", "")).rstrip() for line in text.split("\n"))
    return [line for line in lines if line.strip()]


def last_line(text: str, width: int = 120) -> str:
    lines = clean_console(text[-8192:])
    return lines[-1].strip()[:width] if lines else "(nothing yet)"


def cloud_init_lines(text: str, lines: int = 10) -> list[str]:
    """cloud-init's own lines from the console (its start and "finished" lines, its warnings)."""
    return [line for line in clean_console(text) if "cloud-init" in line.lower()][-lines:]


def boot_finished(text: str) -> str | None:
    """The console line that shows the boot finished, or None."""
    for line in reversed(clean_console(text[-65536:])):
        if _LOGIN.search(line) or _CLOUD_INIT_DONE.search(line):
            return line.strip()
    return None


def sshd_failed(text: str) -> str | None:
    """systemd's console line saying the SSH server failed to start, or None."""
    for line in clean_console(text[-65536:]):
        if _SSHD_FAILED.search(line):
            return line.strip()
    return None


class BootFailed(HypervisorError):
    """The guest will not answer SSH as prepared; the message names the cause and the remedy."""


@dataclass(frozen=True)
class Access:
    """How the suite logs in: ``seeded`` when the suite's cloud-init seed set the user and keys up."""

    user: str
    seeded: bool
    key_name: str  # "the run's key" or "--guest-key PATH"

    @property
    def hint(self) -> str:
        if self.seeded:
            return ("cloud-init did not apply the suite's seed (no cloud-init in the image, or it does not read a "
                    "NoCloud 'cidata' disk)? For an image without cloud-init give --guest-user, --guest-key and "
                    "--guest-host-key")
        return ""


@dataclass(frozen=True)
class Observation:
    elapsed_s: float
    probe: ProbeResult
    console: str
    #: bytes the guest has read from its boot disk (the host's counter), None where unknown
    boot_disk_read_bytes: int | None = None
    #: the host's 1-minute load average, for the timeout's message
    host_load: float | None = None


class BootJudge:
    """Reads the observations of one boot in order; ``judge`` says ready (True), keep waiting
    (False), or raises BootFailed."""

    def __init__(self, name: str, port: int, timeout_s: float, access: Access, expected_host_key: str,
                 firmware: str = "bios") -> None:
        self.name = name
        self.firmware = firmware
        self.port = port
        self.timeout_s = timeout_s
        self.access = access
        self.expected_host_key = expected_host_key
        self.spoke_ssh = False
        self._since: dict[Stage, float] = {}
        self._finished_at: float | None = None
        self._finished_line = ""
        self._last: Observation | None = None
        #: the boot disk's bytes read at the last observation, and when that figure was first seen
        self._read: tuple[int | None, float] = (None, 0.0)

    def judge(self, obs: Observation) -> bool:
        self._last = obs
        stage = obs.probe.stage
        if stage is Stage.READY:
            return True
        self.spoke_ssh = self.spoke_ssh or obs.probe.spoke_ssh
        # How long the same answer has been given, for the ones that need to persist.
        self._since = {stage: self._since.get(stage, obs.elapsed_s)}
        held = obs.elapsed_s - self._since[stage]
        if stage is Stage.HOST_KEY_MISMATCH and held >= MISMATCH_GRACE_S:
            self._fail(self._mismatch(obs.probe.detail), obs)
        if stage is Stage.AUTH_REFUSED and held >= MISMATCH_GRACE_S:
            self._fail(self._refused(obs.probe.detail), obs)
        if stage is Stage.SSH_ERROR and held >= MISMATCH_GRACE_S:
            self._fail(f"guest {self.name}'s SSH server ({obs.probe.banner or 'no banner'}) answers, but the SSH "
                       f"handshake fails: {obs.probe.detail}", obs)
        gave_up = None if self.spoke_ssh else _FIRMWARE_GAVE_UP.search(obs.console[-65536:])
        if gave_up is not None:
            self._fail(f"guest {self.name} did not boot: its firmware found nothing to boot (console: "
                       f"{gave_up.group(0)!r}); does the image have a bootloader for {self.firmware_hint}?", obs)
        read = obs.boot_disk_read_bytes
        if read != self._read[0]:
            self._read = (read, obs.elapsed_s)
        if (not self.spoke_ssh and read is not None and 0 < read < BOOTED_READ_BYTES
                and obs.elapsed_s - self._read[1] >= NOT_BOOTED_S):
            self._fail(f"guest {self.name} did not boot: {obs.elapsed_s:.0f} s after the start its firmware had read "
                       f"{_size(read)} of the boot disk and nothing more: does the image have a bootloader for "
                       f"{self.firmware_hint}?", obs)
        if not self.spoke_ssh:
            failed = sshd_failed(obs.console)
            if failed is not None:
                self._fail(f"guest {self.name}'s SSH server failed to start (its console: {failed[:80]!r}): see the "
                           "console below; an image without cloud-init must bring its own SSH host keys "
                           "(ssh-keygen -A when the image is made)", obs)
            if self._finished_at is None:
                line = boot_finished(obs.console)
                if line is not None:
                    self._finished_at, self._finished_line = obs.elapsed_s, line
            elif obs.elapsed_s - self._finished_at >= SSHD_GRACE_S:
                self._fail(f"guest {self.name} booted (its console: {self._finished_line[:80]!r}) but nothing answered "
                           f"SSH on its port 22 for {obs.elapsed_s - self._finished_at:.0f} s since: does the image have "
                           "an SSH server (openssh-server) enabled at boot, and does its network come up on the "
                           "virtio-net NIC by DHCP?", obs)
        if obs.elapsed_s >= self.timeout_s:
            self._fail(self._timeout(obs), obs)
        return False

    @property
    def firmware_hint(self) -> str:
        other = "uefi" if self.firmware == "bios" else "bios"
        return f"{self.firmware.upper()} (--firmware {self.firmware}), or does it need --firmware {other}"

    def progress(self) -> str:
        """One line on where the boot is, for the log every ``PROGRESS_S``."""
        obs = self._last
        if obs is None:
            return f"{self.name}: waiting for SSH"
        read = "" if obs.boot_disk_read_bytes is None else f"; boot disk read {obs.boot_disk_read_bytes / 1024**2:.0f} MiB"
        return (f"{self.name}: waiting for SSH, {obs.elapsed_s:.0f} of {self.timeout_s:.0f} s ({obs.probe.stage.value})"
                f"{read}; console: {last_line(obs.console)}")

    def _mismatch(self, presented: str) -> str:
        shown = presented[:60] + ("..." if len(presented) > 60 else "")
        if self.access.seeded:
            return (f"guest {self.name} presents the SSH host key {shown}, not the one the suite's cloud-init seed "
                    f"gave it: {self.access.hint}")
        return (f"guest {self.name} presents the SSH host key {shown}, not the one --guest-host-key gives: give the "
                "key the image's sshd has (its /etc/ssh/ssh_host_ed25519_key.pub)")

    def _refused(self, detail: str) -> str:
        if self.access.seeded:
            return (f"guest {self.name} refused the run's key for user {self.access.user} ({detail}): "
                    f"{self.access.hint}")
        return (f"guest {self.name} refused {self.access.key_name} for user {self.access.user} ({detail}): its public "
                f"key must be in ~{self.access.user}/.ssh/authorized_keys in the image")

    def _timeout(self, obs: Observation) -> str:
        load = "" if obs.host_load is None else f"; this host's load average is {obs.host_load:.1f}"
        if not self.spoke_ssh and boot_finished(obs.console) is None and clean_console(obs.console):
            why = (f"sshd never answered on port 22, and the guest was still booting (its console's last line: "
                   f"{last_line(obs.console, 80)!r}): under TCG a systemd guest takes 40-75 s on an idle host and "
                   f"much longer on a busy one{load}")
        elif not self.spoke_ssh:
            why = ("sshd never answered on port 22: does the image have an SSH server, and does its network come up "
                   "on the virtio-net NIC by DHCP?")
        else:
            why = f"its SSH server answered, but the last attempt ended with: {obs.probe.stage.value} ({obs.probe.detail})"
        return (f"guest {self.name} did not answer SSH within {self.timeout_s:.0f} s: {why} (raise --boot-timeout "
                "if the host is slow)")

    def _fail(self, message: str, obs: Observation) -> None:
        raise BootFailed(message, console_log=console_report(obs.console))


def _size(n: int) -> str:
    return f"{n} bytes" if n < 10 * 1024 else f"{n / 1024:.0f} KiB"


def console_report(console: str, lines: int = 40) -> str:
    """The console's tail, and cloud-init's lines from the whole console when it printed any."""
    tail = "\n".join(clean_console(console)[-lines:])
    ci = cloud_init_lines(console)
    if ci:
        tail += "\n--- cloud-init on the console ---\n" + "\n".join(ci)
    return tail
