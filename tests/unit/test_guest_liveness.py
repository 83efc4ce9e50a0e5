"""Telling a dead guest from a live one, on a console recorded from a real kernel panic; and the
--depths bound. The SSH wait loop itself runs against real guests in tests/e2e/test_guest_faults.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from hypervisors.base import Guest, kernel_panic
from model.errors import GuestDied, HypervisorError
from model.rules.queue_depth import MAX_DEPTH, offered_depths
from model.types import SshEndpoint

#: The embedded guest's console after `echo c > /proc/sysrq-trigger` (Debian 6.1, QEMU 7.2 TCG).
PANIC_CONSOLE = Path(__file__).resolve().parent.parent / "data" / "guest" / "console-panic.log"
PANIC_REASON = 'its kernel panicked (console: "Kernel panic - not syncing: sysrq triggered crash")'


def _guest(console: Path | None) -> Guest:
    return Guest("g", SshEndpoint("127.0.0.1", 22, "root", Path("k"), "ssh-ed25519 AAAA"), (), "tcg",
                 console_log_path=console)


def test_a_recorded_panic_is_found_and_a_healthy_console_is_not() -> None:
    text = PANIC_CONSOLE.read_text()
    assert kernel_panic(text) == PANIC_REASON
    healthy = text[: text.index("sysrq: Trigger a crash")]
    assert "VIOCONFORM-READY" in healthy and kernel_panic(healthy) is None


def test_dead_reason_reads_the_console_end_then_asks_the_hypervisor(tmp_path: Path) -> None:
    panicked = _guest(PANIC_CONSOLE)
    assert panicked.dead_reason() == PANIC_REASON
    # the panic is found in the last 64 KiB even behind a long boot log
    long_console = tmp_path / "console.log"
    long_console.write_text("boot line\n" * 20000 + PANIC_CONSOLE.read_text())
    assert _guest(long_console).dead_reason() == PANIC_REASON

    alive = _guest(tmp_path / "console-healthy.log")
    (tmp_path / "console-healthy.log").write_text("VIOCONFORM-READY\n")
    assert alive.dead_reason() is None
    alive.vm_dead_reason = lambda: "its domain g is shut off"
    assert alive.dead_reason() == "its domain g is shut off"
    assert _guest(None).dead_reason() is None  # no console (vSphere), no hypervisor answer: alive


def test_guest_died_is_a_hypervisor_error_with_the_console() -> None:
    err = GuestDied("the guest died earlier: " + PANIC_REASON, PANIC_CONSOLE.read_text())
    assert isinstance(err, HypervisorError) and not isinstance(err, AssertionError)
    assert "--- guest console (last lines) ---" in str(err) and "sysrq_handle_crash" in str(err)


def test_depths_are_bounded_by_what_libaio_can_set_up() -> None:
    assert offered_depths(f"1,{MAX_DEPTH}") == (1, 65536)
    with pytest.raises(ValueError, match=r"--depths 65537 is above 65536.*fs\.aio-max-nr"):
        offered_depths("1,65537")
