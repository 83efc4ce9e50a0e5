"""A setting a rule changes is set back whatever happened, as the guest's kernel will take it; and the
next rule sees the disk as it was (measure/kept.py). The guest here is a scripted block layer that stores
``discard_max_bytes`` as Linux 6.12's block/blk-sysfs.c and blk-settings.c do: a value that is not a
multiple of ``discard_granularity`` is refused (EINVAL), the limit shown is the smaller of the device's
maximum and the user's. The real kernel's case is tests/e2e/test_guest_kernels.py's."""

from __future__ import annotations

import re

import pytest

from guest.tools.sysfs import Restored, SettingNotRestored, Sysfs, takeable
from guest.tools.tool import GuestTools
from measure.kept import kept_settings
from model.errors import GuestDiedEarlier
from tests.unit.fake_shell import FakeShell, Reply, fake_disk
from transport.ssh import CommandResult, GuestCommandError

#: virtio-blk's scratch disk (4 KiB physical blocks) under Linux 6.12: granularity raised to 4096, the
#: device's maximum 2 GiB - 512 (QEMU's max-discard-sectors 4194303)
HW_MAX = 2147483136


class Kernel612:
    """The guest's /sys/block/vda as Linux 6.12 keeps it (the settings a test touches)."""

    def __init__(self) -> None:
        self.user_max = (1 << 32) - 1  # sectors: blk_set_stacking_limits' UINT_MAX, "no user limit"
        self.files = {"queue/discard_granularity": "4096", "queue/read_ahead_kb": "128",
                      "queue/scheduler": "[none] mq-deadline", "queue/nr_requests": "256"}
        self.refusals = 0
        self.frozen = False  # True: every write to discard_max_bytes refused

    def shown(self, f: str) -> str:
        if f == "queue/discard_max_bytes":
            return str(min(HW_MAX, self.user_max * 512))
        return self.files[f]

    def cat(self, command: str) -> Reply:
        return self.shown(re.search(r"/sys/block/vda/(\S+)", command).group(1)) + "\n"  # type: ignore[union-attr]

    def echo(self, command: str) -> Reply:
        m = re.fullmatch(r"echo '?([^']+)'? > /sys/block/vda/(\S+)", command)
        assert m, command
        value, f = m.groups()
        if f == "queue/discard_max_bytes":
            if self.frozen or int(value) % int(self.files["queue/discard_granularity"]):
                self.refusals += 1
                return (1, "", "sh: write error: Invalid argument\n")
            self.user_max = int(value) // 512
        elif f == "queue/scheduler":
            self.files[f] = re.sub(r"[\[\]]", "", self.files[f]).replace(value, f"[{value}]")
            self.files["queue/nr_requests"] = "64" if value == "mq-deadline" else "256"
        else:
            self.files[f] = value
        return ""

    def settings(self, command: str) -> Reply:
        names = command.split(" in ", 1)[1].split(";", 1)[0].split()
        return "".join(f"{f}={self.shown(f)}\n" for f in names
                       if f in self.files or f == "queue/discard_max_bytes")

    def shell(self) -> FakeShell:
        return FakeShell(handlers=[(r"^for f in queue/scheduler ", self.settings), (r"^cat /sys/block/", self.cat),
                                   (r"^echo ", self.echo), (r"^false$", lambda c: (1, "", ""))])


def test_a_value_the_kernel_refuses_back_is_set_as_the_next_multiple_of_the_granularity() -> None:
    assert takeable("queue/discard_max_bytes", str(HW_MAX), {"queue/discard_granularity": "4096"}) == "2147483648"
    assert takeable("queue/discard_max_bytes", str(HW_MAX), {"queue/discard_granularity": "512"}) is None
    assert takeable("queue/discard_max_bytes", str(HW_MAX), {}) is None
    assert takeable("queue/read_ahead_kb", "129", {"queue/discard_granularity": "4096"}) is None


def test_a_changed_setting_is_set_back_when_a_guest_command_fails_inside() -> None:
    kernel = Kernel612()
    sysfs = GuestTools(kernel.shell()).get(Sysfs)
    with pytest.raises(GuestCommandError), sysfs.changed("vda", "queue/discard_max_bytes", "262144") as restored:
        assert sysfs.read("vda", "queue/discard_max_bytes") == "262144"
        sysfs.shell.run("false")  # the rule's next guest command fails mid-way
    assert sysfs.read("vda", "queue/discard_max_bytes") == str(HW_MAX)
    assert kernel.refusals == 1
    assert restored == [Restored("vda", "queue/discard_max_bytes", str(HW_MAX), "2147483648", str(HW_MAX),
                                 "sh: write error: Invalid argument")]
    assert restored[0].note() == ("/sys/block/vda/queue/discard_max_bytes set back as 2147483648: the guest's kernel "
                                  "refused the 2147483136 it had shown (sh: write error: Invalid argument); it shows "
                                  "2147483136 again")


def test_a_value_taken_back_as_it_was_needs_no_note_and_one_never_taken_back_is_an_error() -> None:
    kernel = Kernel612()
    sysfs = GuestTools(kernel.shell()).get(Sysfs)
    with sysfs.changed("vda", "queue/read_ahead_kb", "0") as restored:
        pass
    assert restored[0].note() == "" and kernel.files["queue/read_ahead_kb"] == "128"
    kernel.user_max = 1000  # a user limit of 512000 bytes: not the device's maximum
    kernel.files["queue/discard_granularity"] = "65536"  # now refused, and no multiple up shows it again
    with pytest.raises(SettingNotRestored, match=r"shows 524288 after the suite wrote 524288 back; it showed "
                                                 r"512000 before the change: the disk is left changed"):
        sysfs.restore("vda", "queue/discard_max_bytes", "512000")


def test_the_next_rule_sees_the_disk_as_it_was_after_a_rule_that_errors() -> None:
    """A rule that changes settings and errors before it sets them back: kept_settings reads them
    before and after, and sets back each that changed (the scheduler first: it resets nr_requests)."""
    kernel = Kernel612()
    disk = fake_disk(kernel.shell())
    sysfs = disk.tool(Sysfs)
    before = sysfs.settings("vda")
    with pytest.raises(GuestCommandError), kept_settings([disk]):
        sysfs.write("vda", "queue/scheduler", "mq-deadline")
        sysfs.write("vda", "queue/read_ahead_kb", "0")
        sysfs.write("vda", "queue/discard_max_bytes", "262144")
        disk.tools.shell.run("false")
    assert sysfs.settings("vda") == before
    assert before["queue/scheduler"] == "[none] mq-deadline" and before["queue/nr_requests"] == "256"


def test_a_rule_that_leaves_a_setting_changed_is_set_back_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    kernel = Kernel612()
    disk = fake_disk(kernel.shell())
    with kept_settings([disk]) as restored:
        disk.tool(Sysfs).write("vda", "queue/discard_max_bytes", "262144")
    assert kernel.shown("queue/discard_max_bytes") == str(HW_MAX)
    assert [(r.setting, r.written) for r in restored] == [("queue/discard_max_bytes", "2147483648")]
    assert "the rule left settings changed; set back: /sys/block/vda/queue/discard_max_bytes to 2147483136" \
        in caplog.text


def test_a_set_back_that_fails_after_a_rule_error_is_logged_and_the_rules_error_goes_on(
        caplog: pytest.LogCaptureFixture) -> None:
    """The rule's own error is what the report shows; the disk left changed is said in the log."""
    kernel = Kernel612()
    disk = fake_disk(kernel.shell())
    with pytest.raises(GuestCommandError, match="exit 1"), kept_settings([disk]):
        disk.tool(Sysfs).write("vda", "queue/discard_max_bytes", "262144")
        kernel.frozen = True  # from now on the kernel takes no value back
        disk.tools.shell.run("false")
    assert ("dut disk vda: could not check or set back its settings after the rule: /sys/block/vda/queue/"
            "discard_max_bytes cannot be set back to 2147483136: the guest's kernel refused it (sh: write error: "
            "Invalid argument) and 2147483648 (sh: write error: Invalid argument); the disk is left changed"
            ) in caplog.text
    kernel.frozen = False
    with pytest.raises(SettingNotRestored), kept_settings([disk]):  # a rule that ended well: the error is its
        disk.tool(Sysfs).write("vda", "queue/discard_max_bytes", "131072")
        kernel.frozen = True


def test_after_a_disks_first_rule_one_read_a_rule_suffices() -> None:
    """What a rule left (set back where needed) is what the next one starts from: one guest command per
    rule reads the settings back, and a change made between rules is still set back after the next one."""
    kernel = Kernel612()
    shell = kernel.shell()
    disk = fake_disk(shell)
    def reads() -> int:
        return sum(c.startswith("for f in queue/scheduler ") for c in shell.commands)

    with kept_settings([disk]):
        pass
    assert reads() == 2 and disk.kept is not None and disk.kept["queue/read_ahead_kb"] == "128"
    with kept_settings([disk]):
        pass
    assert reads() == 3
    kernel.files["queue/read_ahead_kb"] = "0"  # changed outside any rule
    with kept_settings([disk]) as restored:
        pass
    assert [r.setting for r in restored] == ["queue/read_ahead_kb"] and kernel.files["queue/read_ahead_kb"] == "128"


def test_a_guest_that_died_in_the_rule_keeps_the_rules_own_error() -> None:
    """The set-back's read finds the guest dead (GuestDiedEarlier): the rule's ERROR must stay its own
    error, never turn into "not run: the guest died earlier"."""
    kernel = Kernel612()
    disk = fake_disk(kernel.shell())
    shell = disk.tools.shell
    with pytest.raises(RuntimeError, match="the hold was never released"), kept_settings([disk]):
        def dead(command: str, check: bool = True, timeout_s: float = 300.0) -> CommandResult:
            raise GuestDiedEarlier("the guest died earlier: its hypervisor hung in a storage stall")
        shell.run = dead  # type: ignore[method-assign]
        raise RuntimeError("the hold was never released")
