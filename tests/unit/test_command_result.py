"""A guest command's one-line error (transport/ssh.py's CommandResult.error_line)."""

from __future__ import annotations

from transport.ssh import CommandResult


def _done(status: int, stdout: str = "", stderr: str = "") -> CommandResult:
    return CommandResult("fstrim -v /mnt", status, stdout, stderr, 0.1)


def test_the_error_line_is_stderrs_last_line_or_the_exit_status() -> None:
    assert _done(1, stderr="first\nfstrim: FITRIM: Operation not supported\n").error_line() == \
        "fstrim: FITRIM: Operation not supported"
    assert _done(1, stdout="on stdout only\n").error_line() == "exit 1"
    assert _done(1, stdout="on stdout only\n").error_line(stdout_too=True) == "on stdout only"
    assert _done(2, stderr=" \n").error_line(stdout_too=True) == "exit 2"  # blank stderr: nothing said
