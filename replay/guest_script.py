"""The replay's init in the guest: the embedded guest boots with ``rdinit=`` pointing at this
script (appended to its initramfs as a second cpio archive, replay/cpio.py) instead of its own
init (which would start SSH). It loads the disk's drivers, finds the disk under test by its serial,
applies the run's set-up in order, runs each fio job and prints what it measured on the serial
console, each line prefixed with :data:`PREFIX`, then powers the guest off.

Lines it prints: ``DISK <name>``, ``SETUP <rc> <what>``, ``BEGIN <job>``, ``<job> <part> <line>`` for
the parts ``fio`` (fio's JSON), ``diskstats0|1`` (/proc/diskstats before and after), ``stat0|1``
(/proc/stat), ``uptime0|1``, ``inflight`` (samples of /sys/block/X/inflight while fio ran), then
``END <job> <fio's exit status>``, and ``DONE`` last; before the jobs, ``path limits <line>``: the guest's
limits on the disk's path, and ``disk limits <line>``: the disk's limits, both after the set-up. The
script asks the host for what only the host can do or read with ``HOST <name> <args>`` (its shell
function ``host``) and waits for one line back on its console, ``$ANSWER``: a counted job asks for the
disk's counters (host action ``counters <disk> <job> before``) before fio starts and again (``after``)
once it ended. As in the run, the kernel log is marked after the set-up and what the kernel logged
after the mark is printed last, as ``kernel log <line>`` (``dmesg -r``'s lines), for the kernel-log check.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

#: Every line the script prints for the host starts with this.
PREFIX = "VIOC-REPLAY"
#: Where the script sits in the guest's initramfs (the kernel's ``rdinit=``).
SCRIPT_PATH = "vioconform-replay"
#: The replay's mark in the guest's kernel log (a notice: under the console's level, off the console).
KLOG_MARK = "vioconform-replay: kernel-log mark"
#: Seconds the script waits for the disk to appear after its drivers load.
DISK_WAIT_S = 30
#: Seconds the script waits for the host's answer to a host action before it goes on without it (a
#: counted job's counters are then missing, and the replay says the evidence is incomplete).
HOST_WAIT_S = 60
#: The host action a counted job asks for before and after fio: the disk's counters (QMP ``query-blockstats``).
COUNTERS = "counters"


@dataclass(frozen=True)
class Job:
    """One fio run: its name and fio's arguments but the target (``--filename`` is the disk)."""

    name: str
    args: tuple[str, ...]
    #: the disk (its name in QEMU's monitor) whose counters the host reads right before and after the
    #: job (host action ``counters``); "": none
    counted: str = ""
    #: shell lines run before the job starts (a filesystem made, a file laid out): their output is the
    #: job's part ``prepared``; they may call ``apply_setup`` (the run's set-up again, as after a re-read)
    #: and ``host <name> <args>`` (a host action, its answer in ``$ANSWER``).
    #: A job without fio (no ``args``) runs them alone, between its BEGIN and END.
    prepare: str = ""
    #: fio's file: the disk, or a file on it
    target: str = "/dev/$DEV"
    #: shell lines run while fio runs (fio's pid in ``$FIO``), e.g. ``host grow``: their output is
    #: the job's part ``during``
    during: str = ""
    #: a measured window as the run's (measure/window.py): 0 measures fio's whole run; otherwise the
    #: guest waits ``ramp_s`` after fio starts, takes its "0" readings and says ``OPEN <job>``, samples
    #: inflight for ``window_s``, takes its "1" readings, says ``CLOSE <job>`` and stops fio (SIGINT),
    #: whose run time must outlast the window
    window_s: float = 0.0
    ramp_s: float = 0.0


def _setup_lines(setup: Sequence[Mapping[str, str]]) -> list[str]:
    lines = []
    for step in setup:
        if "sysfs" in step:
            what = f"/sys/block/$DEV/{step['sysfs']} = {step['value']}"
            cmd = f"echo {shlex.quote(step['value'])} > /sys/block/$DEV/{step['sysfs']}"
        else:
            what = step["shell"]
            cmd = step["shell"]
        lines.append(f"( {cmd} ) >/dev/null 2>&1; say SETUP $? {shlex.quote(what)}")
    return lines


_READ0 = "cat /proc/diskstats > /tmp/d0; cat /proc/stat > /tmp/s0; cut -d' ' -f1 /proc/uptime > /tmp/u0"
_READ1 = "cat /proc/diskstats > /tmp/d1; cat /proc/stat > /tmp/s1; cut -d' ' -f1 /proc/uptime > /tmp/u1"


def _windowed_lines(job: Job, fio: str) -> list[str]:
    """fio started, the window measured inside its run as the run measures it, then fio stopped."""
    n = job.name
    return [
        f"fio {fio} --filename={job.target} --output-format=json > /tmp/fio.json 2>/tmp/fio.err &",
        "FIO=$!; : > /tmp/inflight",
        f"usleep {round(job.ramp_s * 1e6)}", _READ0, f"say OPEN {n}",
        "( while :; do cat /sys/block/$DEV/inflight >> /tmp/inflight; usleep 100000; done ) & SAMPLER=$!",
        f"usleep {round(job.window_s * 1e6)}", _READ1, f"say CLOSE {n}",
        "kill $SAMPLER; kill -INT $FIO 2>/dev/null; wait $FIO; RC=$?",
    ]


def _job_lines(job: Job) -> list[str]:
    n = job.name
    if not job.args:  # no fio: the preparation alone, between the job's marks
        return [f"say BEGIN {n}", f"(\n{job.prepare}\n) > /tmp/prep 2>&1; RC=$?", f"dump {n} prepared /tmp/prep",
                f"say END {n} $RC"]
    fio = " ".join(shlex.quote(a) for a in job.args)
    ref = shlex.quote(job.counted)
    count = [f"host {COUNTERS} {ref} {n} before"] if job.counted else []
    counted = [f"host {COUNTERS} {ref} {n} after"] if job.counted else []
    prepare = [f"(\n{job.prepare}\n) > /tmp/prep 2>&1", f"dump {n} prepared /tmp/prep"] if job.prepare else []
    whole = [
        _READ0,
        *count,
        f"fio {fio} --filename={job.target} --output-format=json > /tmp/fio.json 2>/tmp/fio.err &",
        "FIO=$!; : > /tmp/inflight",
        *([f"(\n{job.during}\n) > /tmp/during 2>&1", f"dump {n} during /tmp/during"] if job.during else []),
        "while kill -0 $FIO 2>/dev/null; do cat /sys/block/$DEV/inflight >> /tmp/inflight; usleep 100000; done",
        "wait $FIO; RC=$?",
        *counted,
        _READ1,
    ]
    return [
        *prepare,
        f"say BEGIN {n}",
        *(_windowed_lines(job, fio) if job.window_s > 0 else whole),
        *(f"dump {n} {part} {path}" for part, path in (
            ("fio", "/tmp/fio.json"), ("fioerr", "/tmp/fio.err"), ("diskstats0", "/tmp/d0"),
            ("diskstats1", "/tmp/d1"), ("stat0", "/tmp/s0"), ("stat1", "/tmp/s1"), ("uptime0", "/tmp/u0"),
            ("uptime1", "/tmp/u1"), ("inflight", "/tmp/inflight"))),
        f"say END {n} $RC",
    ]


def _read_lines(script: str, part: str) -> list[str]:
    """One of the run's scripts that read the disk's sysfs (the sysfs tool's), run on the replay's disk
    after the set-up: its lines as the part ``part`` (``path limits``, ``disk limits``)."""
    if not script:
        return []
    return ["(", script.replace("{disk}", "$DEV"), ") > /tmp/read 2>/dev/null", f"dump {part} /tmp/read"]


def _probe_lines(serials: Sequence[str], limits_script: str) -> list[str]:
    """Each disk's limits as its driver set them, before the set-up (the run's probe): part ``probed <serial>``."""
    if not limits_script:
        return []
    return [line for s in serials for line in (
        f"P=$(wait_disk {shlex.quote(s)})", "if [ -n \"$P\" ]; then (",
        limits_script.replace("{disk}", "$P"), f") > /tmp/read 2>/dev/null; dump probed {shlex.quote(s)} /tmp/read; fi")]


def guest_script(serial: str, drivers: Sequence[str], setup: Sequence[Mapping[str, str]],
                 jobs: Sequence[Job], path_script: str = "", limits_script: str = "", probe: Sequence[str] = ()) -> str:
    """The init script: find the disk of ``serial``, apply ``setup`` (the shell function ``apply_setup``), read the path's limits with
    ``path_script`` and the disk's with ``limits_script`` (each if given), run ``jobs``, power off. The
    limits of the disks of ``probe`` (serials) are read before the set-up, as the run probed them."""
    # virtio_pci first, as the guest's own init loads it: every virtio device sits behind it.
    mods = " ".join(shlex.quote(d) for d in ("virtio_pci", *(d for d in drivers if d != "virtio_pci")))
    return "\n".join([
        "#!/bin/busybox sh",
        "/bin/busybox --install -s /bin",
        "export PATH=/bin:/sbin:/usr/bin:/usr/sbin",
        "mkdir -p /proc /sys /dev /tmp",
        "mount -t proc proc /proc; mount -t sysfs sysfs /sys; mount -t devtmpfs devtmpfs /dev; mount -t tmpfs tmpfs /tmp",
        # as the guest's own init (images/init): debugfs for the kernel-warning fault; ext4 (which mounts
        # ext2 too) loaded by the kernel's own modprobe when a rule first mounts a filesystem
        "mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null",
        "echo /bin/modprobe > /proc/sys/kernel/modprobe; echo ext4 > /etc/filesystems",
        f"say() {{ echo \"{PREFIX} $*\" > /dev/ttyS0; }}",
        f"dump() {{ sed \"s/^/{PREFIX} $1 $2 /\" \"$3\" > /dev/ttyS0; }}",
        # the console held open for reading: the host's answers wait in it until read
        "exec 3</dev/ttyS0", "stty -echo <&3 2>/dev/null",
        f"host() {{ ANSWER=; say HOST \"$@\"; read -t {HOST_WAIT_S} ANSWER <&3; }}",
        "echo 1 > /proc/sys/kernel/printk",
        f"for m in {mods}; do modprobe \"$m\" 2>/dev/null; done",
        "find_disk() { for b in /sys/block/*; do",
        "  grep -qsw \"$1\" \"$b/serial\" \"$b/device/vpd_pg80\" \"$b/device/serial\" && echo ${b##*/}; done; }",
        (f"wait_disk() {{ for i in $(seq {DISK_WAIT_S * 10}); do d=$(find_disk \"$1\"); "
         "[ -n \"$d\" ] && echo $d && return; usleep 100000; done; }"),
        f"DEV=$(wait_disk {shlex.quote(serial)})",
        "if [ -z \"$DEV\" ]; then say NODISK $(ls /sys/block | tr '\\n' ' '); poweroff -f; fi",
        "say DISK $DEV",
        *_probe_lines(probe, limits_script),
        "apply_setup() {", ":", *_setup_lines(setup), "}",
        "apply_setup",
        *_read_lines(path_script, "path limits"),
        *_read_lines(limits_script, "disk limits"),
        f"echo '<5>{KLOG_MARK}' > /dev/kmsg",
        *(line for job in jobs for line in _job_lines(job)),
        f"dmesg -r | sed '1,/{KLOG_MARK}/d' > /tmp/klog; dump kernel log /tmp/klog",
        "say DONE",
        "sync; poweroff -f",
        "",
    ])
