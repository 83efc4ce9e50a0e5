"""Run the conformance suite as a user does (``python -m pytest suites ...``) and read its JUnit file.

Shared by the benchmarks (``python -m bench.rules``) and the end-to-end tests (tests/e2e), which
both judge a whole run by its exit code, its output and the verdict of each test case.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from hypervisors.cleanup import OWNER_FILE, RUN_DIR_PREFIX
from hypervisors.libvirt.qemulog import QEMU_LOG_DIR

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class SuiteRun:
    """One finished run: its exit code, its output (stdout and stderr together), its results directory."""

    returncode: int
    output: str
    results: Path
    pid: int

    @property
    def reports(self) -> str:
        """The output before pytest's short test summary: each test's own report. Count repeated
        messages here: the summary repeats them, whole when $CI is set, cut to the terminal's width otherwise."""
        return self.output.split("short test summary info")[0]

    @property
    def junit(self) -> Path:
        return self.results / "junit.xml"

    def cases(self) -> dict[str, ET.Element]:
        """Test case name (``queue-depth[libvirt:virtio-scsi:latency5ms]``) -> its JUnit element."""
        root = ET.parse(self.junit).getroot()
        return {c.get("name", ""): c for c in root.iter("testcase")}

    def outcomes(self) -> dict[str, str]:
        """Test case name -> passed, failed, skipped or error."""
        out = {}
        for name, case in self.cases().items():
            kind = next((k for k in ("failure", "error", "skipped") if case.find(k) is not None), "passed")
            out[name] = {"failure": "failed"}.get(kind, kind)
        return out

    def suite_properties(self) -> dict[str, str]:
        """The JUnit suite's properties: the options, whether the run completed, and what was tested
        (``image``, ``guest.kernel``, ``disk.<controller>.driver``, ...: docs/reference.md, "What was tested")."""
        root = ET.parse(self.junit).getroot()
        suite = root if root.tag == "testsuite" else root.find("testsuite")
        props = None if suite is None else suite.find("properties")
        return {} if props is None else {p.get("name", ""): p.get("value", "") for p in props}

    @staticmethod
    def failure_text(case: ET.Element) -> str:
        """A failed case's whole explanation: its <failure>'s text (the message attribute is only
        its first ``FAIL:`` line); "" for a case that did not fail."""
        failure = case.find("failure")
        return "" if failure is None else failure.text or ""

    @staticmethod
    def props(case: ET.Element) -> dict[str, str]:
        props = case.find("properties")
        return {} if props is None else {p.get("name", ""): p.get("value", "") for p in props}

    @property
    def left_behind(self) -> list[str]:
        """What this run left on the host: its domains (the suite names them vioconform-<pid>),
        its run directories (owner.pid) and libvirt's QEMU logs of its domains."""
        return left_behind_by(self.pid)


def run_dirs_of(pids: set[int], tmpdir: Path = Path("/tmp")) -> list[Path]:
    """The run directories in ``tmpdir`` (the runs' $TMPDIR) that the given processes made (owner.pid)."""
    owners = {str(p) for p in pids}
    return [d for d in tmpdir.glob(f"{RUN_DIR_PREFIX}*")
            if (d / OWNER_FILE).exists() and (d / OWNER_FILE).read_text().strip() in owners]


def left_behind_by(pid: int) -> list[str]:
    names = (f"vioconform-{pid}", f"vioconform-kvmprobe-{pid}")
    domains = [d for d in active_vioconform_domains() if d in names]
    run_dirs = [str(d) for d in run_dirs_of({pid})]
    logs = [str(p) for p in (QEMU_LOG_DIR / f"{n}.log" for n in names) if p.exists()]
    return domains + run_dirs + logs


def active_vioconform_domains() -> list[str]:
    out = subprocess.run(["virsh", "-c", "qemu:///system", "list", "--name"], capture_output=True, text=True,
                         check=False).stdout
    return [n for n in out.split() if n.startswith("vioconform-")]


#: Exec'd in the child before pytest: SIGINT as a terminal's foreground job has it. A process
#: started in the background (``cmd &`` in a script, as CI and nohup jobs are) inherits SIGINT
#: *ignored*, and Python then installs no KeyboardInterrupt handler: the suite would never see
#: the Ctrl-C the tests send it.
#: ``exec`` keeps the pid, which names the suite's guest (``vioconform-<pid>``).
FOREGROUND = "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])"


#: Runs the command after it under another host name, in a UTS namespace of its own (util-linux
#: ``unshare``, root): ``unshare`` and ``sh`` exec, so the pid stays the suite's.
_AS_MACHINE = ("unshare", "--uts", "--", "sh", "-c", 'hostname "$0" && exec "$@"')


def start_suite(results: Path, *args: str, env: dict[str, str] | None = None, unbuffered: bool = False,
                machine: str | None = None) -> subprocess.Popen[str]:
    """Start the conformance suite as a user does (``python -m pytest suites ...``), results to
    ``results``, stdout and stderr together; SIGINT reaches it as a Ctrl-C would. Unless ``args``
    name a ``--store``, the run is stored beside ``results`` (``vioconform.db`` in its parent), not
    in the working directory's ``results/``. ``machine``: the host name the run sees, as if it ran
    on another machine that shares this one's libvirt (the suite leaves other machines' domains alone)."""
    store = [] if any(a == "--store" or a.startswith("--store=") for a in args) else [
        "--store", f"sqlite:///{results.resolve().parent / 'vioconform.db'}"]
    return subprocess.Popen([*((*_AS_MACHINE, machine) if machine else ()),
                             sys.executable, "-c", FOREGROUND, sys.executable, *(["-u"] if unbuffered else []),
                             "-m", "pytest", "suites", "-p", "no:cacheprovider", "--results-dir", str(results),
                             *store, *args],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, **(env or {})})


def run_suite_at(results: Path, *args: str, timeout: float | None = 900, env: dict[str, str] | None = None) -> SuiteRun:
    """Run the conformance suite in a subprocess with extra arguments (and ``env`` added to the
    environment); results go to ``results``. A run past ``timeout`` seconds gets SIGTERM (the
    suite removes its guest as on Ctrl-C) and fails with its output."""
    proc = start_suite(results, *args, env=env)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.terminate()
        out, _ = proc.communicate(timeout=60)
        raise AssertionError(f"the suite did not finish in {timeout} s:\n{out[-3000:]}") from None
    return SuiteRun(proc.returncode, out, results, proc.pid)


def ctrl_c_once_the_guest_runs(proc: subprocess.Popen[str], start_timeout_s: float = 240) -> str:
    """Wait until ``proc``'s guest domain (``vioconform-<pid>``) is running, send SIGINT, and
    return the suite's output once it has ended (within 60 s). The domain is defined a second or
    two after the start idle, but the run's start-up (Python, collection, the preflight) can take over
    60 s on a CI host loaded by three workers' guests: ``start_timeout_s`` is a "never started"
    bound, not a speed goal."""
    name = f"vioconform-{proc.pid}"
    deadline = time.monotonic() + start_timeout_s
    while name not in active_vioconform_domains():
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            raise AssertionError(f"guest {name} never started:\n{proc.communicate(timeout=60)[0][-3000:]}")
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    return proc.communicate(timeout=60)[0]
