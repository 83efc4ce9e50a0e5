"""A guest shell that is the host's ``sh``: a guest tool's real script run here, its programs first looked up
in a directory of stand-ins (each logs its arguments to ``bin/log``, prints ``bin/out-<name>`` and fails,
with ``bin/fail-<name>`` as its words, where that file is not empty)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterable
from pathlib import Path

from transport.ssh import CommandResult, GuestCommandError

STAND_IN = """#!/bin/sh
echo "{name}${{*:+ $*}}" >> {bin}/log
[ -f {bin}/out-{name} ] && cat {bin}/out-{name}
if [ -s {bin}/fail-{name} ]; then cat {bin}/fail-{name} >&2; exit 32; fi
exit 0
"""


class HostShell:
    def __init__(self, bin_dir: Path) -> None:
        self.bin_dir = bin_dir
        self.commands: list[str] = []

    def run(self, command: str, check: bool = True, timeout_s: float = 300.0) -> CommandResult:
        self.commands.append(command)
        done = subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True, timeout=timeout_s,
                              env={"PATH": f"{self.bin_dir}:/usr/bin:/bin"}, check=False)
        result = CommandResult(command, done.returncode, done.stdout, done.stderr, 0.0)
        if check and not result.ok:
            raise GuestCommandError(result)
        return result

    def log(self) -> list[str]:
        """The stand-ins' calls, in order."""
        path = self.bin_dir / "log"
        return path.read_text().splitlines() if path.exists() else []


def with_stand_ins(tmp_path: Path, names: Iterable[str]) -> HostShell:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in names:
        (bin_dir / name).write_text(STAND_IN.format(name=name, bin=bin_dir))
        (bin_dir / name).chmod(0o755)
    return HostShell(bin_dir)
