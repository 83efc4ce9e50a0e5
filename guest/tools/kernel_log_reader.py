"""The guest's kernel log: a mark written into it before a rule, the lines after the mark read
back, one guest command each or each sent with another command (``mark_with_next``, ``since_with_next``:
transport/ride_along.py) (the kernel-log check: model/kernel_log_check.py, suites/kernel_log_watch.py);
and the ``kernel-warning`` fault's action, which makes the kernel print a real WARNING.

The mark is a line written into ``/dev/kmsg``; the kernel stores it in its ring buffer like its
own lines (with a program's facility, so it never passes for the kernel's), and the lines after
it are the ones logged since. No count or time stamp of the buffer is needed, and a buffer that
wrapped shows as a mark that is gone. The lines are read with ``dmesg -r`` (util-linux, or the
busybox applet of the embedded guest), else ``journalctl -k`` where ``dmesg`` is refused
(``kernel.dmesg_restrict`` with a user that lacks CAP_SYSLOG: the suite's commands run as root,
so only a guest that confines root meets it). Only the lines after the mark cross the SSH link.
"""

from __future__ import annotations

import re
import secrets
import shlex
from dataclasses import dataclass

from guest.tools.tool import GuestTool
from transport.ride_along import Rider, RidingShell
from transport.ssh import CommandResult, GuestCommandError

#: A mark's line in the kernel log: ``<5>`` (notice, below the console's level under ``quiet``: it
#: does not reach the serial console) and the suite's name; the token makes it unique.
MARK_LINE = "<5>vioconform: kernel-log mark {token} {label}"
#: What a guest command of the check may take: both are one ``echo`` or one ``dmesg`` under TCG
#: (0.03-0.3 s measured); a guest that does not answer in this time is a harness error.
COMMAND_TIMEOUT_S = 60.0

#: Prints ``VIOCONFORM-KLOG source=dmesg|journal|none``, ``VIOCONFORM-KLOG mark=found|lost`` and
#: then the lines after the last line holding the token (every line, where none holds it).
SINCE_SCRIPT = r"""
t={token}
klog() {
  if dmesg -r 2>/dev/null; then echo "VIOCONFORM-KLOG source=dmesg"
  elif command -v journalctl >/dev/null 2>&1 && journalctl -k -b -q -o short-monotonic --no-pager 2>/dev/null; then
    echo "VIOCONFORM-KLOG source=journal"
  else echo "VIOCONFORM-KLOG source=none"
  fi
}
klog | awk -v t="$t" '/^VIOCONFORM-KLOG /{s=$0; next} index($0, t){n=0; f=1; next} {b[++n]=$0}
  END{print s; print "VIOCONFORM-KLOG mark=" (f ? "found" : "lost"); for (i = 1; i <= n; i++) print b[i]}'
"""
_LABEL = re.compile(r"[^A-Za-z0-9_.:/\[\]=,-]+")


class KernelLogUnreadable(RuntimeError):
    """The guest's kernel log cannot be marked or read: the message says why, in the guest's words."""


@dataclass(frozen=True)
class KernelLogRead:
    """The lines the guest's kernel log holds after a mark, as printed (model/parse/dmesg.py
    reads them), what printed them ("dmesg", "journal") and whether the mark was still there."""

    source: str
    text: str
    mark_found: bool


@dataclass
class Mark:
    """A mark in the kernel log: its ``token`` (for :meth:`KernelLog.since`) and, where it rides with the
    guest's next command (:meth:`KernelLog.mark_with_next`), the Rider that writes it."""

    token: str
    rider: Rider | None = None


class KernelLog(GuestTool):
    name = "kernel log"

    def mark(self, label: str) -> str:
        """Write a mark into the kernel log (``label`` says what follows it: a rule and its
        configuration) and return its token, for :meth:`since`."""
        token, command = _mark_command(label)
        ran = self._run(command, check=False, timeout_s=COMMAND_TIMEOUT_S)
        if not ran.ok:
            raise KernelLogUnreadable(f"cannot write a mark into /dev/kmsg ({_said(ran)})")
        return token

    def mark_with_next(self, label: str) -> Mark:
        """:meth:`mark`, sent with the guest's next command, before it, where the shell can carry it
        (transport/ride_along.py: no round trip of its own), else now; :meth:`written` then says whether it was."""
        if not isinstance(self.shell, RidingShell):
            return Mark(self.mark(label))
        token, command = _mark_command(label)
        return Mark(token, self.shell.ride_along(command))

    def written(self, mark: Mark) -> None:
        """KernelLogUnreadable where ``mark`` could not be written (nothing where it is still queued)."""
        r = mark.rider
        if r is None or r.pending:
            return
        if r.lost:
            raise KernelLogUnreadable(f"cannot write a mark into /dev/kmsg ({r.lost})")
        if r.status != 0:
            words = r.output.strip().splitlines()
            raise KernelLogUnreadable(f"cannot write a mark into /dev/kmsg (exit {r.status}"
                                      + (f": {words[-1]})" if words else ")"))

    def since_with_next(self, mark: Mark) -> Rider | None:
        """:meth:`since`, sent with the guest's next command, after it, where the shell can carry it (None:
        it cannot); :meth:`since` with the Rider reads its answer."""
        if not isinstance(self.shell, RidingShell):
            return None
        return self.shell.ride_along(_since_command(mark.token), after=True)

    def since(self, token: str, rode: Rider | None = None) -> KernelLogRead:
        """The kernel log's lines after the mark ``token`` (all of them where the buffer wrapped and the
        mark is gone); KernelLogUnreadable where neither dmesg nor the journal could be read. ``rode``:
        the answer of :meth:`since_with_next`, read where its command ran (else the log is read now)."""
        command = _since_command(token)
        if rode is not None and rode.ran:
            ran = CommandResult(command, rode.status or 0, rode.output, "", 0.0)
        else:
            if rode is not None and isinstance(self.shell, RidingShell):
                self.shell.drop_rider(rode)
            ran = self._run(command, check=False, timeout_s=COMMAND_TIMEOUT_S)
        head, _, rest = ran.stdout.partition("\n")
        state, _, text = rest.partition("\n")
        source = head.removeprefix("VIOCONFORM-KLOG source=")
        if not ran.ok or source == head or state not in ("VIOCONFORM-KLOG mark=found", "VIOCONFORM-KLOG mark=lost"):
            raise KernelLogUnreadable(f"the kernel-log script printed no answer ({_said(ran)})")
        if source == "none":
            raise KernelLogUnreadable("neither `dmesg -r` nor `journalctl -k` could read it in the guest")
        return KernelLogRead(source, text, state.endswith("found"))


def _mark_command(label: str) -> tuple[str, str]:
    """A fresh token and the command that writes its mark, labelled ``label``, into the kernel log."""
    token = secrets.token_hex(8)
    line = MARK_LINE.format(token=token, label=_LABEL.sub("_", label)[:200])
    return token, f"echo {shlex.quote(line)} > /dev/kmsg"


def _since_command(token: str) -> str:
    if not re.fullmatch(r"[0-9a-f]+", token):
        raise ValueError(f"not a kernel-log mark's token: {token!r}")
    return SINCE_SCRIPT.replace("{token}", token)


def _said(ran: CommandResult) -> str:
    words = (ran.stderr.strip() or ran.stdout.strip()).splitlines()
    return f"exit {ran.exit_status}" + (f": {words[-1]}" if words else "")


#: The ``kernel-warning`` fault's action. The scheduler's own debug check ``WARN_DOUBLE_CLOCK``
#: (a feature of /sys/kernel/debug/sched/features, CONFIG_SCHED_DEBUG, set in Debian's kernels)
#: warns when a run queue's clock is updated twice under one lock; taking CPU 1 offline while a
#: task runs there does that in Linux 6.1 (__balance_push_cpu_stop), and the kernel prints
#: ``WARNING: CPU: 1 PID: 20 at kernel/sched/core.c:752 update_rq_clock+0xb6/0x190`` with its stack.
#: The feature is a WARN_ONCE: clear_warn_once makes it warn again in every rule test that asks.
#: Everything it changes is restored on the way out (trap), whatever happened: the feature off,
#: CPU 1 online, the busy task gone, debugfs unmounted where it mounted it (the embedded guest's init
#: mounts it; a systemd image may not have). Exit 3: the guest cannot carry the fault; 4: the kernel did not warn.
PROVOKE_SCRIPT = r"""
d=/sys/kernel/debug
f=$d/sched/features
c=/sys/devices/system/cpu/cpu1/online
mounted= on= offline= busy=
restore() {
  [ -n "$offline" ] && echo 1 > "$c"
  [ -n "$on" ] && echo NO_WARN_DOUBLE_CLOCK > "$f"
  [ -n "$busy" ] && kill "$busy" 2>/dev/null
  [ -n "$mounted" ] && umount $d
}
trap restore EXIT
grep -q " $d debugfs " /proc/mounts || { mount -t debugfs debugfs $d 2>/dev/null && mounted=1; }
[ -w "$f" ] || { echo "the guest's kernel has no $f (it needs CONFIG_SCHED_DEBUG and debugfs)"; exit 3; }
[ "$(cat /proc/sys/kernel/panic_on_warn 2>/dev/null || echo 0)" = 0 ] || { echo "kernel.panic_on_warn is set: a warning would panic the guest"; exit 3; }
[ -w "$c" ] && [ "$(cat "$c")" = 1 ] || { echo "the guest has no second online CPU (cpu1) to take offline"; exit 3; }
grep -qw NO_WARN_DOUBLE_CLOCK "$f" || { echo "the scheduler's WARN_DOUBLE_CLOCK check is on already: not the suite's to turn off"; exit 3; }
command -v taskset >/dev/null 2>&1 || { echo "the guest has no taskset (busybox or util-linux) to run a task on cpu1"; exit 3; }
n() { dmesg 2>/dev/null | grep -c 'WARNING: CPU:'; }
before=$(n)
echo 1 > $d/clear_warn_once
echo WARN_DOUBLE_CLOCK > "$f" && on=1
taskset 2 sh -c 'while :; do :; done' & busy=$!
echo 0 > "$c" && offline=1 && echo 1 > "$c" && offline=
[ "$(n)" -gt "$before" ] || { echo "the kernel printed no WARNING when CPU 1 went offline with WARN_DOUBLE_CLOCK on (a kernel with the double clock update fixed)"; exit 4; }
echo warned
"""


class KernelWarningUnavailable(RuntimeError):
    """The guest cannot carry the ``kernel-warning`` fault (``applicable`` False: no scheduler debug
    files, one CPU, panic_on_warn), or its kernel did not warn (``applicable`` True): the rule it
    runs under skips with this reason."""

    def __init__(self, message: str, applicable: bool) -> None:
        super().__init__(message)
        self.applicable = applicable


class KernelWarning(GuestTool):
    """The ``kernel-warning`` fault's action (PROVOKE_SCRIPT): one guest command, 0.3-0.6 s under TCG."""

    name = "kernel warning"

    def provoke(self) -> None:
        ran = self._run(PROVOKE_SCRIPT, check=False, timeout_s=COMMAND_TIMEOUT_S)
        if ran.ok and ran.stdout.strip().endswith("warned"):
            return
        said = ran.stdout.strip().splitlines()
        if ran.exit_status in (3, 4) and said:
            raise KernelWarningUnavailable(said[-1], applicable=ran.exit_status == 4)
        raise GuestCommandError(ran, "making the guest's kernel warn (the kernel-warning fault)")
