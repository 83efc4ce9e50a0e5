"""A scripted guest shell for the guest tools' tests: where a real guest cannot show the case
(a program missing from it, a fio that starts late on a loaded host, a path a caller made up)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import ClassVar, Self

from guest.tools.sysfs import KEPT_SETTINGS
from guest.tools.tool import GuestTools
from hypervisors.base import BackendOptions, Guest, GuestRequest, HypervisorBackend
from hypervisors.cleanup import CleanupStack
from measure.disk import GuestDisk
from model.configuration import Configuration
from model.device_limits import ConfiguredLimits, parse_guest_limits
from model.parse.blockstats import HostBlockCounters
from model.types import AttachedDisk, DiskSpec, GuestDiskId, SshEndpoint
from transport.ride_along import Rider, Riders
from transport.ssh import CommandResult, GuestCommandError

DATA = Path(__file__).resolve().parents[1] / "data"

#: what a handler returns: stdout, or (exit status, stdout, stderr)
Reply = str | tuple[int, str, str]


#: the version the fake guest's own fio prints (the embedded guest's)
FAKE_FIO_VERSION = "fio-3.33"


class FakeShell:
    """Answers each command with the first handler whose pattern matches it (``re.search``);
    a command no handler knows fails the test. ``has`` is the set of programs ``command -v`` finds
    (one found alone is in /usr/bin; a fio found there prints ``FAKE_FIO_VERSION``); a disk's kept
settings (``Sysfs.settings``) are none unless a handler answers them. ``put_file``
    keeps what was copied in ``files``, as ``cat`` would (``put_way``)."""

    def __init__(self, has: Iterable[str] = (), handlers: Iterable[tuple[str, Callable[[str], Reply]]] = (),
                 put_way: str = "cat") -> None:
        self.has = set(has)
        self.handlers = [(re.compile(p), h) for p, h in handlers]
        self.commands: list[str] = []
        self.files: dict[str, tuple[bytes, int]] = {}
        self.put_way = put_way

    def put_file(self, local: Path, remote: str, mode: int = 0o644, timeout_s: float = 300.0) -> str:
        self.commands.append(f"<put {local} {remote} {mode:o}>")
        self.files[remote] = (local.read_bytes(), mode)
        return self.put_way

    def run(self, command: str, check: bool = True, timeout_s: float = 300.0) -> CommandResult:
        self.commands.append(command)
        reply = self._reply(command)
        status, out, err = (0, reply, "") if isinstance(reply, str) else reply
        result = CommandResult(command, status, out, err, 0.0)
        if check and status != 0:
            raise GuestCommandError(result)
        return result

    def _reply(self, command: str) -> Reply:
        m = re.fullmatch(r"for p in (.*); do command -v .*", command)
        if m:
            return "".join(f"{p}\n" for p in m.group(1).split() if p in self.has)
        m = re.fullmatch(r"command -v (\S+) \|\| true", command)
        if m:
            return f"/usr/bin/{m.group(1)}\n" if m.group(1) in self.has else ""
        if command == "/usr/bin/fio --version" and "fio" in self.has:
            return f"{FAKE_FIO_VERSION}\n"
        for pattern, handler in self.handlers:
            if pattern.search(command):
                return handler(command)
        if command.startswith(f"for f in {KEPT_SETTINGS[0]} "):  # a rule's settings kept (measure/kept.py)
            return ""  # none shown, none kept: a test of them answers with a handler of its own
        raise AssertionError(f"the fake guest has no answer for: {command}")

    def lookups(self) -> int:
        return sum(c.startswith("for p in ") for c in self.commands)


class RidingFakeShell(FakeShell):
    """A FakeShell that carries scripts along with its next command, as the SSH transport does
    (transport/ride_along.py): each rider is answered by the same handlers (its error output in its
    output), ``commands`` counts round trips only, and ``sent`` has every script in the order the guest
    would run it, each rider marked ``+``."""

    def __init__(self, has: Iterable[str] = (), handlers: Iterable[tuple[str, Callable[[str], Reply]]] = ()) -> None:
        super().__init__(has, handlers)
        self.riders = Riders()
        self.sent: list[str] = []

    def ride_along(self, script: str, after: bool = False) -> Rider:
        return self.riders.add(script, after)

    def drop_rider(self, rider: Rider) -> None:
        self.riders.drop(rider)

    def run(self, command: str, check: bool = True, timeout_s: float = 300.0) -> CommandResult:
        taken = self.riders.take()
        riders = taken.riders if taken is not None else ()
        for r in (r for r in riders if not r.after):
            self._answer(r)
        self.sent.append(command)
        try:
            return super().run(command, check, timeout_s)
        finally:
            for r in (r for r in riders if r.after):
                self._answer(r)

    def _answer(self, rider: Rider) -> None:
        reply = self._reply(rider.script)
        status, out, err = (0, reply, "") if isinstance(reply, str) else reply
        rider.status, rider.output = status, out + err
        self.sent.append(f"+{rider.script}")


def wait_until(predicate: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition never met"
        time.sleep(0.01)


class FakeBackend(HypervisorBackend):
    """A host whose counters of the one disk are ``counters()``; each read's time is kept in ``reads``."""

    name = "fake"
    controllers: ClassVar[dict[str, str]] = {}

    def __init__(self, counters: Callable[[], HostBlockCounters] | None = None) -> None:
        super().__init__(CleanupStack())
        self.counters = counters
        self.reads: list[float] = []

    @classmethod
    def from_options(cls, cleanup: CleanupStack, opts: BackendOptions) -> Self:
        raise NotImplementedError

    def _start_guest(self, request: GuestRequest) -> Guest:
        raise NotImplementedError

    def host_counters(self, guest: Guest, disk: AttachedDisk) -> HostBlockCounters:
        assert self.counters is not None, "this test's host has no counters"
        self.reads.append(time.monotonic())
        return self.counters()


def fake_disk(shell: FakeShell, backend: HypervisorBackend | None = None) -> GuestDisk:
    """The guest's vda (virtio-blk, limits as recorded in the embedded guest) behind ``shell``."""
    guest = Guest("vioconform-7", SshEndpoint("127.0.0.1", 22, "root", Path("key"), "ssh-ed25519 AAAA"), (), "tcg")
    spec = DiskSpec("virtio-blk")
    attached = AttachedDisk(spec, "vda", ConfiguredLimits(queue_depth=256), GuestDiskId("serial", spec.serial))
    limits = parse_guest_limits((DATA / "guest" / "limits-virtio-blk.txt").read_text())
    return GuestDisk(guest, backend or FakeBackend(), GuestTools(shell, guest.name), attached, "vda", limits,
                     Configuration("fake", "virtio-blk"))
