"""``bench.time_to_verdict --stamps`` (bench/stamps.py): each wrapped step prints a line as it starts and
one with its own time as it ends, also when it raises, and each guest command one line with its time;
what the step returns is unchanged."""

from __future__ import annotations

import io
import re

import pytest

from bench.stamps import Stamps
from transport.ssh import CommandResult


def test_a_stamped_step_prints_its_start_and_its_end_with_its_time() -> None:
    class Steps:
        def boot(self, name: str) -> str:
            return f"booted {name}"

        def fail(self) -> None:
            raise RuntimeError("no guest")

    out = io.StringIO()
    stamps = Stamps(since_start_s=2.0, out=out)
    stamps.wrap(Steps, "boot")
    stamps.wrap(Steps, "fail")
    assert Steps().boot("vioconform-7") == "booted vioconform-7"
    with pytest.raises(RuntimeError, match="no guest"):
        Steps().fail()
    lines = out.getvalue().splitlines()
    assert [re.sub(r"\d+\.\d+", "N", line) for line in lines] == [
        "[  N] > boot", "[  N] < boot N s", "[  N] > fail", "[  N] < fail N s"]
    assert float(lines[0][1:7]) >= 2.0  # counted from the process's start, not from the wrapping


def test_each_guest_command_is_stamped_with_its_time() -> None:
    class Shell:
        def run(self, command: str, check: bool = True) -> CommandResult:
            return CommandResult(command, 0, "ok\n", "", 0.0)

    out = io.StringIO()
    Stamps(since_start_s=0.0, out=out).wrap_commands(Shell)
    assert Shell().run("cat /proc/diskstats\n").stdout == "ok\n"
    assert re.fullmatch(r"\[ *\d+\.\d+\]   command \d+\.\d+ s 'cat /proc/diskstats'\n", out.getvalue())
