"""A backend error shows the guest's console when the backend attached it (a guest that never booted)."""

from __future__ import annotations

from model.errors import HypervisorError, TraceIncomplete


def test_error_shows_attached_console_tail() -> None:
    err = HypervisorError("guest did not reach VIOCONFORM-READY within 3 s", console_log="SeaBIOS\nBooting from ROM")
    assert str(err) == (
        "guest did not reach VIOCONFORM-READY within 3 s\n--- guest console (last lines) ---\nSeaBIOS\nBooting from ROM"
    )


def test_empty_console_is_said_and_absent_console_is_not_shown() -> None:
    assert "(empty: the guest printed nothing on its console yet)" in str(HypervisorError("x", console_log=""))
    assert str(HypervisorError("cannot connect")) == "cannot connect"
    assert str(TraceIncomplete("trace holds 0 of 300", gap="traced 0 of 300")) == "trace holds 0 of 300"
