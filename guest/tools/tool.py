"""What every guest tool shares: the shell it talks through, the programs it needs, and the
check that they exist, made once per guest (the pattern of lisa's ``Tool``).

A tool is one class per guest program or file (fio, /proc/diskstats, sysfs, ...). It builds
its commands itself and returns typed results; a rule calls ``disk.tool(Fio).run(job, ...)``
and never writes a shell string.

Guests differ (busybox's ``fdisk`` or util-linux's ``sfdisk``, ``usleep`` or a fractional
``sleep``). A tool with several ways of doing its work is an interface class whose
``variants`` are its implementations, tried in order: ``GuestTools.get`` returns the first whose
``programs`` all exist in the guest. Supporting another distribution is a new variant, not an
``if`` in the callers.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar, Protocol, TypeVar

from transport.ride_along import Rider, RidingShell
from transport.ssh import CommandResult, GuestCommandError

#: What a guest command may take before the shell gives up on it (the transport's default).
DEFAULT_TIMEOUT_S = 300.0


class GuestShell(Protocol):
    """The one thing a tool needs from the guest: run a /bin/sh command and get its result.
    ``SshTransport`` is one; tests use a scripted fake. With ``check``, a non-zero exit raises
    (``transport.ssh.GuestCommandError``)."""

    def run(self, command: str, check: bool = True, timeout_s: float = DEFAULT_TIMEOUT_S) -> CommandResult: ...


class ToolMissing(RuntimeError):
    """A program a tool needs is not in the guest. ``str()`` names the programs, the guest,
    how they were looked for and how to get them: "fdisk is missing in guest vioconform-123 ...".

    A rule that cannot run without the tool turns this into a skip with that text
    (``suites/needs.py``); anywhere else it is an ERROR (no verdict reached)."""

    def __init__(self, tool: str, missing: tuple[str, ...], ways: tuple[tuple[str, ...], ...], guest: str,
                 hint: str) -> None:
        self.tool = tool
        self.missing = missing
        self.guest = guest
        names = ", ".join(missing)
        runs = "; or ".join(", ".join(w) for w in ways)
        text = (f"{names} {'is' if len(missing) == 1 else 'are'} missing in guest {guest} (`command -v` found "
                f"no {names}; the {tool} tool runs {runs})")
        super().__init__(f"{text}: {hint}" if hint else text)


class GuestTool:
    """Base of every tool. A subclass names the ``programs`` it runs (checked with ``command -v``
    before first use, once per guest) and an ``install_hint``; an interface with several
    implementations lists them in ``variants`` instead (see the module's docstring).

    Programs every Linux guest has (sh and the POSIX utilities: cat, grep, dd, df, awk; mount, sync)
    are not listed."""

    #: what the tool is called in messages: "fio", "partitioning"
    name: ClassVar[str] = ""
    programs: ClassVar[tuple[str, ...]] = ()
    install_hint: ClassVar[str] = ""
    #: implementations of this interface, preferred first; empty: the class is its own implementation
    variants: ClassVar[tuple[type[GuestTool], ...]] = ()
    #: kept by ``GuestTools.forget``: a choice made once for the guest's life (which fio it runs)
    keep_on_forget: ClassVar[bool] = False

    def __init__(self, shell: GuestShell, tools: GuestTools) -> None:
        self.shell = shell
        #: the guest's other tools, for a tool that builds on another (fio's work directory)
        self.tools = tools

    def _run(self, command: str, check: bool = True, timeout_s: float = DEFAULT_TIMEOUT_S) -> CommandResult:
        """Run one of this tool's own commands (tools build them; callers never pass one in)."""
        return self.shell.run(command, check=check, timeout_s=timeout_s)

    def _with_next(self, command: str) -> None:
        """Run ``command``, whose result nobody reads, ahead of the guest's next command where the shell can
        carry it (transport/ride_along.py: no round trip of its own), else now."""
        if isinstance(self.shell, RidingShell):
            self.shell.ride_along(command)
        else:
            self._run(command, check=False)


T = TypeVar("T", bound=GuestTool)


def rode_ok(rider: Rider | None, hint: str = "") -> None:
    """Raise as a command of its own would have where ``rider`` (a script sent with another command:
    transport/ride_along.py; None: it ran as a command of its own) failed or never ran."""
    if rider is None or rider.pending:
        return
    if rider.lost:
        raise RuntimeError(f"guest command never ran: {rider.script}: {rider.lost}" + (f"\n{hint}" if hint else ""))
    if rider.status != 0:
        raise GuestCommandError(CommandResult(rider.script, rider.status or 0, rider.output, "", 0.0), hint)


def tool_programs() -> tuple[str, ...]:
    """Every program the tool classes defined so far name, their variants' included (the suite's
    rules import theirs before the first guest command)."""
    names: list[str] = []
    stack = list(GuestTool.__subclasses__())
    while stack:
        cls = stack.pop()
        names += cls.programs
        stack += cls.__subclasses__()
    return tuple(sorted(set(names)))


class GuestTools:
    """The tools of one guest: ``get(Fio)`` gives its fio tool, checked to exist on first use.

    One per guest, shared by its disks, so each program is looked up once. ``forget()`` drops
    what was found, for when the guest changed (a ``--guest-setup`` command ran).

    ``fio_binary``: gives the host's static fio (building it if needed), called only if the guest
    has no fio of its own or ``push_fio`` asks for the static one anyway (guest/tools/fio_push.py)."""

    def __init__(self, shell: GuestShell, guest: str = "the guest", fio_binary: Callable[[], Path] | None = None,
                 push_fio: bool = False) -> None:
        self.shell = shell
        self.guest = guest
        self.fio_binary = fio_binary
        self.push_fio = push_fio
        self._found: dict[str, bool] = {}
        self._tools: dict[type[GuestTool], GuestTool] = {}

    def get(self, tool: type[T]) -> T:
        """The guest's ``tool``: the first of its variants whose programs exist; ToolMissing if none."""
        have = self._tools.get(tool)
        if have is None:
            have = self._tools[tool] = self._pick(tool)(self.shell, self)
        assert isinstance(have, tool)
        return have

    def has(self, *programs: str) -> bool:
        """Whether every one of ``programs`` exists in the guest. Where one is not looked up yet, one
        command looks up every program a tool names (:func:`tool_programs`) along with it: one round
        trip a guest, not one a tool (each 0.3 s through a non-root login's ``sudo`` under TCG)."""
        unknown = [p for p in dict.fromkeys(programs) if p not in self._found]
        if unknown:
            ask = list(dict.fromkeys([*unknown, *(p for p in tool_programs() if p not in self._found)]))
            words = " ".join(shlex.quote(p) for p in ask)
            out = self.shell.run(f"for p in {words}; do command -v \"$p\" >/dev/null 2>&1 && echo \"$p\"; done; true",
                                 check=True, timeout_s=60).stdout.split()
            self._found.update({p: p in out for p in ask})
        return all(self._found[p] for p in programs)

    def forget(self) -> None:
        """Look programs up again on next use: the guest may have gained or lost some. A tool that
        made a choice for the guest's life (``keep_on_forget``: which fio runs) is kept."""
        self._found.clear()
        self._tools = {k: v for k, v in self._tools.items() if k.keep_on_forget}

    def _pick(self, tool: type[GuestTool]) -> type[GuestTool]:
        # ``variants`` declared on the class itself: a variant inherits its interface's list
        candidates = tool.variants if "variants" in vars(tool) and tool.variants else (tool,)
        self.has(*(p for c in candidates for p in c.programs))
        for c in candidates:
            if self.has(*c.programs):
                return c
        missing = tuple(dict.fromkeys(p for c in candidates for p in c.programs if not self._found[p]))
        raise ToolMissing(tool.name or tool.__name__, missing, tuple(c.programs for c in candidates), self.guest,
                          tool.install_hint or candidates[0].install_hint)
