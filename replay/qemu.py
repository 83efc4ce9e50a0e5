"""The replay's QEMU: the run's exact command line (hypervisor/qemu-command.txt), made to run
without libvirt, and one boot of it that collects both sides' evidence.

From libvirt's command line it keeps the machine, CPU, memory, the controllers and disks (the
null-co latency disk included) and drops what only libvirt had: its monitor and secrets, the
file descriptors it passed, the network (the replay talks to the guest over the serial console),
the serial file. It adds its own kernel command line (the guest's init is the replay's script),
the initramfs with that script, the serial console on stdout and the trace events on.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import shlex
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from replay.guest_script import PREFIX, SCRIPT_PATH
from replay.qmp import Qmp, QmpError

#: Options libvirt gives QEMU that a plain QEMU run must not have, each with its value.
DROP_WITH_VALUE = frozenset({"-name", "-uuid", "-chardev", "-mon", "-add-fd", "-netdev", "-kernel", "-initrd",
                             "-append", "-D", "-msg", "-serial", "-pidfile", "-sandbox"})
DROP_ALONE = frozenset({"-S", "-no-shutdown", "-daemonize"})
#: -device and -object values that belong to libvirt's plumbing, not to the disks.
DROP_VALUE = re.compile(r'"qom-type":"secret"|isa-serial|virtio-net-pci|"driver":"virtio-net')


class CannotTest(Exception):
    """The replay cannot reach a verdict (exit 125): QEMU did not start, the guest did not boot,
    the evidence is incomplete; the message says which."""


def parse_command(text: str) -> list[str]:
    """The argv of a libvirt log's command (``\\``-continued lines)."""
    return shlex.split(text.replace("\\\n", " "))


def plain_args(argv: Sequence[str], files: dict[str, Path]) -> list[str]:
    """``argv`` (libvirt's, emulator first) without libvirt's plumbing; the emulator is left out.
    A file-backed disk's ``"filename"`` is replaced by ``files[basename]``."""
    out: list[str] = []
    args = list(argv[1:])
    i = 0
    while i < len(args):
        a = args[i]
        value = args[i + 1] if i + 1 < len(args) else ""
        if a in DROP_ALONE:
            i += 1
            continue
        if a in DROP_WITH_VALUE or (a in ("-device", "-object") and DROP_VALUE.search(value)):
            i += 2
            continue
        if a == "-blockdev":
            value = re.sub(r'"filename":\s*"([^"]*)"',
                           lambda m: f'"filename":"{files.get(Path(m.group(1)).name, Path(m.group(1)))}"', value)
        out.append(a)
        if a.startswith("-") and i + 1 < len(args) and not args[i + 1].startswith("-"):
            out.append(value)
            i += 2
        else:
            i += 1
    return out


def file_disks(argv: Sequence[str]) -> list[str]:
    """The file names of the file-backed disks in ``argv`` (they are recreated, empty, for the replay)."""
    return [Path(m).name for a in argv for m in re.findall(r'"filename":\s*"([^"]*)"', a)]


def drive_options(argv: Sequence[str], device_id: str) -> dict[str, object] | None:
    """The options the block node under the ``-device`` whose ``id`` is ``device_id`` was opened with
    (its ``-blockdev`` JSON, ``node-name`` and ``file`` aside: what ``blockdev-reopen`` needs besides
    them, an option it is not given going back to its default); None where ``argv`` has no such device
    or node in JSON form."""
    def objects(option: str) -> list[dict[str, object]]:
        found = []
        for a, value in itertools.pairwise(argv):
            if a == option and value.startswith("{"):
                try:
                    found.append(json.loads(value))
                except ValueError:
                    continue
        return found
    drive = next((d.get("drive") for d in objects("-device") if d.get("id") == device_id), None)
    node = next((b for b in objects("-blockdev") if drive is not None and b.get("node-name") == drive), None)
    return None if node is None else {k: v for k, v in node.items() if k not in ("node-name", "file")}


#: What the host does when the guest asks (``HOST <name> <args>``): given QEMU's monitor and the
#: guest's words after the name, it returns the line the guest reads back as ``$ANSWER`` (one line).
HostAction = Callable[[Qmp, Sequence[str]], str]


@dataclass(frozen=True)
class HostCall:
    """One host action the guest asked for: its name and words, the host's monotonic clock in ns
    around it, and the answer it gave the guest (or the error that stopped it, the answer then being
    ``ERROR <message>``)."""

    name: str
    args: tuple[str, ...]
    begin_ns: int
    end_ns: int
    answer: str
    error: str = ""


@dataclass
class Boot:
    """What one boot gave: the host wall time of each marker, the guest's lines, QEMU's exit."""

    lines: list[str] = field(default_factory=list)
    marks: dict[str, float] = field(default_factory=dict)
    exit_status: int | None = None
    stderr: str = ""
    #: every ``HOST`` request of the guest, in order, with what the host did
    host_calls: list[HostCall] = field(default_factory=list)


def replay_line(console_line: str) -> str | None:
    """What the guest's script said on a console line (after its prefix), None for any other line."""
    at = console_line.find(PREFIX + " ")
    return console_line[at + len(PREFIX) + 1:].rstrip("\r\n") if at >= 0 else None


def boot(qemu: str, args: Sequence[str], timeout_s: float, console: Path, qmp: Qmp | None = None,
         actions: Mapping[str, HostAction] | None = None) -> Boot:
    """Run QEMU until the guest powers off (or ``timeout_s``), its serial console on stdio: the
    replay's lines are kept, each BEGIN and END stamped with the host's wall clock (the trace's). At
    each ``HOST <name> <args>`` line the host runs ``actions[name]`` with ``qmp`` (QEMU's monitor, given
    in ``args``) and answers the guest, which waits for it, with its result on its console. QEMU's own
    events (``DEVICE_DELETED``, ``BLOCK_IO_ERROR``...) are kept by ``qmp`` (Qmp.events)."""
    out = Boot()
    try:
        proc = subprocess.Popen([qemu, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
    except OSError as e:
        raise CannotTest(f"QEMU did not start: {qemu}: {e.strerror or e}") from e
    err: list[bytes] = []
    reader = threading.Thread(target=lambda: err.append(proc.stderr.read() if proc.stderr else b""), daemon=True)
    reader.start()
    timer = threading.Timer(timeout_s, proc.kill)
    timer.start()
    try:
        with open(console, "wb") as log:
            assert proc.stdout is not None
            for raw in proc.stdout:
                log.write(raw)
                line = replay_line(raw.decode(errors="replace"))
                if line is None:
                    continue
                out.lines.append(line)
                word = line.split(" ", 2)
                if word[0] in ("BEGIN", "END", "OPEN", "CLOSE") and len(word) > 1:
                    out.marks[f"{word[0]} {word[1]}"] = time.time()
                elif word[0] == "HOST" and len(word) > 1:
                    _answer(proc, _host_call(qmp, actions or {}, line.split()[1:]), out)
        out.exit_status = proc.wait()
    finally:
        timer.cancel()
        if qmp is not None:
            qmp.close()
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.join(5)
    out.stderr = b"".join(err).decode(errors="replace")
    return out


def _send(proc: subprocess.Popen[bytes], line: bytes) -> None:
    """A line on the guest's console (it waits for one on its fd 3)."""
    if proc.stdin is not None:
        try:
            proc.stdin.write(line)
            proc.stdin.flush()
        except OSError:
            pass  # QEMU has gone: its exit says why


def _host_call(qmp: Qmp | None, actions: Mapping[str, HostAction], words: Sequence[str]) -> HostCall:
    name, args = words[0], tuple(words[1:])
    t0 = time.monotonic_ns()
    try:
        if name not in actions:
            raise QmpError(f"the replay has no host action {name} (it has {', '.join(sorted(actions)) or 'none'})")
        if qmp is None:
            raise QmpError("the replay started QEMU without its monitor")
        answer = actions[name](qmp, args).replace("\n", " ")
        return HostCall(name, args, t0, time.monotonic_ns(), answer)
    except (QmpError, ValueError, OSError) as e:
        return HostCall(name, args, t0, time.monotonic_ns(), f"ERROR {e}".replace("\n", " "), str(e))


def _answer(proc: subprocess.Popen[bytes], call: HostCall, out: Boot) -> None:
    out.host_calls.append(call)
    _send(proc, call.answer.encode() + b"\n")


def replay_cmdline(run_cmdline: str) -> str:
    """The run's kernel command line without its SSH key, with the replay's script as init, and a
    panic that ends QEMU at once (with ``-no-reboot``) instead of waiting for the replay's timeout."""
    kept = [w for w in run_cmdline.split() if not w.startswith(("vioconform.key=", "rdinit=", "panic="))]
    return " ".join([*kept, f"rdinit=/{SCRIPT_PATH}", "panic=-1"])
