"""Start the two-host pool (this machine's libvirt plus a loopback sshd standing in for a remote
host, ``-n 2``) again and again, with one core kept busy, and count the starts in which a
pytest-xdist worker did not start: the test of fixtures/workerstart.py's watch, and of a worker
start that waits on no host (the preflight runs in the controller: fixtures/preflight.py). Prints each worker's start-up time (from the suite's own "worker gwN ready in X s"
line: from the controller's hand-over to the worker's collection report) and the hangs.

Each start runs ``pytest suites --hosts INVENTORY -n 2 -k limits --controllers virtio-blk`` and
is interrupted (SIGINT, as Ctrl-C) as soon as both workers have reported their collection: the
start is what is measured, not the rule. A start counts as a hang when the workers have not
reported within the watch's timeout plus a margin, or the run says a worker was not started; its
output and the late workers' stacks (``logs/worker-start/`` of its results directory) are kept
and their place printed.

    python -m bench.pool --starts 50 [--busy-cores 1]
"""

from __future__ import annotations

import os
import queue
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.sshserver import private_sshd
from bench.suite_run import start_suite
from fixtures.workerstart import WORKER_START_TIMEOUT_S

READY = re.compile(r"worker (gw\d+) ready in ([0-9.]+) s")
#: Beyond the watch's own timeout: the watch stops the run itself, and says so, within it.
HANG_MARGIN_S = 30.0
#: An interrupted start tears down what it had started (a guest booting); it ends within this.
STOP_TIMEOUT_S = 90.0


@dataclass
class Start:
    ready_s: dict[str, float] = field(default_factory=dict)
    hung: bool = False
    took_s: float = 0.0
    kept: Path | None = None


def busy(cores: int) -> list[subprocess.Popen[bytes]]:
    """Processes that keep ``cores`` cores busy until killed."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(cores)]


def one_start(results: Path, inventory: Path, store: Path) -> tuple[Start, str]:
    t0 = time.monotonic()
    proc = start_suite(results, "--hosts", str(inventory), "--controllers", "virtio-blk", "-k", "limits", "-n", "2",
                       "--store", f"sqlite:///{store}", "-o", "log_cli=true", "-o", "log_cli_level=INFO",
                       unbuffered=True)
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    start, out = Start(), []
    deadline = t0 + WORKER_START_TIMEOUT_S + HANG_MARGIN_S
    while len(start.ready_s) < 2:
        try:
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            start.hung = True
            break
        if line is None:
            break
        out.append(line)
        if m := READY.search(line):
            start.ready_s[m.group(1)] = float(m.group(2))
        if "not started within" in line:
            start.hung = True
    start.took_s = time.monotonic() - t0
    if len(start.ready_s) < 2:
        start.hung = True
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    while (line := lines.get(timeout=5)) is not None:
        out.append(line)
    return start, "".join(out)


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m bench.pool --starts", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--starts", type=int, default=50, help="how many pool starts (default 50)")
    ap.add_argument("--busy-cores", type=int, default=1, help="cores kept busy meanwhile (default 1)")
    args = ap.parse_args(argv)
    keep = Path(tempfile.mkdtemp(prefix="vioconform-bench-starts-", dir="/var/tmp"))
    starts: list[Start] = []
    load = busy(args.busy_cores)
    try:
        with private_sshd() as sshd:
            inventory = keep / "hosts.toml"
            inventory.write_text(f'[[host]]\nname = "here"\nuri = "qemu:///system"\n\n'
                                 f'[[host]]\nname = "loop"\nuri = "{sshd.uri()}"\nhost_dir = "{keep / "staging"}"\n')
            for i in range(args.starts):
                results = keep / f"start{i:03d}"
                start, out = one_start(results, inventory, keep / "vioconform.db")
                starts.append(start)
                if start.hung:
                    start.kept = results
                    (keep / f"start{i:03d}.out").write_text(out)
                shown = ", ".join(f"{w} {s:.1f} s" for w, s in sorted(start.ready_s.items()))
                print(f"start {i + 1:3d}/{args.starts}: {'HANG' if start.hung else 'ok  '} {start.took_s:5.1f} s "
                      f"({shown})" + (f"; output and stacks in {keep}" if start.hung else ""), flush=True)
    finally:
        for p in load:
            p.kill()
            p.wait()
    ready = [s for start in starts for s in start.ready_s.values()]
    hangs = sum(start.hung for start in starts)
    print(f"\nhangs: {hangs} of {len(starts)} starts (busy cores: {args.busy_cores}, "
          f"{os.cpu_count()} cores in all)")
    if ready:
        print(f"worker start-up: median {statistics.median(ready):.1f} s, max {max(ready):.1f} s "
              f"over {len(ready)} worker starts")
    if not hangs:
        import shutil
        shutil.rmtree(keep, ignore_errors=True)
    return 1 if hangs else 0
