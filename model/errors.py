"""Errors shared by every layer: parsers, backends, the trace."""

from __future__ import annotations


class ParseError(ValueError):
    """Raised when recorded or live tool output cannot be understood.

    The message names the source (file, tool or field) and what was wrong with it,
    so a user can tell whether the tool, its version or the collection step is at fault.
    """


class FioError(RuntimeError):
    """fio itself failed: a job ended with an error (fio's JSON ``"error"``), or fio exited
    non-zero without results. A harness error, never a rule's verdict: the workload did not run,
    so there is nothing to judge.

    The message carries fio's own words (its ``fio: ...`` lines and stderr), e.g.
    ``fio: pid=171, err=11/file:engines/libaio.c:485, func=io_queue_init, error=Resource
    temporarily unavailable``.
    """

    def __init__(self, message: str, exit_status: int, said: str) -> None:
        super().__init__(message)
        self.exit_status = exit_status
        self.said = said  # what fio printed about the failure, as printed


class HypervisorError(RuntimeError):
    """A backend step failed. The message says what to do; ``console_log`` is attached when known."""

    def __init__(self, message: str, console_log: str | None = None) -> None:
        super().__init__(message)
        self.console_log = console_log

    def __str__(self) -> str:
        base = super().__str__()
        if self.console_log is not None:
            shown = self.console_log or "(empty: the guest printed nothing on its console yet)"
            return f"{base}\n--- guest console (last lines) ---\n{shown}"
        return base


class GuestDied(HypervisorError):
    """The guest stopped answering for good while the suite used it: its VM stopped, its kernel
    panicked, or it hangs. A harness error (nothing about the rule was measured); it carries the
    console tail. Later commands on the same guest fail at once with "the guest died earlier"."""


class GuestDiedEarlier(GuestDied):
    """A command sent to a guest that had already died (``GuestDied``) or was given up: the rule
    it belongs to never ran. Its outcome is NOT RUN with the death's cause, never an ERROR of its own."""


class TraceIncomplete(HypervisorError):
    """The host trace holds fewer requests than the disk's own counters: the device carried
    commands its events do not show. Callers fall back to the counters and record ``gap``."""

    def __init__(self, message: str, gap: str) -> None:
        super().__init__(message)
        self.gap = gap  # short, for a record: "traced 0 of 282 requests (why)"

